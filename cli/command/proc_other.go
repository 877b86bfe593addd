//go:build !unix

package command

import "os/exec"

// ownGroup is a no-op where process groups do not exist: cancelling the
// command kills the process itself.
func ownGroup(*exec.Cmd) {}
