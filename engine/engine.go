package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
)

// Options configure an Engine. Zero fields take the documented defaults.
type Options struct {
	// Owner names this engine in leases (default host-pid).
	Owner string
	// Clock is the time source (default the system clock).
	Clock ports.Clock
	// Logger receives the engine's records (default slog.Default()).
	Logger *slog.Logger
	// LeaseDuration is how long a lease lasts between renewals (default
	// 30 s; a value below MinLeaseDuration makes Run and Drain fail).
	LeaseDuration time.Duration
	// PassTimeout is how long one pass may run, counted from the lease
	// that took its items (default PassTimeoutLeases × LeaseDuration):
	// then its context is cancelled (cause ErrPassDeadline) and the item
	// retried; a pass that ignores its context is no longer renewed, so
	// its lease runs out and another engine may take the item.
	PassTimeout time.Duration
	// PollInterval bounds how long an idle kind waits before asking the queue
	// again when no wake-up arrives (default 1 s).
	PollInterval time.Duration
	// ShutdownTimeout is how long in-flight passes may finish after Run's
	// context ends before their leases are released (default 10 s).
	ShutdownTimeout time.Duration
	// RetryBase and RetryMax shape the backoff of Retry outcomes (default
	// 1 s doubling per attempt, capped at 5 min, plus up to 10% jitter).
	RetryBase, RetryMax time.Duration
	// AckBatch is the most acks sent in one call (default 256).
	AckBatch int
	// FetchCooldown is how long a busy kind waits for more free slots before
	// leasing, so that leases come in batches (default 5 ms).
	FetchCooldown time.Duration
	// Metrics, when set, counts passes and outcomes.
	Metrics *Metrics
}

// KindOptions configure one registered kind.
type KindOptions struct {
	// Concurrency is how many items of the kind are in a pass at once
	// (default 4): passes, or items of batch passes. An item whose pass
	// returned no longer counts while its completion is sent, so the next
	// lease does not wait for the acks.
	Concurrency int
	// Batch is the most leased items one pass of a BatchProcessor takes
	// (default 64); other processors take one item per pass.
	Batch int
}

type registration struct {
	kind    string
	proc    Processor
	opts    KindOptions
	metrics *kindMetrics
	// adaptive is how many of opts.Concurrency's slots the kind may use
	// now, from its observed pass times.
	adaptive *adaptiveLimit
}

// Engine leases items by kind and runs their processors.
type Engine struct {
	q    ports.Queue
	opts Options
	log  *slog.Logger
	regs []registration

	// invalid is why the options cannot run (Run and Drain return it).
	invalid error

	mu       sync.Mutex
	inflight map[*flight]struct{}
	acks     chan ackReq
}

type flight struct {
	ref      ports.LeaseRef
	cancel   context.CancelCauseFunc
	deadline time.Time // past it the pass is no longer renewed
	lost     bool
	// renewed is when the lease was last known held: its lease, then each
	// renewal that found it held (the time the renewal was sent).
	renewed time.Time
	// completing is set once the pass returned: its lease is being ended
	// (acked or retried), so a heartbeat that then finds it gone did not
	// lose it.
	completing bool
}

// ackReq is one ack for the ack loop, which calls then with its result
// or, when then is nil, logs a failure as that of the pass of kind that
// ended with out (logCompleteErr).
type ackReq struct {
	p    ports.AckParams
	kind string
	out  Outcome
	then func(error)
}

// result hands the ack's result on.
func (r *ackReq) result(e *Engine, err error) {
	if r.then != nil {
		r.then(err)
		return
	}
	e.logCompleteErr(r.kind, r.p.Lease.Key, r.out, err)
}

// errLeaseLost cancels a pass whose lease was taken away.
var errLeaseLost = errors.New("lease lost during the pass")

// PassTimeoutLeases is the default pass deadline in lease durations: a
// pass may outlive its first lease (renewals keep it), but not forever.
const PassTimeoutLeases = 10

