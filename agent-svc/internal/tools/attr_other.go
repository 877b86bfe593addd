//go:build !linux

package tools

import "syscall"

// childAttr has nothing to add where the kernel cannot tie a child's life
// to its parent's.
func childAttr() *syscall.SysProcAttr { return nil }
