package tools

import "syscall"

// childAttr asks the kernel to kill a stdio server if the process that
// started it dies without closing it (SIGKILL of agent-svc).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
