package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the API's requests by route and status and times them.
// The route is the pattern that served the request ("GET
// /api/v1/jobs/{id}"), never the raw path, so the series are bounded by
// the API's operations; a request no operation matched is "unmatched". A
// nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the API's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reconciler_api_requests_total",
			Help: "API requests by route (the operation's method and path pattern; unmatched when none) and status code.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "reconciler_api_request_duration_seconds",
			Help:    "Duration of API requests by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// unmatchedRoute is the route label of a request no operation served.
const unmatchedRoute = "unmatched"

// middleware counts each request next serves once it has answered.
// http.ServeMux records the pattern it matched on the request itself, so
// it is read after next returns.
func (m *Metrics) middleware(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		route, status := routeOf(r), rec.code()
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// routeOf is the route template the mux matched for r, once it has
// served r, or unmatchedRoute.
func routeOf(r *http.Request) string {
	if r.Pattern == "" || r.Pattern == Prefix+"/" {
		return unmatchedRoute
	}
	return r.Pattern
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// code is the status written, 200 when the handler wrote none.
func (s *statusRecorder) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
