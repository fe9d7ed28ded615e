package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// publishTimeout bounds one publisher statement.
const publishTimeout = 5 * time.Second

// sqlPublish sends the notifications $1 (channels) and $2 (payloads) in a
// transaction of their own, committed without waiting for its WAL flush.
const sqlPublish = `SELECT count(*) FROM (SELECT set_config('synchronous_commit', 'off', true)) async,
	unnest($1::text[], $2::text[]) AS n(channel, payload) CROSS JOIN LATERAL pg_notify(n.channel, n.payload)`

// notice is one notification: a channel and its payload.
type notice struct{ channel, payload string }

// publisher sends the NOTIFYs of committed changes, outside the
// transactions that made them, so that a writing transaction never
// notifies. Postgres serialises the commits of every transaction that
// notified, cluster-wide, with a lock held until the commit is flushed
// (async.c's PreCommit_Notify): a NOTIFY in a writing transaction makes
// all of them wait on each other's WAL flush, and keeps two processes
// from committing side by side. A publisher's transaction writes nothing
// but the notification and commits without waiting for its flush, so it
// holds that lock only for a moment.
//
// Notices given while a statement is in flight are coalesced into the
// next one. A notice is a hint: one lost (the process died between the
// commit and its notice, or the statement failed) only delays the
// listeners until their next poll.
type publisher struct {
	db *DB

	mu      sync.Mutex
	pending map[notice]struct{}
	running bool
	idle    *sync.Cond // signalled when running turns false
	// after, once set (NewChanges), runs after each statement: it
	// publishes the event stream's committed changes.
	after atomic.Pointer[func(context.Context)]
}

// newPublisher returns the publisher of db.
func newPublisher(db *DB) *publisher {
	p := &publisher{db: db, pending: map[notice]struct{}{}}
	p.idle = sync.NewCond(&p.mu)
	return p
}

// publish queues the notification of payloads on channel and starts a
// sender unless one runs; it never blocks on the database.
func (p *publisher) publish(channel string, payloads ...string) {
	if len(payloads) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range payloads {
		p.pending[notice{channel, pl}] = struct{}{}
	}
	if !p.running {
		p.running = true
		go p.send()
	}
}

// send sends what is pending, one statement at a time, until nothing is.
func (p *publisher) send() {
	for {
		p.mu.Lock()
		if len(p.pending) == 0 {
			p.running = false
			p.idle.Broadcast()
			p.mu.Unlock()
			return
		}
		channels := make([]string, 0, len(p.pending))
		payloads := make([]string, 0, len(p.pending))
		for n := range p.pending {
			channels, payloads = append(channels, n.channel), append(payloads, n.payload)
		}
		clear(p.pending)
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		// A failure loses only hints (see publisher).
		_, _ = p.db.pool.Exec(ctx, sqlPublish, p.db.hotMode, channels, payloads)
		if f := p.after.Load(); f != nil {
			(*f)(ctx)
		}
		cancel()
	}
}

// wait returns once no statement is in flight or pending.
func (p *publisher) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.running {
		p.idle.Wait()
	}
}
