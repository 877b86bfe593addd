package adapters

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Helpers of the commerce adapters (gorgias, shopify, parcelpanel).

// commerceRetryAfter is the wait after a 429 without Retry-After for
// gorgias and parcelpanel (their defaultRetryAfterSeconds).
const commerceRetryAfter = 60 * time.Second

// positive is a whole-number id param greater than zero.
func (a args) positive(key string) (int64, error) {
	n, _, err := a.integer(key, true)
	if err != nil {
		return 0, err
	}
	if n <= 0 {
		return 0, invalid("param '%s' must be a positive whole number", key)
	}
	return n, nil
}

// store is the api of the store the param 'store' names; an unknown key
// is refused naming the known keys (never their credentials).
func store(a args, stores map[string]*api) (*api, error) {
	key, err := a.text("store", true)
	if err != nil {
		return nil, err
	}
	s, ok := stores[key]
	if !ok {
		return nil, invalid("param 'store': unknown store '%s' (known: %s)", key, strings.Join(slices.Sorted(maps.Keys(stores)), ", "))
	}
	return s, nil
}

// storeKeys reads config.stores: a non-empty object whose keys are store
// keys; each value is handed to read.
func storeKeys(s settings, read func(key string, v any) error) error {
	m, err := s.object("stores", true)
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return fmt.Errorf("config.stores must name at least one store")
	}
	for _, k := range sortedKeys(m) {
		if strings.TrimSpace(k) == "" {
			return fmt.Errorf("config.stores: a store key must not be empty")
		}
		if err := read(k, m[k]); err != nil {
			return err
		}
	}
	return nil
}
