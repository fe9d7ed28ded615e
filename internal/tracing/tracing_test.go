package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
)

// record installs an in-memory provider for the test and returns its
// recorder.
func record(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(tracing.SetProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	return rec
}

func TestTraceparentRoundTrips(t *testing.T) {
	record(t)
	ctx, span := tracing.Start(t.Context(), "parent")
	defer span.End()
	tp := tracing.Traceparent(ctx)
	require.Regexp(t, `^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`, tp)
	sc := trace.SpanContextFromContext(tracing.Remote(context.Background(), tp))
	require.Equal(t, span.SpanContext().TraceID(), sc.TraceID())
	require.Equal(t, span.SpanContext().SpanID(), sc.SpanID())
	require.True(t, sc.IsRemote())

	for _, bad := range []string{"", "garbage", "00-00000000000000000000000000000000-0000000000000000-01"} {
		require.False(t, tracing.SpanContext(bad).IsValid(), bad)
		require.Empty(t, tracing.Traceparent(tracing.Remote(context.Background(), bad)), bad)
	}
}

func TestTransportSendsTraceparent(t *testing.T) {
	rec := record(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Get(tracing.Header) }))
	defer srv.Close()
	ctx, span := tracing.Start(t.Context(), "pass")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
	require.NoError(t, err)
	res, err := (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	span.End()
	require.Empty(t, req.Header.Get(tracing.Header), "the caller's request is not changed")

	sent := tracing.SpanContext(<-got)
	require.Equal(t, span.SpanContext().TraceID(), sent.TraceID(), "the call continues the caller's trace")
	spans := rec.Ended()
	require.Len(t, spans, 2)
	require.Equal(t, "HTTP POST", spans[0].Name())
	require.Equal(t, sent.SpanID(), spans[0].SpanContext().SpanID(), "the header names the call's own span")
	require.Equal(t, span.SpanContext().SpanID(), spans[0].Parent().SpanID())
}

func TestOffRecordsAndSendsNothing(t *testing.T) {
	rec := record(t)
	tracing.SetProvider(nil) // restored by record's cleanup
	require.False(t, tracing.Enabled())
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Get(tracing.Header) }))
	defer srv.Close()
	ctx, span := tracing.Start(t.Context(), "pass")
	require.Empty(t, tracing.Traceparent(ctx))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	res, err := (&http.Client{Transport: tracing.Transport(nil)}).Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	span.End()
	require.Empty(t, <-got, "no traceparent header")
	require.Empty(t, rec.Ended(), "no span recorded")
	require.Empty(t, rec.Started())
}

// fakeQueue records the enqueues it is asked for.
type fakeQueue struct {
	ports.Queue
	enqueued []ports.EnqueueParams
}

func (q *fakeQueue) WorkEnqueue(_ context.Context, items ...ports.EnqueueParams) error {
	q.enqueued = append(q.enqueued, items...)
	return nil
}

func TestQueueStampsTheEnqueuersTrace(t *testing.T) {
	record(t)
	inner := &fakeQueue{}
	q := tracing.Queue(inner)
	a, b, c := ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "a"}, ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "b"},
		ports.WorkKey{Kind: "k", ScopeType: "t", ScopeID: "c"}

	require.NoError(t, q.WorkEnqueue(t.Context(), ports.EnqueueParams{Key: a}))
	require.Empty(t, inner.enqueued[0].Traceparent, "an untraced enqueue carries nothing")

	ctx1, s1 := tracing.Start(t.Context(), "request 1")
	defer s1.End()
	mine := []ports.EnqueueParams{{Key: a}, {Key: b}}
	require.NoError(t, q.WorkEnqueue(ctx1, mine...))
	require.Equal(t, tracing.Traceparent(ctx1), inner.enqueued[1].Traceparent)
	require.Equal(t, tracing.Traceparent(ctx1), inner.enqueued[2].Traceparent)
	require.Empty(t, mine[0].Traceparent, "the caller's items are not changed")

	// A batcher enqueuing c for request 2 under request 1's context:
	// Carry keeps request 2's trace for c.
	ctx2, s2 := tracing.Start(t.Context(), "request 2")
	defer s2.End()
	batchCtx, items := tracing.Carry(ctx2, []ports.EnqueueParams{{Key: c}})
	require.Empty(t, tracing.Traceparent(batchCtx))
	require.NoError(t, q.WorkEnqueue(ctx1, items...))
	require.Equal(t, tracing.Traceparent(ctx2), inner.enqueued[3].Traceparent, "a stamped item keeps its trace")
	plain, same := tracing.Carry(t.Context(), items)
	require.Equal(t, t.Context(), plain, "no span: ctx as it is")
	require.Equal(t, items, same)
}

func TestCheckEndpoint(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:4318", "https://collector.example/v1/traces"} {
		require.NoError(t, tracing.CheckEndpoint(ok), ok)
	}
	for _, bad := range []string{"", "127.0.0.1:4318", "ftp://x", "http://", "::"} {
		require.Error(t, tracing.CheckEndpoint(bad), bad)
	}
}

// TestExportPostsToTheCollector: Export sends the spans over OTLP/HTTP to
// the endpoint's /v1/traces when it has no path, at the latest on
// shutdown, which then restores the no-op provider.
func TestExportPostsToTheCollector(t *testing.T) {
	paths := make(chan string, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { paths <- r.Method + " " + r.URL.Path }))
	defer srv.Close()
	shutdown, err := tracing.Export(t.Context(), srv.URL, "test")
	require.NoError(t, err)
	require.True(t, tracing.Enabled())
	_, span := tracing.Start(t.Context(), "pass")
	span.End()
	require.NoError(t, shutdown(t.Context()))
	require.False(t, tracing.Enabled())
	require.Equal(t, "POST /v1/traces", <-paths)

	_, err = tracing.Export(t.Context(), "127.0.0.1:4318", "test")
	require.Error(t, err)
	require.False(t, tracing.Enabled())
}
