package api

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/reconcilerhq/reconciler/internal/tracing"
)

// traced makes each request next serves one server span, named by the
// route template the mux matched ("POST /api/v1/versions") and with the
// status it answered; a caller's traceparent header parents it. Without an
// exporter (tracing.Enabled) it is next itself.
func traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !tracing.Enabled() {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := tracing.Start(tracing.FromHeader(r.Context(), r.Header), "HTTP "+r.Method,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w}
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		route, status := routeOf(r), rec.code()
		span.SetName(route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	})
}
