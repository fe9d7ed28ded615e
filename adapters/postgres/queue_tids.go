package postgres

import (
	"sync"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/reconcilerhq/reconciler/ports"
)

// maxTids bounds a tidCache: leases that are never acked (their holder
// stopped, or acked through another Queue) would otherwise pile up.
const maxTids = 1 << 16

// tidCache remembers, by lease token, the key of a lease of this Queue and
// the tuple id the lease left its row at, so the lease's plain ack deletes
// the row by tuple id and token without looking its key up again or
// sending it: tokens are unique (one sequence), so the row at that tuple
// id holding that token, leased with no enqueue during the lease, is the
// lease's. The key is checked here instead, so a ref that names another
// key with a lease's token takes the slower path, which finds no such
// lease. It is only a hint: a row another transaction changed meanwhile
// has a new tuple id, so a stale entry only sends the ack down the slower
// path.
type tidCache struct {
	mu sync.Mutex
	m  map[int64]tidHint
}

// tidHint is what a tidCache holds for one lease token.
type tidHint struct {
	key ports.WorkKey
	tid pgtype.TID
}

// put records key and tid for token; a full cache starts over.
func (c *tidCache) put(token int64, key ports.WorkKey, tid pgtype.TID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxTids {
		c.m = make(map[int64]tidHint)
	}
	c.m[token] = tidHint{key: key, tid: tid}
}

// take forgets ref's token and returns its tuple id when it was recorded
// for ref's key.
func (c *tidCache) take(ref ports.LeaseRef) (pgtype.TID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[ref.Token]
	if ok {
		delete(c.m, ref.Token)
	}
	return h.tid, ok && h.key == ref.Key
}

// drop forgets the tuple ids of tokens (their rows were changed or ended).
func (c *tidCache) drop(tokens []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tokens {
		delete(c.m, t)
	}
}

// size is how many tuple ids the cache holds.
func (c *tidCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
