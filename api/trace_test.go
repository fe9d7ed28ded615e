package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
)

// rollOutTraced creates version v1 of web, runs the passes, takes dev's
// job as a pull agent and reports it successful with the take's
// traceparent as its header, and runs the passes again. It returns the
// take answer's traceparent.
func rollOutTraced(t *testing.T, f *fixture) string {
	t.Helper()
	require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
	id := f.activeJob("web:dev:r1")
	res := f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-1"})
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var tk struct {
		TakeToken   string `json:"take_token"`
		Traceparent string `json:"traceparent"`
		Job         struct {
			Traceparent string `json:"traceparent"`
		} `json:"job"`
	}
	require.NoError(t, json.Unmarshal(res.body, &tk))
	require.Equal(t, tk.Traceparent, tk.Job.Traceparent, "the take answer's traceparent is the job's")
	headers := []string{}
	if tk.Traceparent != "" {
		headers = append(headers, tracing.Header, tk.Traceparent)
	}
	res = f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "successful"}, headers...)
	require.Equal(t, http.StatusNoContent, res.status, string(res.body))
	f.drain()
	require.Equal(t, "successful", f.jobField(id, "status"))
	return tk.Traceparent
}

// TestOneTraceFromVersionToReport follows a rollout with an in-memory
// exporter: the request that creates the version, the passes it causes,
// the chain's transactions, the job (its take answer) and the agent's
// report are one trace. Not parallel: it sets the process's provider.
func TestOneTraceFromVersionToReport(t *testing.T) {
	for name := range backends {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			defer tracing.SetProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))()
			f := setup(t, name)
			tp := rollOutTraced(t, f)
			require.NotEmpty(t, tp, "a traced job carries its trace context to the taker")

			spans := rec.Ended()
			var names []string
			i := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "POST /api/v1/versions" })
			require.GreaterOrEqual(t, i, 0, "the request is a span named by its route")
			trace := spans[i].SpanContext().TraceID()
			require.Equal(t, trace, tracing.SpanContext(tp).TraceID(), "the job carries the request's trace")
			for _, s := range spans {
				if s.SpanContext().TraceID() == trace {
					names = append(names, s.Name())
				}
			}
			want := []string{"POST /api/v1/versions", "pass desired-release", "pass job-dispatch", "POST /api/v1/job-agents/{id}/jobs/{job}/report"}
			if _, ok := f.st.releases.(ports.Transactor); ok {
				want = append(want, "chain.tx") // the chain's batches run in transactions of the store
			}
			for _, want := range want {
				require.Contains(t, names, want, "one trace from the version to the job's report: %v", names)
			}
			require.Contains(t, spans[i].Attributes(), attribute.Int("http.response.status_code", http.StatusCreated))
			j := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "pass job-dispatch" })
			require.Contains(t, spans[j].Attributes(), tracing.AttrKind.String("job-dispatch"))
		})
	}
}

// TestNoSpansWithoutExporter runs the same rollout with the no-op
// provider: no span is recorded and no job or take answer carries a
// trace context.
func TestNoSpansWithoutExporter(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	restore := tracing.SetProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	restore() // the exporter is off again: what serve runs without --otlp-endpoint
	require.False(t, tracing.Enabled())
	f := setup(t, "memory")
	require.Empty(t, rollOutTraced(t, f))
	require.Empty(t, rec.Started(), "nothing is recorded")
}
