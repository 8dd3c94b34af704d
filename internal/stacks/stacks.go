// Package stacks reads the stacks of every goroutine of the process, for
// tests that wait until a goroutine is parked at a known place (a send to
// a full channel, a watch's receive) without a synchronising handshake
// that would change what they test.
package stacks

import (
	"runtime"
	"strings"
)

// All returns the stack of every goroutine, one string each, in the
// format of runtime.Stack (the first line names the goroutine and its
// state, e.g. "[select]" or "[chan receive]"). Reading them establishes no
// happens-before edge for the race detector. Safe for concurrent use.
func All() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}
