//go:build race

package zk2topo

// raceEnabled says that the tests run with the race detector.
const raceEnabled = true
