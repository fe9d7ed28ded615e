package outbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/tracing"
)

// fast is a client with tiny waits for tests.
func fast(o Options) *Client {
	if o.Adapter == "" {
		o.Adapter = "test-adapter"
	}
	if o.Backoff == 0 {
		o.Backoff = time.Millisecond
	}
	if o.Guard == nil {
		o.Guard = netguard.Loopback // the test servers listen on loopback
	}
	return New(o)
}

func TestRetriesServerErrorsThenSucceeds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	var out struct{ OK bool }
	_, err := fast(Options{}).DoJSON(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL, Idempotent: true}, &out)
	require.NoError(t, err)
	require.True(t, out.OK)
	require.EqualValues(t, 3, n.Load())
}

func TestGivesUpAfterAttemptsNamingAdapterCallAndStatus(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := fast(Options{Attempts: 3}).Do(t.Context(), Request{Call: "query metrics", Method: http.MethodGet, URL: srv.URL, Idempotent: true})
	require.Error(t, err)
	require.EqualValues(t, 3, n.Load())
	require.Contains(t, err.Error(), "test-adapter: query metrics: status 503")
	require.Contains(t, err.Error(), "down for maintenance")
	require.Equal(t, 503, StatusOf(err))
}

func TestNonIdempotentRetriesOnly429(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	resp, err := fast(Options{}).Do(t.Context(), Request{Call: "create", Method: http.MethodPost, URL: srv.URL})
	require.NoError(t, err, "a 5xx of a non-idempotent call is returned, not retried")
	require.Equal(t, 500, resp.Status)
	require.EqualValues(t, 2, n.Load(), "the 429 was retried, the 500 was not")
}

// waits records the pauses a client makes between attempts, without
// waiting: a test reads what was asked, not how long it took.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) pause(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return nil
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

// recording is fast(o) whose pauses between attempts w records.
func recording(o Options, w *waits) *Client {
	c := fast(o)
	c.pause = w.pause
	return c
}

func TestHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	var w waits
	_, err := recording(Options{}, &w).Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL, Idempotent: true})
	require.NoError(t, err)
	require.EqualValues(t, 2, n.Load())
	require.Equal(t, []time.Duration{time.Second}, w.all(), "waited as Retry-After asked, not the 1ms backoff")
}

func TestRetryAfterParsing(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, 7*time.Second, retryAfter("7", now))
	require.Equal(t, 30*time.Second, retryAfter(now.Add(30*time.Second).Format(http.TimeFormat), now))
	require.Zero(t, retryAfter("", now))
	require.Zero(t, retryAfter("soon", now))
	require.Zero(t, retryAfter("-3", now))
}

func TestRetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()
	var w waits
	_, err := recording(Options{MaxRetryAfter: 10 * time.Millisecond}, &w).Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL})
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Millisecond}, w.all(), "an hour's Retry-After waits MaxRetryAfter")
}

func TestResponseSizeCap(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
	}))
	defer srv.Close()
	_, err := fast(Options{MaxBody: 1024}).Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL, Idempotent: true})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Contains(t, err.Error(), "test-adapter: get")
}

func TestTimeoutPerAttempt(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	_, err := fast(Options{Timeout: 50 * time.Millisecond, Attempts: 2}).Do(t.Context(), Request{Call: "slow", Method: http.MethodGet, URL: srv.URL, Idempotent: true})
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "test-adapter: slow")
}

func TestCancelledContextReturnsPromptly(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "60")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := fast(Options{}).Do(ctx, Request{Call: "get", Method: http.MethodGet, URL: srv.URL})
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return after cancel")
	}
}

func TestPerHostConcurrencyLimit(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int32
	arrived := make(chan struct{}, 16)
	gate := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-gate
		inFlight.Add(-1)
	}))
	defer srv.Close()
	c := fast(Options{PerHost: 2})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, err := c.Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL, Idempotent: true})
			if err != nil {
				t.Error(err)
			}
		})
	}
	<-arrived
	<-arrived
	select {
	case <-arrived:
		t.Fatal("a third request reached the host while two were in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	wg.Wait()
	require.EqualValues(t, 2, peak.Load())
}

func TestMalformedJSONIsAnError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"truncated":`))
	}))
	defer srv.Close()
	var out map[string]any
	_, err := fast(Options{}).DoJSON(t.Context(), Request{Call: "read", Method: http.MethodGet, URL: srv.URL}, &out)
	require.ErrorIs(t, err, ErrMalformed)
	require.Contains(t, err.Error(), "test-adapter: read: status 200")
}

func TestNon2xxIsAnErrorWithStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}))
	defer srv.Close()
	_, err := fast(Options{}).DoJSON(t.Context(), Request{Call: "get run", Method: http.MethodGet, URL: srv.URL}, nil)
	require.Equal(t, 404, StatusOf(err))
	require.Contains(t, err.Error(), "get run: status 404")
}

func TestErrorsNeverCarryHeadersOrQuery(t *testing.T) {
	t.Parallel()
	_, err := fast(Options{Attempts: 1}).Do(t.Context(), Request{Call: "get", Method: http.MethodGet,
		URL: "http://127.0.0.1:1/x?api_key=SECRETVALUE", Header: http.Header{"Authorization": {"Bearer SECRETVALUE"}}, Idempotent: true})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "SECRETVALUE")
}

func TestBadURL(t *testing.T) {
	t.Parallel()
	_, err := fast(Options{}).Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: "ftp://x"})
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Contains(t, err.Error(), "bad URL")
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var hit atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hit.Store(true) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusFound)
	}))
	defer srv.Close()
	resp, err := fast(Options{}).Do(t.Context(), Request{Call: "get", Method: http.MethodGet, URL: srv.URL,
		Header: http.Header{"Authorization": {"Bearer x"}}})
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.Status)
	require.False(t, hit.Load(), "credentials are not carried to another host")
}

func TestUnexpectedNamesTheCallStatusAndBodyStart(t *testing.T) {
	t.Parallel()
	c := New(Options{Adapter: "argo-cd"})
	err := c.Unexpected("sync application", &Response{Status: 409, Body: []byte(strings.Repeat("x", bodyPrefix+10))})
	require.Equal(t, 409, StatusOf(err))
	require.Equal(t, `argo-cd: sync application: status 409: "`+strings.Repeat("x", bodyPrefix)+`..."`, err.Error())
}

// TestCallCarriesTraceparent: a call made under a traced context is a
// span of that trace and sends its traceparent; without an exporter it
// sends none. Not parallel: it sets the process's provider.
func TestCallCarriesTraceparent(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Get(tracing.Header) }))
	defer srv.Close()
	c := fast(Options{})

	rec := tracetest.NewSpanRecorder()
	restore := tracing.SetProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	ctx, span := tracing.Start(t.Context(), "pass")
	_, err := c.Do(ctx, Request{Call: "dispatch", Method: http.MethodPost, URL: srv.URL})
	require.NoError(t, err)
	span.End()
	restore()
	require.Equal(t, span.SpanContext().TraceID(), tracing.SpanContext(<-got).TraceID())
	require.Len(t, rec.Ended(), 2, "the call's span and its caller's")

	ctx, span = tracing.Start(t.Context(), "pass") // no exporter
	_, err = c.Do(ctx, Request{Call: "dispatch", Method: http.MethodPost, URL: srv.URL})
	require.NoError(t, err)
	span.End()
	require.Empty(t, <-got)
	require.Len(t, rec.Ended(), 2, "nothing more recorded")
}
