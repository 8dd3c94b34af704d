//go:build !unix

package topoctl

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing where there are no Unix process groups:
// only the command itself is signalled.
func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the command itself (pid: the group's id elsewhere);
// there is no gentler signal to send here.
func signalGroup(pid int, _ bool) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// groupAlive reports false: without process groups only the command is
// waited for.
func groupAlive(int) bool { return false }

// flock does not lock here: a second serve on the same data directory is
// not refused early.
func flock(*os.File) error { return nil }

func unflock(*os.File) {}
