//go:build !unix

package embedded

// lockDir is a no-op where flock is unavailable: do not open one data
// directory from two processes there.
func lockDir(string) (func(), error) { return func() {}, nil }

// isSyncUnsupported: directories cannot be fsynced on these systems.
func isSyncUnsupported(error) bool { return true }
