package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/realm-go/realm/engine-svc/internal/store"
	"github.com/realm-go/realm/engine-svc/internal/store/storetest"
)

func TestCheckEviction(t *testing.T) {
	t.Parallel()
	own := func(args ...string) func(t *testing.T) redis.UniversalClient {
		return func(t *testing.T) redis.UniversalClient {
			c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", startRedis(t, args...))})
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
	}
	tests := []struct {
		name     string
		client   func(t *testing.T) redis.UniversalClient
		evicting bool   // refused as evicting
		unread   string // the policy could not be read; the error says this
	}{
		{name: "default server", client: own()},
		{name: "cluster", client: func(t *testing.T) redis.UniversalClient { return storetest.ConnectCluster(t) }},
		{name: "evicting server", client: own("--maxmemory-policy", "allkeys-lru"), evicting: true},
		{name: "volatile policy", client: own("--maxmemory-policy", "volatile-ttl"), evicting: true},
		{name: "config renamed away", client: own("--rename-command", "CONFIG", ""), unread: "CONFIG GET maxmemory-policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := store.CheckEviction(ctx, tt.client(t))
			switch {
			case tt.evicting:
				if !errors.Is(err, store.ErrEvicting) || !strings.Contains(err.Error(), "CONFIG SET maxmemory-policy noeviction") {
					t.Fatalf("err = %v, want ErrEvicting with the fix", err)
				}
			case tt.unread != "":
				if err == nil || errors.Is(err, store.ErrEvicting) || !strings.Contains(err.Error(), tt.unread) {
					t.Fatalf("err = %v, want an unreadable policy naming %q", err, tt.unread)
				}
			case err != nil:
				t.Fatalf("err = %v, want nil", err)
			}
		})
	}
}
