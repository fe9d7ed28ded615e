package engine

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/internal/tracing"
)

// passSpan starts the span of one pass of kind over items, named "pass
// KIND" with the kind, the first item's key and the item count. The span
// continues the trace the first traced item was enqueued under (its
// Traceparent, stored with the item by the queue, so in whichever process
// enqueued it) and links the other items' traces.
func (e *Engine) passSpan(ctx context.Context, kind string, items []Item) (context.Context, trace.Span) {
	var parent trace.SpanContext
	var links []trace.Link
	for _, it := range items {
		sc := tracing.SpanContext(it.Traceparent)
		switch {
		case !sc.IsValid():
		case !parent.IsValid():
			parent = sc
		case sc.TraceID() != parent.TraceID():
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	return tracing.Start(ctx, "pass "+kind, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...),
		trace.WithAttributes(tracing.AttrKind.String(kind), tracing.AttrKey.String(items[0].Key.String()), tracing.AttrItems.Int(len(items))))
}

// endPass ends a pass's span, an error when an item did not end Done or
// requeued.
func endPass(span trace.Span, outs []Outcome) {
	if span.IsRecording() {
		for _, o := range outs {
			if o.kind != outcomeDone && o.kind != outcomeRequeue {
				span.SetStatus(codes.Error, o.String())
				break
			}
		}
	}
	span.End()
}
