//go:build !linux

package topoctl

import "os/exec"

// lockGuardCmd returns the command that runs argv directly: without a
// parent-death signal there is no guard outside Linux (see lock's help).
func lockGuardCmd(argv []string) (*exec.Cmd, bool) {
	return exec.Command(argv[0], argv[1:]...), false
}