// ErrPassDeadline is the cause of a pass's cancellation when it ran past
// its deadline (Options.PassTimeout); the item is then retried.
var ErrPassDeadline = errors.New("pass deadline exceeded")

// MinLeaseDuration is the shortest Options.LeaseDuration an engine runs
// with: renewals happen every third of a lease.
const MinLeaseDuration = time.Millisecond

// New builds an engine on q. Zero options take their defaults; options no
// engine can run with (a LeaseDuration below MinLeaseDuration) make Run
// and Drain return an error naming the option, before any work.
func New(q ports.Queue, opts Options) *Engine {
	var invalid error
	if opts.LeaseDuration > 0 && opts.LeaseDuration < MinLeaseDuration {
		invalid = fmt.Errorf("engine: Options.LeaseDuration %v is below the minimum %v", opts.LeaseDuration, MinLeaseDuration)
	}
	if opts.Owner == "" {
		opts.Owner = DefaultOwner()
	}
	if opts.Clock == nil {
		opts.Clock = ports.SystemClock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 30 * time.Second
	}
	if opts.PassTimeout <= 0 {
		opts.PassTimeout = PassTimeoutLeases * opts.LeaseDuration
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = time.Second
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = 5 * time.Minute
	}
	if opts.FetchCooldown <= 0 {
		opts.FetchCooldown = 5 * time.Millisecond
	}
	if opts.AckBatch <= 0 {
		opts.AckBatch = 256
	}
	return &Engine{q: q, opts: opts, log: opts.Logger, invalid: invalid, inflight: map[*flight]struct{}{}, acks: make(chan ackReq, 1024)}
}

// Register adds the processor of kind. Call it before Run.
func (e *Engine) Register(kind string, p Processor, o KindOptions) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if _, ok := p.(BatchProcessor); !ok {
		o.Batch = 1
	} else if o.Batch <= 0 {
		o.Batch = 64
	}
	e.regs = append(e.regs, registration{kind: kind, proc: p, opts: o, metrics: e.opts.Metrics.forKind(kind),
		adaptive: newAdaptiveLimit(o.Concurrency, e.opts.LeaseDuration)})
}

// Metrics is Options.Metrics (nil when unset): processors registered on
// the engine record their decisions there.
func (e *Engine) Metrics() *Metrics { return e.opts.Metrics }

// Kinds lists the registered kinds.
func (e *Engine) Kinds() []string {
	out := make([]string, len(e.regs))
	for i, r := range e.regs {
		out[i] = r.kind
	}
	return out
}

// Run leases and processes items until ctx ends, then shuts down gracefully:
// it stops leasing, lets in-flight passes finish for up to ShutdownTimeout,
// then cancels them and releases their leases so another engine takes them
// at once. It returns nil after a clean shutdown.
func (e *Engine) Run(ctx context.Context) error {
	if e.invalid != nil {
		return e.invalid
	}
	if len(e.regs) == 0 {
		return errors.New("engine: no processors registered")
	}
	// Passes run under workCtx, which outlives ctx until the shutdown
	// timeout, so a SIGTERM does not abort work that can still finish.
	workCtx, cancelWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelWork(nil)
	queueCtx, cancelQueue := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelQueue()

	var ackWG sync.WaitGroup
	ackWG.Add(1)
	go func() { defer ackWG.Done(); e.ackLoop(queueCtx) }()
	hbCtx, stopHB := context.WithCancel(queueCtx)
	go e.heartbeatLoop(hbCtx)

	var passes sync.WaitGroup
	var loops sync.WaitGroup
	for _, r := range e.regs {
		loops.Add(1)
		go func() {
			defer loops.Done()
			e.kindLoop(ctx, workCtx, r, &passes)
		}()
	}
	loops.Wait() // ctx ended: no more leasing.
	e.log.Info("engine stopping", "owner", e.opts.Owner, "in_flight", e.inFlight())

	finished := make(chan struct{})
	go func() { passes.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(e.opts.ShutdownTimeout):
		e.log.Warn("shutdown timeout: cancelling in-flight passes and releasing their leases", "in_flight", e.inFlight())
		e.releaseAll(queueCtx)
		cancelWork(errors.New("shutdown timeout"))
		<-finished
	}
	stopHB()
	close(e.acks)
	ackWG.Wait()
	return nil
}

