package topoctl

import "syscall"

// setDeathSignal makes the kernel send SIGTERM to the process started with
// a when the thread that started it exits: when topoctl dies, even by
// SIGKILL, the guard of lock's command (see lockGuardCmd) gets it and kills
// the command's whole process group, so that nothing of it outlives the
// lock.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
