//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package command

import "golang.org/x/sys/unix"

// keysMode puts the terminal on fd in the mode `workflow run` prompts in:
// bytes arrive as typed (no line editing), are not echoed by the terminal
// (the prompt echoes them), and Ctrl+C / Ctrl+D are bytes, not a signal
// and an end of file. Output processing stays on, so "\n" still starts a
// new line. The returned func restores the mode found; it is never nil.
func keysMode(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return func() {}, err
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO | unix.ISIG | unix.IEXTEN
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return func() {}, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
