package outbound

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRefusalAndRateLimitClassification(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		status      int
		header      http.Header
		transient   []int
		refusal     bool
		rateLimited bool
	}{
		{name: "2xx", status: 200},
		{name: "400 bad request", status: 400, refusal: true},
		{name: "401 unauthorized", status: 401, refusal: true},
		{name: "403 forbidden", status: 403, header: h("X-RateLimit-Remaining", "12"), refusal: true},
		{name: "403 primary rate limit", status: 403, header: h("X-RateLimit-Remaining", "0"), rateLimited: true},
		{name: "403 secondary rate limit", status: 403, header: h("Retry-After", "60"), rateLimited: true},
		{name: "404 not found", status: 404, refusal: true},
		{name: "408 request timeout", status: 408},
		{name: "409 conflict", status: 409, refusal: true},
		{name: "409 documented transient", status: 409, transient: []int{409}},
		{name: "422 unprocessable", status: 422, refusal: true},
		{name: "425 too early", status: 425},
		{name: "429", status: 429, rateLimited: true},
		{name: "500", status: 500},
		{name: "503", status: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.refusal, Refusal(tc.status, tc.header, tc.transient...))
			require.Equal(t, tc.rateLimited, RateLimited(tc.status, tc.header))
		})
	}
}

func TestRetryWaitReadsEveryVendorsHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{name: "none", header: http.Header{}},
		{name: "nil"},
		{name: "Retry-After seconds", header: http.Header{"Retry-After": {"7"}}, want: 7 * time.Second},
		{name: "Retry-After first", header: http.Header{"Retry-After": {"7"}, "X-Ratelimit-Reset": {"30"}}, want: 7 * time.Second},
		{name: "GitHub x-ratelimit-reset epoch", header: http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(42*time.Second).Unix(), 10)}},
			want: 42 * time.Second},
		{name: "a reset passed", header: http.Header{"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(-time.Minute).Unix(), 10)}}},
		{name: "Datadog X-RateLimit-Reset seconds", header: http.Header{"X-Ratelimit-Reset": {"12"}}, want: 12 * time.Second},
		{name: "unreadable", header: http.Header{"X-Ratelimit-Reset": {"soon"}}},
	} {
		require.Equal(t, tc.want, RetryWait(tc.header, now), tc.name)
	}
}

// A rate-limited 403 is backed off and retried as a 429 is, honouring
// x-ratelimit-reset, even for a call that is not idempotent; a refusal
// comes back at once, marked so agents end the job with its message.
func TestRateLimited403IsRetriedAndRefusalsAreMarked(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/refused":
			n.Add(1)
			http.Error(w, `{"message":"Workflow does not have 'workflow_dispatch' trigger"}`, http.StatusUnprocessableEntity)
		case n.Add(1) == 1:
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "0") // no wait given: the client's backoff
			http.Error(w, `{"message":"API rate limit exceeded"}`, http.StatusForbidden)
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	c := fast(Options{})
	_, err := c.DoJSON(t.Context(), Request{Call: "dispatch", Method: http.MethodPost, URL: srv.URL + "/limited"}, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, n.Load())

	n.Store(0)
	_, err = c.DoJSON(t.Context(), Request{Call: "dispatch", Method: http.MethodPost, URL: srv.URL + "/refused", Idempotent: true}, nil)
	require.Error(t, err)
	require.EqualValues(t, 1, n.Load(), "a refusal is not retried")
	require.True(t, IsRefusal(err))
	require.Contains(t, Message(err), "dispatch: 422 Unprocessable Entity")
	require.Contains(t, Message(err), "workflow_dispatch' trigger")

	_, err = c.DoJSON(t.Context(), Request{Call: "sync", Method: http.MethodPost, URL: srv.URL + "/refused", Transient: []int{422}}, nil)
	require.False(t, IsRefusal(err), "a status the call documents as transient")
}
