package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// benchReadEvery is how often bench release --read-probe reads.
const benchReadEvery = 100 * time.Millisecond

// benchReads is bench release's read probe (--read-probe): while the timed
// phase runs, one client of an API served on loopback from the bench
// process asks, every benchReadEvery, for the explanation of one target
// (a different one each time) and for the first page of the deployment's
// target list, as an operator's console and CLI would, and records how
// long each answer took.
type benchReads struct {
	srv        *http.Server
	quit, done chan struct{}

	base string

	mu            sync.Mutex
	explain, list []time.Duration
	failed        int
	firstFailure  string
}

// startBenchReads serves be's API (with ch for explain) on loopback and
// starts probing targets of deployment api in environments envs over
// resources node-000000 to node-(resources-1).
func startBenchReads(ctx context.Context, be *backend, ch *chain.Chain, envs []string, resources int, log *slog.Logger) (*benchReads, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench read probe: %w", err)
	}
	handler := api.New(api.Options{Chain: ch, Releases: be.releases, Workflows: be.workflows, Queue: be.queue, Tokens: be.tokens,
		Insecure: true, Logger: log}).Handler()
	r := &benchReads{srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second},
		quit: make(chan struct{}), done: make(chan struct{}), base: "http://" + ln.Addr().String() + api.Prefix}
	go func() { _ = r.srv.Serve(ln) }()
	go func() {
		defer close(r.done)
		c := &http.Client{Timeout: 10 * time.Second}
		tick := time.NewTicker(benchReadEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			// Spread the explained targets over the deployment. The first
			// reads start at once, and a read in flight at stop finishes.
			t := release.ReleaseTarget{DeploymentID: "api", EnvironmentID: envs[i%len(envs)],
				ResourceID: fmt.Sprintf("node-%06d", (i*7919)%resources)}
			r.read(ctx, c, &r.explain, "/targets/"+t.Key()+"/explain")
			r.read(ctx, c, &r.list, "/targets?deployment_id=api&limit=50")
			select {
			case <-ctx.Done():
				return
			case <-r.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return r, nil
}

// read GETs path, recording its time in into (under r.mu) or a failure.
func (r *benchReads) read(ctx context.Context, c *http.Client, into *[]time.Duration, path string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	if err != nil {
		return
	}
	start := time.Now()
	res, err := c.Do(req)
	took := time.Since(start)
	if ctx.Err() != nil {
		return // the bench ends: neither an answer nor a failure
	}
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			why = path + ": " + res.Status
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if why != "" {
		r.failed++
		if r.firstFailure == "" {
			r.firstFailure = why
		}
		return
	}
	*into = append(*into, took)
}

// stop ends the probe and its server and returns its figures: the reads
// made of each kind, their p50 and p99 in milliseconds, and the failures.
func (r *benchReads) stop(ctx context.Context) map[string]any {
	close(r.quit)
	<-r.done
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(sctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]any{"reads_failed": r.failed}
	if r.firstFailure != "" {
		out["reads_first_failure"] = r.firstFailure
	}
	for name, ds := range map[string][]time.Duration{"explain": r.explain, "target_page": r.list} {
		out["reads_"+name] = len(ds)
		if len(ds) == 0 {
			continue
		}
		s := slices.Clone(ds)
		slices.Sort(s)
		at := func(q float64) float64 { return round3(float64(benchstat.Quantile(s, q)) / 1e6) }
		out["reads_"+name+"_p50_ms"], out["reads_"+name+"_p99_ms"] = at(0.50), at(0.99)
	}
	return out
}
