package runobserve

import (
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultKeys bounds a runtime's record of the launch or release keys it
// acted on.
const DefaultKeys = 4096

// Keys is a runtime's bounded record of the idempotency keys it acted on
// (its launches, or its releases), so a retried call is a no-op without
// asking the agent's world. It holds the most recently used keys, at most
// its size: a runtime keeps its own record of its current agents' keys
// (a pod's name, a process's state directory), so an evicted key costs a
// look-up, never a second agent. Safe for concurrent use.
type Keys struct{ c *lru.Cache[string, struct{}] }

// NewKeys returns a record of at most size keys (DefaultKeys when size is
// not positive).
func NewKeys(size int) *Keys {
	if size <= 0 {
		size = DefaultKeys
	}
	c, err := lru.New[string, struct{}](size)
	if err != nil {
		panic(fmt.Sprintf("runobserve: keys of size %d: %v", size, err)) // unreachable: size is positive
	}
	return &Keys{c: c}
}

// Has reports whether key is recorded.
func (k *Keys) Has(key string) bool { return k.c.Contains(key) }

// Add records key.
func (k *Keys) Add(key string) { k.c.Add(key, struct{}{}) }

// Claim records key and reports whether it was new: of concurrent claims
// of one key exactly one is true.
func (k *Keys) Claim(key string) bool {
	seen, _ := k.c.ContainsOrAdd(key, struct{}{})
	return !seen
}

// Forget removes key (a call that failed may be retried).
func (k *Keys) Forget(key string) { k.c.Remove(key) }

// Len is the number of keys recorded.
func (k *Keys) Len() int { return k.c.Len() }