// DefaultOwner is the owner an engine leases under without
// Options.Owner: host-pid.
func DefaultOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Owner is the name the engine leases under (Options.Owner).
func (e *Engine) Owner() string { return e.opts.Owner }

func (e *Engine) inFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.inflight)
}

// kindLoop leases items of one kind while it has free slots.
func (e *Engine) kindLoop(ctx, workCtx context.Context, r registration, passes *sync.WaitGroup) {
	slots := make(chan struct{}, r.opts.Concurrency)
	var wake <-chan struct{}
	if n, ok := e.q.(ports.WorkNotifier); ok {
		wake = n.WorkNotify()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	idleWait := func() bool {
		timer.Reset(e.opts.PollInterval)
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		case <-timer.C:
		}
		return true
	}
	errDelay := e.opts.PollInterval
	for ctx.Err() == nil {
		// Wait for at least one free slot.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		// Passes slower than half a lease lower the kind's limit
		// (adaptiveLimit): past it, wait for a pass to end rather than
		// start one that may not finish within its lease.
		limit := min(r.opts.Concurrency, r.adaptive.limit())
		if len(slots) > limit {
			<-slots
			if !idleWait() {
				return
			}
			continue
		}
		free := 1 + e.gatherSlots(ctx, slots, limit-len(slots))
		leases, err := e.q.WorkLease(ctx, ports.LeaseParams{
			Kinds: []string{r.kind}, Limit: free, Duration: e.opts.LeaseDuration, Owner: e.opts.Owner,
		})
		for i := len(leases); i < free; i++ {
			<-slots
		}
		e.opts.Metrics.leaseTaken(r.kind, TakenFromDead, countReclaimed(leases))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			e.log.Error("lease failed", "kind", r.kind, "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(errDelay):
			}
			errDelay = min(errDelay*2, 30*time.Second)
			continue
		}
		errDelay = e.opts.PollInterval
		if len(leases) == 0 {
			if !idleWait() {
				return
			}
			continue
		}
		e.startPasses(workCtx, r, leases, slots, passes)
	}
}

// startPasses runs the passes of one lease's items, each in its own
// goroutine (a batch of up to r.opts.Batch items each for a
// BatchProcessor), each freeing its items' slots once its processor
// returned. They share one deadline, PassTimeout from now, and its one
// timer, stopped when the last of them ends.
func (e *Engine) startPasses(workCtx context.Context, r registration, leases []ports.Lease, slots chan struct{}, passes *sync.WaitGroup) {
	deadline := time.Now().Add(e.opts.PassTimeout)
	timed, cancelTimed := context.WithDeadlineCause(workCtx, deadline, ErrPassDeadline)
	running := new(atomic.Int32)
	running.Store(int32((len(leases) + r.opts.Batch - 1) / r.opts.Batch))
	ended := func() {
		if running.Add(-1) == 0 {
			cancelTimed()
		}
	}
	for len(leases) > 0 {
		n := min(len(leases), r.opts.Batch)
		chunk := leases[:n]
		leases = leases[n:]
		passes.Add(1)
		go func() {
			defer passes.Done()
			defer ended()
			freed := false
			free := func() {
				// Called once the processor returned, and again (a no-op)
				// when the pass ends, from this goroutine only.
				if !freed {
					freed = true
					for range chunk {
						<-slots
					}
				}
			}
			defer free()
			e.pass(timed, deadline, r, chunk, free)
		}()
	}
}

