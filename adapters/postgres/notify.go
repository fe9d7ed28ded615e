package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener backoff: the first retry waits notifyBackoffMin, doubling up to
// notifyBackoffMax; subscribers are woken at every retry so their workers
// poll while nothing listens.
const (
	notifyBackoffMin = 100 * time.Millisecond
	notifyBackoffMax = 5 * time.Second
)

// notifier fans the NOTIFY messages of one channel (the queue's, the
// jobs') out to subscriber channels. It listens on one dedicated
// connection (outside the pool), started by the first subscription.
type notifier struct {
	cfg                    *pgx.ConnConfig
	channel                string
	backoffMin, backoffMax time.Duration
	// onListen, when set (tests), receives the backend pid after every
	// successful LISTEN.
	onListen chan uint32

	mu      sync.Mutex
	subs    []chan struct{}
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// newNotifier returns a notifier of channel that connects with cfg;
// nothing runs until the first subscribe.
func newNotifier(cfg *pgx.ConnConfig, channel string) *notifier {
	return &notifier{cfg: cfg, channel: channel, backoffMin: notifyBackoffMin, backoffMax: notifyBackoffMax}
}

// subscribe adds a channel (capacity 1) that receives every wake-up and
// starts the listener if it is not running.
func (n *notifier) subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ch
	}
	n.subs = append(n.subs, ch)
	if !n.started {
		n.started = true
		ctx, cancel := context.WithCancel(context.Background())
		n.cancel, n.done = cancel, make(chan struct{})
		go n.run(ctx)
	}
	return ch
}

// subscribeUntil is subscribe for a subscriber that leaves when ctx ends.
func (n *notifier) subscribeUntil(ctx context.Context) <-chan struct{} {
	ch := n.subscribe()
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for i, c := range n.subs {
			if c == ch {
				n.subs = append(n.subs[:i], n.subs[i+1:]...)
				break
			}
		}
	})
	return ch
}

// close stops the listener and waits for it. It is idempotent.
func (n *notifier) close() {
	n.mu.Lock()
	n.closed = true
	cancel, done := n.cancel, n.done
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// wake sends every subscriber a wake-up without blocking: a full channel
// already has one pending.
func (n *notifier) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ch := range n.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// run listens until ctx ends, reconnecting with backoff.
func (n *notifier) run(ctx context.Context) {
	defer close(n.done)
	backoff := n.backoffMin
	for {
		listened := n.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = n.backoffMin
		}
		// Not listening: wake the workers so they poll meanwhile.
		n.wake()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, n.backoffMax)
	}
}

// listen connects, LISTENs and forwards notifications until the connection
// fails or ctx ends. It reports whether LISTEN succeeded.
func (n *notifier) listen(ctx context.Context) bool {
	conn, err := pgx.ConnectConfig(ctx, n.cfg.Copy())
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+n.channel); err != nil {
		return false
	}
	if n.onListen != nil {
		select {
		case n.onListen <- conn.PgConn().PID():
		case <-ctx.Done():
			return true
		}
	}
	// Anything committed while nobody listened went unheard: wake once.
	n.wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true
		}
		n.wake()
	}
}
