package storetest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// bareCAS is the least a version compare-and-set can cost: read the
// version, compare, write version and document. No outputs, evidence,
// indexes or validation.
var bareCAS = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'doc', ARGV[3])
return 1
`)

// BareCAS measures b.N sequential script compare-and-sets of a docSize-byte
// document on one key: the physical floor the store and engine benchmarks
// compare against. The key is deleted afterwards.
func BareCAS(b *testing.B, client redis.UniversalClient, docSize int) {
	b.Helper()
	ctx := context.Background()
	key := UniquePrefix(b) + ":{b0}:bare"
	b.Cleanup(func() { client.Del(context.Background(), key) })
	doc := strings.Repeat("x", docSize)
	if err := client.HSet(ctx, key, "v", "0", "doc", doc).Err(); err != nil {
		b.Fatalf("seed %s: %v", key, err)
	}
	if err := bareCAS.Load(ctx, client).Err(); err != nil {
		b.Fatalf("load script: %v", err)
	}
	b.SetBytes(int64(docSize))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ok, err := bareCAS.Run(ctx, client, []string{key}, strconv.Itoa(i), strconv.Itoa(i+1), doc).Int()
		if err != nil {
			b.Fatalf("cas %d: %v", i, err)
		}
		if ok != 1 {
			b.Fatalf("cas %d refused: version moved under the benchmark", i)
		}
	}
}
