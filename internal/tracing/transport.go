package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps next so each request is a client span under the
// request's context and carries its traceparent header. The span ends
// when the response headers arrive.
func Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return transport{next: next}
}

type transport struct{ next http.RoundTripper }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Host)))
	defer span.End()
	if span.SpanContext().IsValid() {
		r = r.Clone(ctx)
		propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	res, err := t.next.RoundTrip(r)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return res, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode))
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, res.Status)
	}
	return res, nil
}

// FromHeader returns ctx with the trace context of h's traceparent header
// as its remote parent (a caller's trace continues); without one, ctx.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	if h.Get(Header) == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}
