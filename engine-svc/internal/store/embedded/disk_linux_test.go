package embedded_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store/embedded"
)

// A full disk (a real one: a 1 MiB tmpfs, so root only) refuses the write
// with a clear error and acknowledges nothing; reads keep working, and
// writes resume once there is room again.
func TestFullDiskRefusesWritesAndResumes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })

	srv, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer func() { _ = c.Close(); _ = srv.Close() }()
	if err := c.Set(ctx, "before", "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}

	// Fill the disk.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	_ = f.Close()

	big := strings.Repeat("x", 64<<10)
	err = c.Set(ctx, "refused", big, 0).Err()
	if err == nil || !strings.Contains(err.Error(), "cannot persist") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("write on a full disk: err = %v, want a refusal naming the cause", err)
	}
	if v, err := c.Get(ctx, "before").Result(); err != nil || v != "kept" {
		t.Fatalf("read while refusing writes = %q, %v", v, err)
	}
	if err := c.Set(ctx, "small", "1", 0).Err(); err == nil || !strings.Contains(err.Error(), "cannot persist") {
		t.Fatalf("the next write while failed: err = %v, want a refusal", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	setOnceWritesResume(t, c, "after", "resumed", "the disk had room")
	_ = c.Close()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	srv2, err := embedded.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2 := redis.NewClient(&redis.Options{Addr: srv2.Addr()})
	defer func() { _ = c2.Close(); _ = srv2.Close() }()
	for k, want := range map[string]string{"before": "kept", "after": "resumed"} {
		if v, err := c2.Get(ctx, k).Result(); err != nil || v != want {
			t.Fatalf("%s after restart = %q, %v", k, v, err)
		}
	}
	// The refused write ran in memory before the disk said no: it may be
	// back, whole, never in part.
	if v, err := c2.Get(ctx, "refused").Result(); err != redis.Nil && v != big {
		t.Fatalf("refused write came back partial: %d bytes, %v", len(v), err)
	}
}
