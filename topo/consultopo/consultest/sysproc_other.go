//go:build !linux

package consultest

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
