//go:build unix

package command

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, and makes cancelling
// it stop the whole group: `go run` and shell wrappers leave the real
// program as a child that a plain kill would orphan.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}