// gatherSlots takes up to want more free slots. Under load, passes finish
// one at a time; leasing for each would turn one query per batch into one
// per item. So it waits up to FetchCooldown for a quarter of the slots to
// free up. When the engine is idle every slot is free and it does not wait.
func (e *Engine) gatherSlots(ctx context.Context, slots chan struct{}, want int) int {
	got := 0
	for got < want {
		select {
		case slots <- struct{}{}:
			got++
			continue
		default:
		}
		break
	}
	if got >= want || got+1 >= (want+1)/4 {
		return got
	}
	timer := time.NewTimer(e.opts.FetchCooldown)
	defer timer.Stop()
	for got < want && got+1 < (want+1)/4 {
		select {
		case slots <- struct{}{}:
			got++
		case <-timer.C:
			return got
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// pass runs one processor call on leases (one item, or a batch of a
// BatchProcessor) and completes each item with its own outcome. It calls
// done once the processor has returned, before the completions are sent:
// the kind's slots bound the processor calls running, so the next lease
// overlaps with this pass's acks instead of waiting for them.
//
// timed is cancelled at deadline (cause ErrPassDeadline), the pass's
// deadline, shared with the other passes of its lease. The pass's acks are
// handed to the ack loop, which logs what went wrong; the pass does not
// wait for them (its lease is no longer renewed once it returned).
func (e *Engine) pass(timed context.Context, deadline time.Time, r registration, leases []ports.Lease, done func()) {
	ctx, cancel := context.WithCancelCause(timed)
	defer cancel(nil)
	flights := make([]*flight, len(leases))
	items := make([]Item, len(leases))
	e.mu.Lock()
	for i, l := range leases {
		// The items of a batch share one pass: a lease lost cancels it all,
		// and only the lost items' results are dropped.
		flights[i] = &flight{ref: l.Ref(), cancel: cancel, deadline: deadline, renewed: time.Now()}
		e.inflight[flights[i]] = struct{}{}
		items[i] = itemOf(l)
	}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		for _, f := range flights {
			delete(e.inflight, f)
		}
		e.mu.Unlock()
	}()

	start := time.Now()
	outs := e.safeProcess(ctx, r, items)
	pastDeadline := errors.Is(context.Cause(ctx), ErrPassDeadline)
	took := time.Since(start)
	r.adaptive.observe(took)
	done()
	for i, l := range leases {
		out := outs[i]
		if pastDeadline {
			e.log.Warn("pass ran past its deadline; retrying", "kind", r.kind, "id", l.Key.ScopeID, "timeout", e.opts.PassTimeout,
				"outcome", out.String())
			out = Retry(fmt.Errorf("%w after %s", ErrPassDeadline, e.opts.PassTimeout))
		}
		r.metrics.observe(out, took)
		e.mu.Lock()
		lost := flights[i].lost
		flights[i].completing = true
		e.mu.Unlock()
		if lost {
			e.opts.Metrics.resultDropped(r.kind)
			e.log.Warn("lease lost during pass; result dropped", "kind", r.kind, "id", l.Key.ScopeID, "outcome", out.String())
			continue
		}
		switch out.kind {
		case outcomeDone, outcomeRequeue:
			e.acks <- ackReq{p: ports.AckParams{Lease: l.Ref(), RequeueAt: out.at}, kind: r.kind, out: out}
		default:
			e.logCompleteErr(r.kind, l.Key, out, e.complete(context.WithoutCancel(ctx), l, out))
		}
	}
}

// logCompleteErr logs a failed completion of the pass of key, of kind,
// that ended with out.
func (e *Engine) logCompleteErr(kind string, key ports.WorkKey, out Outcome, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ports.ErrLeaseLost):
		e.opts.Metrics.resultDropped(kind)
		e.opts.Metrics.leaseTaken(kind, TakenFromLive, 1)
		e.log.Warn("lease lost before completion; result dropped", "kind", kind, "id", key.ScopeID, "outcome", out.String(),
			"fault", "renewal late or owner stale: the lease ran out or this process's liveness lapsed before the completion arrived")
	default:
		e.log.Error("complete failed", "kind", kind, "id", key.ScopeID, "outcome", out.String(), "error", err)
	}
}

