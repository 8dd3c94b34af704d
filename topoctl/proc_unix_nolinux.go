//go:build unix && !linux

package topoctl

import "syscall"

// setDeathSignal does nothing outside Linux, which alone has a parent-death
// signal: a topoctl killed with SIGKILL there leaves lock's command running
// (see lock's help).
func setDeathSignal(*syscall.SysProcAttr) {}
