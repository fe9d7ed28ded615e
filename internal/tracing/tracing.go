package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of every span the daemon starts.
const Name = "github.com/reconcilerhq/reconciler"

// Header is the W3C trace context header (and the take answer's field).
const Header = "traceparent"

// Env is the environment variable a process agent finds the trace context
// in.
const Env = "TRACEPARENT"

// Span attribute keys the daemon sets.
const (
	AttrKind  = attribute.Key("reconciler.kind")
	AttrKey   = attribute.Key("reconciler.key")
	AttrItems = attribute.Key("reconciler.items")
)

var (
	provider   atomic.Pointer[trace.TracerProvider]
	propagator = propagation.TraceContext{}
	noopTracer = noop.NewTracerProvider().Tracer(Name)
)

// SetProvider makes p the provider of every span started after it; nil
// restores the no-op provider. serve calls it once at start; tests set an
// in-memory one and restore the previous provider with the returned func.
func SetProvider(p trace.TracerProvider) (restore func()) {
	var prev *trace.TracerProvider
	if p == nil {
		prev = provider.Swap(nil)
	} else {
		prev = provider.Swap(&p)
	}
	return func() { provider.Store(prev) }
}

// Enabled reports whether a provider other than the no-op one is set.
func Enabled() bool { return provider.Load() != nil }

// Tracer is the daemon's tracer under the current provider.
func Tracer() trace.Tracer {
	if p := provider.Load(); p != nil {
		return (*p).Tracer(Name)
	}
	return noopTracer
}

// Start starts a span named name under ctx's span.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, opts...)
}

// Traceparent is the W3C traceparent of ctx's span, or "" when ctx holds
// no valid span context.
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[Header]
}

// Remote returns ctx with the span context of traceparent as its remote
// parent; an empty or malformed traceparent leaves ctx as it is.
func Remote(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{Header: traceparent})
}

// SpanContext is the span context of traceparent; invalid when it is empty
// or malformed.
func SpanContext(traceparent string) trace.SpanContext {
	return trace.SpanContextFromContext(Remote(context.Background(), traceparent))
}
