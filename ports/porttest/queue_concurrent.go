package porttest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// violations collects invariant breaches seen on worker goroutines, where
// require cannot stop the test; the test goroutine checks them at the end.
type violations struct {
	mu   sync.Mutex
	msgs []string
}

// add records one breach.
func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.msgs) < 20 {
		v.msgs = append(v.msgs, fmt.Sprintf(format, args...))
	}
}

// require fails the test when anything was recorded.
func (v *violations) require(t require.TestingT) {
	v.mu.Lock()
	defer v.mu.Unlock()
	require.Empty(t, v.msgs)
}

// manyKeys returns n alpha keys.
func manyKeys(n int) []ports.WorkKey {
	keys := make([]ports.WorkKey, n)
	for i := range keys {
		keys[i] = wk(fmt.Sprintf("item-%04d", i))
	}
	return keys
}

// queueConcurrentExclusive: workers race to lease one backlog with leases
// that never expire; no item is ever held twice and each is processed once.
func queueConcurrentExclusive(f *queueFixture) {
	t := f.t
	const items, workers = 300, 8
	keys := manyKeys(items)
	f.enqueueKeys(keys...)

	var (
		bad       violations
		mu        sync.Mutex
		holders   = map[ports.WorkKey]string{}
		processed = map[ports.WorkKey]int{}
		wg        sync.WaitGroup
	)
	for w := range workers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 1 + w%4, Duration: time.Hour, Owner: owner})
				if err != nil {
					bad.add("%s: lease: %v", owner, err)
					return
				}
				if len(ls) == 0 {
					return // everything left is held by others, who finish it
				}
				mu.Lock()
				for _, l := range ls {
					if other, held := holders[l.Key]; held {
						bad.add("%s leased %s while %s held it", owner, l.Key, other)
					}
					holders[l.Key] = owner
					processed[l.Key]++
				}
				mu.Unlock()
				runtime.Gosched()
				acks := make([]ports.AckParams, len(ls))
				mu.Lock()
				for i, l := range ls {
					delete(holders, l.Key)
					acks[i] = ports.AckParams{Lease: l.Ref()}
				}
				mu.Unlock()
				res, err := f.q.WorkAck(f.ctx, acks...)
				if err != nil {
					bad.add("%s: ack: %v", owner, err)
					return
				}
				for i, r := range res {
					if r != nil {
						bad.add("%s: ack %s: %v", owner, ls[i].Key, r)
					}
				}
			}
		})
	}
	wg.Wait()
	bad.require(t)
	for _, k := range keys {
		require.Equal(t, 1, processed[k], "%s processed once", k)
	}
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
}

