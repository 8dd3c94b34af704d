package topoctl

import "syscall"

// setDeathSignal makes the kernel send SIGKILL to the process started with
// a when the thread that started it exits: when topoctl dies, even by
// SIGKILL, lock's command dies with it instead of outliving the lock.
// Only the command itself gets it: processes it started in the background
// are not in the kernel's reach (see lock's help).
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