// safeProcess runs the processor on items, in one span (passSpan), one
// outcome per item: a BatchProcessor takes them all in one call, any other
// processor the one item. A panic is recovered into a retry of every item, and so is a batch
// answer of the wrong length.
func (e *Engine) safeProcess(ctx context.Context, r registration, items []Item) (outs []Outcome) {
	ctx, span := e.passSpan(ctx, r.kind, items)
	defer func() { endPass(span, outs) }()
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("processor panicked", "kind", r.kind, "id", items[0].Key.ScopeID, "items", len(items),
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			outs = make([]Outcome, len(items))
			for i := range outs {
				outs[i] = Retry(fmt.Errorf("panic: %v", p))
			}
		}
	}()
	if b, ok := r.proc.(BatchProcessor); ok {
		outs = b.ProcessBatch(ctx, items)
		if len(outs) != len(items) {
			err := fmt.Errorf("batch processor of %s returned %d outcomes for %d items", r.kind, len(outs), len(items))
			outs = make([]Outcome, len(items))
			for i := range outs {
				outs[i] = Retry(err)
			}
		}
		return outs
	}
	outs = make([]Outcome, len(items))
	for i, it := range items {
		outs[i] = r.proc.Process(ctx, it)
	}
	return outs
}

// complete turns the outcome into the queue call that ends the lease.
func (e *Engine) complete(ctx context.Context, l ports.Lease, out Outcome) error {
	switch out.kind {
	case outcomeDone:
		return e.ack(ctx, ports.AckParams{Lease: l.Ref()})
	case outcomeRequeue:
		return e.ack(ctx, ports.AckParams{Lease: l.Ref(), RequeueAt: out.at})
	case outcomeTerminal:
		ctx = ports.WithLane(ctx, ports.LaneRenewal)
		return e.q.WorkRetry(ctx, ports.RetryParams{Lease: l.Ref(), Err: errText(out.err), Terminal: true})
	default:
		ctx = ports.WithLane(ctx, ports.LaneRenewal)
		return e.q.WorkRetry(ctx, ports.RetryParams{Lease: l.Ref(), Err: errText(out.err), NotBefore: e.opts.Clock.Now().Add(e.retryDelay(l.Attempt))})
	}
}

func errText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// retryDelay is RetryBase × 2^(attempt-1), capped at RetryMax, plus up to 10%
// jitter so that failing items do not retry in lockstep.
func (e *Engine) retryDelay(attempt int) time.Duration {
	d := e.opts.RetryBase << min(max(attempt-1, 0), 30)
	if d <= 0 || d > e.opts.RetryMax {
		d = e.opts.RetryMax
	}
	return d + time.Duration(rand.Int64N(int64(d/10)+1))
}

