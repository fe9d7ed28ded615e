package api

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// DefaultLongPolls is how many long-polls (takes with ?wait) one caller
// may hold open at once when Options.LongPolls is zero.
const DefaultLongPolls = 4

// metaLongPoll marks an operation that may hold the response open (a
// take's ?wait): its write deadline is extended and its concurrent
// waits are capped per caller.
const metaLongPoll = "longPoll"

// metaStream marks an operation that streams until the client leaves (GET
// /events): it always takes one of its caller's long-poll slots, and has
// no write deadline.
const metaStream = "stream"

// longPollSlack is added to MaxTakeWait for the extended write deadline.
const longPollSlack = 30 * time.Second

// longPolls counts the open long-polls of each caller.
type longPolls struct {
	mu   sync.Mutex
	open map[string]int
	max  int
}

// acquire takes one of key's slots; false when all are held.
func (l *longPolls) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key] >= l.max {
		return false
	}
	l.open[key]++
	return true
}

// release gives back one of key's slots.
func (l *longPolls) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// longPoll is the middleware of long-poll operations (metaLongPoll), run
// after authenticate: a request that waits (?wait other than zero) takes
// one of its caller's slots (the token, or the signing agent) or is
// refused 429 with Retry-After; and its write deadline is moved past the
// longest wait, since the server's --write-timeout would cut it.
func (s *Server) longPoll(ctx huma.Context, next func(huma.Context)) {
	lp, _ := ctx.Operation().Metadata[metaLongPoll].(bool)
	stream, _ := ctx.Operation().Metadata[metaStream].(bool)
	if !lp && !stream {
		next(ctx)
		return
	}
	if w := ctx.Query("wait"); !stream && (w == "" || w == "0" || w == "0s") {
		next(ctx)
		return
	}
	key := "agent:" + ctx.Param("id")
	if p := principal(ctx.Context()); p.Token.ID != "" {
		key = "token:" + p.Token.ID
	} else if stream {
		key = "user:" + p.Name
	}
	if !s.polls.acquire(key) {
		ctx.SetHeader("Retry-After", strconv.Itoa(1))
		_ = huma.WriteErr(s.api, ctx, http.StatusTooManyRequests,
			"too many concurrent waits for this caller (at most "+strconv.Itoa(s.polls.max)+"; serve --max-long-polls): retry later or wait less")
		return
	}
	defer s.polls.release(key)
	if _, w := humago.Unwrap(ctx); w != nil {
		// Not every writer supports deadlines (httptest's recorder): then
		// there is none to extend.
		deadline := time.Now().Add(MaxTakeWait + longPollSlack)
		if stream {
			deadline = time.Time{} // none: a stream lasts as long as its client
		}
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
	}
	next(ctx)
}
