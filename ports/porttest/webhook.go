package porttest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
)

// received is one request as the suite's server saw it.
type received struct {
	method, path, query, contentType, body string
	header                                 http.Header
}

// hookServer is the suite's webhook receiver: it records every request
// and answers with the status and body the path asks for.
type hookServer struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	hang chan struct{}
}

func newHookServer(t *testing.T) *hookServer {
	s := &hookServer{hang: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, received{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			contentType: r.Header.Get("Content-Type"), body: string(b), header: r.Header.Clone()})
		s.mu.Unlock()
		switch r.URL.Path {
		case "/hang":
			select {
			case <-s.hang:
			case <-r.Context().Done():
			}
		case "/fail":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"error":"upstream down"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"deployed":true}`))
		}
	}))
	t.Cleanup(func() { close(s.hang); s.Close() })
	return s
}

// last is the last request received.
func (s *hookServer) last(t *testing.T) received {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.got, "the server received no request")
	return s.got[len(s.got)-1]
}

// Webhook is the conformance suite of ports.Webhook, run against a local
// httptest server that asserts the exact requests. newHook is called once
// per subtest; subtests run in parallel.
func Webhook(t *testing.T, newHook func(t *testing.T) ports.Webhook) {
	t.Run("JSONBodyHeadersAndIdempotencyKey", func(t *testing.T) {
		t.Parallel()
		srv := newHookServer(t)
		resp, err := newHook(t).Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/deploy?env=prod",
			Headers: map[string]string{"Authorization": "Bearer t0k", "X-Trace": "abc"},
			Body:    map[string]any{"image": "app:1", "replicas": 3}, IdempotencyKey: "wf/w1/notify/0"})
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status)
		require.JSONEq(t, `{"deployed":true}`, string(resp.Body))
		got := srv.last(t)
		require.Equal(t, http.MethodPost, got.method, "POST by default")
		require.Equal(t, "/deploy", got.path)
		require.Equal(t, "env=prod", got.query)
		require.Equal(t, "application/json", got.contentType)
		require.JSONEq(t, `{"image":"app:1","replicas":3}`, got.body)
		require.Equal(t, "Bearer t0k", got.header.Get("Authorization"))
		require.Equal(t, "abc", got.header.Get("X-Trace"))
		require.Equal(t, "wf/w1/notify/0", got.header.Get(ports.IdempotencyKeyHeader))
	})
	t.Run("StringBodyAsIsAndMethod", func(t *testing.T) {
		t.Parallel()
		srv := newHookServer(t)
		_, err := newHook(t).Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/raw", Method: http.MethodPut, Body: "plain text"})
		require.NoError(t, err)
		got := srv.last(t)
		require.Equal(t, http.MethodPut, got.method)
		require.Equal(t, "plain text", got.body)
		require.NotEqual(t, "application/json", got.contentType)
		require.Empty(t, got.header.Values(ports.IdempotencyKeyHeader), "no key, no header")
	})
	t.Run("NoBody", func(t *testing.T) {
		t.Parallel()
		srv := newHookServer(t)
		_, err := newHook(t).Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/ping", Method: http.MethodGet, IdempotencyKey: "k"})
		require.NoError(t, err)
		got := srv.last(t)
		require.Equal(t, http.MethodGet, got.method)
		require.Empty(t, got.body)
		require.Equal(t, "k", got.header.Get(ports.IdempotencyKeyHeader))
	})
	t.Run("AnyStatusIsAResponse", func(t *testing.T) {
		t.Parallel()
		srv := newHookServer(t)
		resp, err := newHook(t).Send(t.Context(), ports.WebhookRequest{URL: srv.URL + "/fail", Body: map[string]any{}})
		require.NoError(t, err, "a non-2xx answer is a response, not an error")
		require.Equal(t, http.StatusBadGateway, resp.Status)
		require.JSONEq(t, `{"error":"upstream down"}`, string(resp.Body))
	})
	t.Run("NoAnswerIsAnError", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // nobody listens there now
		_, err = newHook(t).Send(t.Context(), ports.WebhookRequest{URL: "http://" + addr + "/x"})
		require.Error(t, err)
	})
	t.Run("CancelledContextReturnsPromptly", func(t *testing.T) {
		t.Parallel()
		srv := newHookServer(t)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := newHook(t).Send(ctx, ports.WebhookRequest{URL: srv.URL + "/hang"})
		require.Error(t, err)
		require.Less(t, time.Since(start), 5*time.Second, "Send returns when its context ends")
	})
}
