package postgres

import (
	"sync"

	"github.com/jackc/pgx/v5/pgtype"
)

// maxTids bounds a tidCache: leases that are never acked (their holder
// stopped, or acked through another Queue) would otherwise pile up.
const maxTids = 1 << 16

// tidCache remembers, by lease token, the tuple id a lease of this Queue
// left its row at, so the lease's plain ack deletes the row by tuple id
// without looking its key up again. It is only a hint: the ack also checks
// the token (tokens are unique, from one sequence) and that the row is
// still leased with no enqueue during the lease, and a row another
// transaction changed meanwhile has a new tuple id, so a stale entry only
// sends the ack down the slower path.
type tidCache struct {
	mu sync.Mutex
	m  map[int64]pgtype.TID
}

// put records tid for token; a full cache starts over.
func (c *tidCache) put(token int64, tid pgtype.TID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxTids {
		c.m = make(map[int64]pgtype.TID)
	}
	c.m[token] = tid
}

// take returns and forgets token's tuple id.
func (c *tidCache) take(token int64) (pgtype.TID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tid, ok := c.m[token]
	if ok {
		delete(c.m, token)
	}
	return tid, ok
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
