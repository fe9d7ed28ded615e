package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestLongPollCap: past its cap a caller's next wait is refused 429 with
// Retry-After before it waits; a take that does not wait is not counted,
// and a released slot can be taken again.
func TestLongPollCap(t *testing.T) {
	t.Parallel()
	clock := ports.SystemClock
	s := New(Options{Tokens: memory.NewTokens(), Releases: memory.NewReleaseStore(clock), Queue: memory.NewQueue(clock),
		Clock: clock, Insecure: true, LongPolls: 2})
	take := func(wait string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, Prefix+"/job-agents/ext/jobs/next?wait="+wait, strings.NewReader(`{"taker":"t"}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec
	}
	for range 2 {
		require.True(t, s.polls.acquire("agent:ext"))
	}
	rec := take("1s")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "--max-long-polls")
	require.NotEqual(t, http.StatusTooManyRequests, take("0s").Code, "a take without a wait is not capped")
	s.polls.release("agent:ext")
	require.NotEqual(t, http.StatusTooManyRequests, take("1s").Code, "a released slot is free again")
	require.Equal(t, 1, s.polls.open["agent:ext"], "the finished wait gave its slot back")
}