// queueConcurrentEnqueue: producers enqueue while workers lease and ack.
// Each producer bumps the key's sequence number before enqueueing; a worker
// reads it right after leasing. When everything has drained, the last
// sequence number of every key must have been seen by some lease: an
// enqueue that raced a lease was not lost.
func queueConcurrentEnqueue(f *queueFixture) {
	t := f.t
	const nKeys, producers, perProducer, workers = 16, 4, 150, 4
	keys := manyKeys(nKeys)
	var (
		bad     violations
		seq     atomic.Int64
		last    [nKeys]atomic.Int64
		mu      sync.Mutex
		seen    [nKeys]int64
		passes  atomic.Int64
		done    atomic.Bool
		prodWG  sync.WaitGroup
		workWG  sync.WaitGroup
		indexOf = map[ports.WorkKey]int{}
	)
	for i, k := range keys {
		indexOf[k] = i
	}
	for p := range producers {
		prodWG.Go(func() {
			for i := range perProducer {
				k := (p*7 + i*5) % nKeys
				last[k].Store(seq.Add(1))
				if err := f.q.WorkEnqueue(f.ctx, ports.EnqueueParams{Key: keys[k]}); err != nil {
					bad.add("enqueue: %v", err)
					return
				}
				if i%8 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	for w := range workers {
		workWG.Go(func() {
			for {
				ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 1 + w%3, Duration: time.Hour, Owner: "worker"})
				if err != nil {
					bad.add("lease: %v", err)
					return
				}
				if len(ls) == 0 {
					if done.Load() {
						s, err := f.q.WorkStats(f.ctx)
						if err != nil {
							bad.add("stats: %v", err)
							return
						}
						if s[ports.WorkPending]+s[ports.WorkLeased] == 0 {
							return
						}
					}
					runtime.Gosched()
					continue
				}
				mu.Lock()
				for _, l := range ls {
					i := indexOf[l.Key]
					seen[i] = max(seen[i], last[i].Load())
				}
				mu.Unlock()
				passes.Add(int64(len(ls)))
				runtime.Gosched() // the "work": enqueues may land meanwhile
				acks := make([]ports.AckParams, len(ls))
				for i, l := range ls {
					acks[i] = ports.AckParams{Lease: l.Ref()}
				}
				res, err := f.q.WorkAck(f.ctx, acks...)
				if err != nil {
					bad.add("ack: %v", err)
					return
				}
				for i, r := range res {
					if r != nil {
						bad.add("ack %s: %v", ls[i].Key, r)
					}
				}
			}
		})
	}
	prodWG.Wait()
	done.Store(true)
	workWG.Wait()
	bad.require(t)
	for i, k := range keys {
		require.Equal(t, last[i].Load(), seen[i], "the last enqueue of %s was seen by a lease", k)
	}
	require.GreaterOrEqual(t, passes.Load(), int64(nKeys))
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
}

// queueConcurrentFencing: workers lease with short leases and move the clock
// a third of a lease on every lease call, so leases expire and are taken
// over all the time (hundreds of stale acks per run). Fencing must hold: each item is completed by exactly one
// ack, the one holding the item's newest token.
func queueConcurrentFencing(f *queueFixture) {
	t := f.t
	const items, workers = 100, 6
	const d = 10 * time.Second
	keys := manyKeys(items)
	ps := make([]ports.EnqueueParams, items)
	for i, k := range keys {
		ps[i] = ports.EnqueueParams{Key: k, MaxAttempts: 1_000_000}
	}
	f.enqueue(ps...)

	var (
		bad    violations
		mu     sync.Mutex
		issued = map[ports.WorkKey]map[int64]bool{}
		okAcks = map[ports.WorkKey][]int64{}
		acked  atomic.Int64
		lost   atomic.Int64
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for acked.Load() < items {
				ls, err := f.q.WorkLease(f.ctx, ports.LeaseParams{Kinds: []string{kindA}, Limit: 1 + w%3, Duration: d, Owner: "worker"})
				if err != nil {
					bad.add("lease: %v", err)
					return
				}
				f.clock.Advance(d / 3) // a lease outlives about three lease calls
				if len(ls) == 0 {
					runtime.Gosched()
					continue
				}
				mu.Lock()
				for _, l := range ls {
					if issued[l.Key] == nil {
						issued[l.Key] = map[int64]bool{}
					}
					if issued[l.Key][l.Token] {
						bad.add("token %d of %s issued twice", l.Token, l.Key)
					}
					issued[l.Key][l.Token] = true
				}
				mu.Unlock()
				runtime.Gosched()
				acks := make([]ports.AckParams, len(ls))
				for i, l := range ls {
					acks[i] = ports.AckParams{Lease: l.Ref()}
				}
				res, err := f.q.WorkAck(f.ctx, acks...)
				if err != nil {
					bad.add("ack: %v", err)
					return
				}
				mu.Lock()
				for i, r := range res {
					switch {
					case r == nil:
						okAcks[ls[i].Key] = append(okAcks[ls[i].Key], ls[i].Token)
						acked.Add(1)
					case errors.Is(r, ports.ErrLeaseLost):
						lost.Add(1)
					default:
						bad.add("ack %s: %v", ls[i].Key, r)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	bad.require(t)
	for _, k := range keys {
		require.Len(t, okAcks[k], 1, "%s completed by exactly one ack", k)
		var newest int64
		for tok := range issued[k] {
			newest = max(newest, tok)
		}
		require.Equal(t, newest, okAcks[k][0], "%s completed by its newest lease", k)
	}
	t.Logf("%d stale acks refused", lost.Load())
	require.Equal(t, map[ports.WorkState]int{ports.WorkPending: 0, ports.WorkLeased: 0, ports.WorkDead: 0}, f.stats())
}
