// Package jobagenttest is what the external agents' tests share: fast
// options, a reporter to wait on, and the common part of the fake APIs
// (an httptest server recording requests, answering queued faults and
// checking credentials before the fake's own handler runs).
package jobagenttest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/internal/contract"
	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
)

// Wait bounds every wait for a report.
const Wait = 10 * time.Second

// FastOptions poll every few milliseconds and retry after one.
func FastOptions() jobagent.Options {
	return jobagent.Options{MinPoll: 5 * time.Millisecond, MaxPoll: 20 * time.Millisecond, HTTP: outbound.Options{Guard: netguard.Loopback, Backoff: time.Millisecond}}
}

// Reports is a ports.JobReporter that keeps every report and hands each
// to the waiting test.
type Reports struct {
	mu  sync.Mutex
	all []ports.JobReport
	ch  chan ports.JobReport
}

// NewReports returns an empty reporter.
func NewReports() *Reports { return &Reports{ch: make(chan ports.JobReport, 256)} }

// ReportJob records rep.
func (r *Reports) ReportJob(_ context.Context, rep ports.JobReport) error {
	r.mu.Lock()
	r.all = append(r.all, rep)
	r.mu.Unlock()
	r.ch <- rep
	return nil
}

// All returns the reports so far.
func (r *Reports) All() []ports.JobReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ports.JobReport(nil), r.all...)
}

// Next waits for the next report, failing the test after Wait.
func (r *Reports) Next(t *testing.T) ports.JobReport {
	t.Helper()
	return r.Until(t, func(ports.JobReport) bool { return true })
}

// Terminal waits for the next terminal report, skipping the others.
func (r *Reports) Terminal(t *testing.T) ports.JobReport {
	t.Helper()
	return r.Until(t, func(rep ports.JobReport) bool { return rep.Status.IsTerminal() })
}

// Until waits for the next report for which ok holds, skipping the
// others, failing the test after Wait.
func (r *Reports) Until(t *testing.T, ok func(ports.JobReport) bool) ports.JobReport {
	t.Helper()
	deadline := time.NewTimer(Wait)
	defer deadline.Stop()
	for {
		select {
		case rep := <-r.ch:
			if ok(rep) {
				return rep
			}
		case <-deadline.C:
			t.Fatalf("no such report within %s; reports: %+v", Wait, r.All())
			return ports.JobReport{}
		}
	}
}

// ServerOptions says how a fake API answers what Server handles itself.
type ServerOptions struct {
	// Authorized checks a request's credentials; nil takes any.
	Authorized func(r *http.Request) bool
	// Unauthorized is the JSON body of the 401 answered otherwise.
	Unauthorized any
	// FaultBody is the JSON body of a fault's answer; nil answers none.
	FaultBody any
	// Definition is the path of the vendor's published API definition
	// (OpenAPI 3 or Swagger 2.0); when set, every request the server
	// receives and every response it sends is checked against it, and the
	// test fails naming each exchange outside it (internal/contract).
	Definition string
}

// Server is the common part of a fake API: an httptest server that, under
// Mu, records each request in Requests ("METHOD path"), answers the queued
// Faults first (one status each, with Retry-After: 0), refuses a request
// Authorized rejects with 401, and hands the rest to the fake's handler,
// still under Mu. Tests hold Mu to read or change the fake's state.
type Server struct {
	Mu       sync.Mutex
	Faults   []int
	Requests []string
	// URL is the server's root.
	URL string
}

// NewServer starts the fake serving handler, closed when the test ends.
func NewServer(t *testing.T, o ServerOptions, handler http.HandlerFunc) *Server {
	s := &Server{}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Mu.Lock()
		defer s.Mu.Unlock()
		s.Requests = append(s.Requests, r.Method+" "+r.URL.Path)
		if len(s.Faults) > 0 {
			code := s.Faults[0]
			s.Faults = s.Faults[1:]
			w.Header().Set("Retry-After", "0")
			if o.FaultBody == nil {
				w.WriteHeader(code)
				return
			}
			WriteJSON(w, code, o.FaultBody)
			return
		}
		if o.Authorized != nil && !o.Authorized(r) {
			WriteJSON(w, http.StatusUnauthorized, o.Unauthorized)
			return
		}
		handler(w, r)
	})
	if o.Definition != "" {
		c, err := contract.Load(o.Definition)
		if err != nil {
			t.Fatal(err)
		}
		c.FailOnViolations(t)
		h = c.Wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Bearer is an Authorized check for the bearer token.
func Bearer(token string) func(r *http.Request) bool {
	return func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }
}

// WriteJSON answers code with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
