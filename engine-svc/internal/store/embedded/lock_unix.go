//go:build unix

package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on <dir>/store.lock, so two
// processes never snapshot over each other. The kernel drops the lock if
// the process dies.
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, "store.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded: data dir %s is in use by another process (%s is locked): %w", dir, path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// isSyncUnsupported reports a directory fsync the file system cannot do.
func isSyncUnsupported(err error) bool { return errors.Is(err, syscall.EINVAL) }