// ack hands the ack to the batching loop and waits for its result.
func (e *Engine) ack(ctx context.Context, p ports.AckParams) error {
	done := make(chan error, 1)
	e.acks <- ackReq{p: p, then: func(err error) { done <- err }}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ackLoop sends acks in batches: whatever has queued up while the previous
// call was in flight goes out in the next call.
func (e *Engine) ackLoop(ctx context.Context) {
	batch := make([]ackReq, 0, e.opts.AckBatch)
	params := make([]ports.AckParams, 0, e.opts.AckBatch)
	for first := range e.acks {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < e.opts.AckBatch {
			select {
			case r, ok := <-e.acks:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		params = params[:0]
		for _, r := range batch {
			params = append(params, r.p)
		}
		results, err := e.q.WorkAck(ports.WithLane(ctx, ports.LaneRenewal), params...)
		for i, r := range batch {
			switch {
			case err != nil:
				r.result(e, fmt.Errorf("ack %s: %w", r.p.Lease.Key, err))
			case i < len(results) && results[i] != nil:
				r.result(e, fmt.Errorf("ack %s: %w", r.p.Lease.Key, results[i]))
			default:
				r.result(e, nil)
			}
		}
	}
}

// heartbeatLoop renews every in-flight lease three times per lease period and
// cancels passes whose lease was lost.
func (e *Engine) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(e.opts.LeaseDuration / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A pass past its deadline ignored its cancellation: it is not
		// renewed, so its lease runs out.
		now := time.Now()
		e.mu.Lock()
		refs := make([]ports.LeaseRef, 0, len(e.inflight))
		flights := make([]*flight, 0, len(e.inflight))
		for f := range e.inflight {
			if !f.completing && now.Before(f.deadline) {
				refs = append(refs, f.ref)
				flights = append(flights, f)
			}
		}
		e.mu.Unlock()
		if len(refs) == 0 {
			continue
		}
		// Renewals have connections of their own (ports.LaneRenewal), so
		// they never wait behind passes holding the store's other ones.
		sent := time.Now()
		results, err := e.q.WorkHeartbeat(ports.WithLane(ctx, ports.LaneRenewal), e.opts.LeaseDuration, refs...)
		took := time.Since(sent)
		if err != nil {
			e.opts.Metrics.Renewal(RenewalQueue, RenewalFailed, len(refs))
			e.log.Error("heartbeat failed", "leases", len(refs), "took", took, "error", err)
			continue
		}
		// A renewal that took more than a third of the lease left the next
		// one less than a third of it: late, the lease nearly ran out.
		if took > e.opts.LeaseDuration/3 {
			e.opts.Metrics.Renewal(RenewalQueue, RenewalLate, len(refs))
			e.log.Warn("heartbeat late", "leases", len(refs), "took", took, "lease", e.opts.LeaseDuration)
		} else {
			e.opts.Metrics.Renewal(RenewalQueue, RenewalOK, len(refs))
		}
		for i, r := range results {
			if r == nil {
				e.mu.Lock()
				flights[i].renewed = sent
				e.mu.Unlock()
				continue
			}
			// A pass that returned meanwhile had its lease ended by its own
			// ack: only a pass still running lost its lease.
			e.mu.Lock()
			f := flights[i]
			_, ok := e.inflight[f]
			lost := ok && !f.completing
			if lost {
				f.lost = true
				f.cancel(errLeaseLost)
			}
			unrenewed := sent.Sub(f.renewed)
			e.mu.Unlock()
			if lost {
				e.opts.Metrics.leaseLost(refs[i].Key.Kind)
				e.opts.Metrics.leaseTaken(refs[i].Key.Kind, TakenFromLive, 1)
				e.log.Warn("lease lost", "kind", refs[i].Key.Kind, "id", refs[i].Key.ScopeID,
					"fault", leaseFault(unrenewed, e.opts.LeaseDuration), "unrenewed", unrenewed, "error", r)
			}
		}
	}
}

// leaseFault says whose fault a lost lease was, from how long it had gone
// unrenewed when the renewal found it lost: a late renewal's when that is
// past the lease (renewals late or failed, so the lease ran out and
// another process took the item), else a stale owner's (this process's
// liveness row lapsed, so another process reclaimed the item while the
// lease held, or the item was removed).
func leaseFault(unrenewed, lease time.Duration) string {
	if unrenewed >= lease {
		return "renewal late: not renewed for longer than the lease"
	}
	return "owner stale: reclaimed while the lease held (this process's liveness lapsed) or removed"
}

// countReclaimed is how many of leases took an item over from an expired
// lease (ports.Lease.Reclaimed).
func countReclaimed(leases []ports.Lease) int {
	n := 0
	for _, l := range leases {
		if l.Reclaimed {
			n++
		}
	}
	return n
}

// releaseAll gives up the leases of passes that did not finish in time, so
// another engine can take them immediately.
func (e *Engine) releaseAll(ctx context.Context) {
	e.mu.Lock()
	flights := make([]*flight, 0, len(e.inflight))
	for f := range e.inflight {
		f.lost = true
		flights = append(flights, f)
	}
	e.mu.Unlock()
	now := e.opts.Clock.Now()
	for _, f := range flights {
		err := e.q.WorkRetry(ctx, ports.RetryParams{Lease: f.ref, Err: "released at shutdown", NotBefore: now})
		if err != nil && !errors.Is(err, ports.ErrLeaseLost) {
			e.log.Error("release lease", "kind", f.ref.Key.Kind, "id", f.ref.Key.ScopeID, "error", err)
		}
	}
}
