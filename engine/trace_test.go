package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/postgres"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestPassContinuesTheEnqueuersTrace: an item enqueued inside a span, by
// one process, is passed by an engine of another process (on PostgreSQL,
// another connection pool and queue over the same tables) under a span of
// the enqueuer's trace, the enqueuer's span its parent.
func TestPassContinuesTheEnqueuersTrace(t *testing.T) {
	stores := map[string]func(t *testing.T) (enqueuer, leaser ports.Queue){
		"memory": func(*testing.T) (ports.Queue, ports.Queue) {
			q := memory.NewQueue(ports.SystemClock)
			return q, q
		},
		"postgres": func(t *testing.T) (ports.Queue, ports.Queue) {
			dsn, _ := pgtest.Schema(t)
			open := func() ports.Queue {
				db, err := postgres.Open(t.Context(), dsn)
				require.NoError(t, err)
				t.Cleanup(db.Close)
				require.NoError(t, db.MigrateUp(t.Context()))
				q := postgres.NewQueue(db, ports.SystemClock)
				t.Cleanup(q.Close)
				return q
			}
			return open(), open()
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			t.Cleanup(tracing.SetProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
			enq, lease := open(t)
			enq, lease = tracing.Queue(enq), tracing.Queue(lease)

			ctx, span := tracing.Start(t.Context(), "POST /versions")
			key := ports.WorkKey{Kind: "traced", ScopeType: "target", ScopeID: "a"}
			require.NoError(t, enq.WorkEnqueue(ctx, ports.EnqueueParams{Key: key}))
			span.End()

			passed := make(chan trace.SpanContext, 1)
			eng := engine.New(lease, engine.Options{Logger: quietLogger(), PollInterval: 10 * time.Millisecond})
			eng.Register("traced", engine.ProcessorFunc(func(ctx context.Context, _ engine.Item) engine.Outcome {
				passed <- trace.SpanContextFromContext(ctx)
				return engine.Done()
			}), engine.KindOptions{})
			stop := run(t, eng)
			defer stop()
			var got trace.SpanContext
			select {
			case got = <-passed:
			case <-time.After(30 * time.Second):
				t.Fatal("the item was not passed")
			}
			stop()
			require.Equal(t, span.SpanContext().TraceID(), got.TraceID(), "one trace from the enqueue to the pass")
			var pass sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "pass traced" {
					pass = s
				}
			}
			require.NotNil(t, pass)
			require.Equal(t, span.SpanContext().SpanID(), pass.Parent().SpanID(), "the enqueuer's span is the pass's parent")
		})
	}
}
