//go:build unix

package topoctl

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// setProcessGroup makes c's process the leader of a new process group,
// whose id is its pid. On Linux the process also gets SIGKILL when the
// thread that started it ends (Pdeathsig, see setDeathSignal), which is
// how it ends with topoctl when topoctl is killed: start it from a
// goroutine locked to its OS thread until Wait returns.
func setProcessGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(c.SysProcAttr)
}

// signalGroup sends SIGTERM (SIGKILL when kill) to process group pgid.
func signalGroup(pgid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pgid, sig)
}

// groupAlive reports whether a live (not zombie) process of group pgid is
// left. Zombies are not counted: an orphan's zombie is reaped by the
// system's init, which in some containers never does.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: the group exists
	}
	want := strconv.Itoa(pgid)
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and ")".
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 3 && f[2] == want && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// flock takes an exclusive, non-blocking lock on f (released with unflock
// or when the process ends).
func flock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

func unflock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
