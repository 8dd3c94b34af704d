package consultest

import "syscall"

// sysProcAttr makes the agent die with the test binary, so an aborted test
// run leaves no agent behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
