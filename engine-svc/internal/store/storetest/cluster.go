package storetest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultClusterAddrs are the masters of the Redis Cluster that
// scripts/redis-cluster.sh starts (make test starts it).
const DefaultClusterAddrs = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"

// ClusterAddrs is $REDIS_CLUSTER_ADDRS (comma-separated), else
// DefaultClusterAddrs.
func ClusterAddrs() []string {
	v := os.Getenv("REDIS_CLUSTER_ADDRS")
	if v == "" {
		v = DefaultClusterAddrs
	}
	return strings.Split(v, ",")
}

// ConnectCluster returns a client of the test Redis Cluster, closed when
// the test ends. A cluster that does not answer, or is not serving every
// slot, fails the test: make test starts one.
func ConnectCluster(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		_ = c.Close()
		tb.Fatalf("Redis Cluster at %v is not serving (%v): run scripts/redis-cluster.sh (make test starts it) or set REDIS_CLUSTER_ADDRS", ClusterAddrs(), err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// CleanupClusterPrefix deletes every key under prefix on every master when
// the test ends, with a connection of its own.
func CleanupClusterPrefix(tb testing.TB, prefix string) {
	tb.Helper()
	tb.Cleanup(func() {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs()})
		defer c.Close()
		// One key per DEL: a master holds many slots, and a multi-key
		// command must stay in one.
		err := c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			iter := m.Scan(ctx, 0, prefix+":*", 1000).Iterator()
			for iter.Next(ctx) {
				if err := m.Del(ctx, iter.Val()).Err(); err != nil {
					return err
				}
			}
			return iter.Err()
		})
		if err != nil {
			tb.Errorf("cleanup %s: %v", prefix, err)
		}
	})
}
