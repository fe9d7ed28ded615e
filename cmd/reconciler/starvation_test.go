package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/benchstat"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// starvationTargets is the size of TestStarvation's rollout:
// RECONCILER_STARVATION (make starvation), 0 (skip) when unset.
func starvationTargets(t *testing.T) int { return envCount(t, "RECONCILER_STARVATION", "targets", 0) }

// starvationHogs is how many CPU hogs TestStarvation runs:
// RECONCILER_STARVATION_HOGS, one per core when unset (0: a quiet run, to
// compare the rollout's time with).
func starvationHogs(t *testing.T) int {
	return envCount(t, "RECONCILER_STARVATION_HOGS", "hogs", runtime.NumCPU())
}

// envCount is the number in the environment variable name (a count of
// what), def when it is unset.
func envCount(t *testing.T, name, what string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s: want a number of %s", name, what)
	return n
}

// TestStarvation (issue 30; make starvation) saturates every core with
// CPU hogs while three serve processes on one PostgreSQL roll a version
// out to RECONCILER_STARVATION targets, and SIGKILLs one of them at a
// moment it holds work item leases. It asserts that no lease was taken
// from a live process (reconciler_leases_taken_total{from="live"} of
// every process, the killed one read just before the kill), that no job
// of a live process was ended as lost, that every GET .../explain answers
// 200, or 503 with Retry-After, within 2 s (a deadline on the client),
// and that the rollout converges. It logs the rollout's time.
func TestStarvation(t *testing.T) {
	n := starvationTargets(t)
	if n == 0 {
		t.Skip("RECONCILER_STARVATION not set (make starvation)")
	}
	ctx := t.Context()
	bin, dsn, be, ch := rolloutBackend(t, n, 120)
	s := be.releases

	nHogs := starvationHogs(t)
	stopHogs := startHogs(ctx, nHogs)
	defer stopHogs()

	log := &procLog{keep: []string{"listening"}}
	procs := map[string]*serveProc{}
	for _, name := range []string{"victim", "serve1", "serve2"} {
		cmd := startServeLog(t, bin, dsn, name, log, "--listen", "127.0.0.1:0", "--insecure-no-auth", "--lock", "5s")
		procs[name] = &serveProc{pid: cmd.Process.Pid, kill: cmd.Process.Kill, wait: cmd.Wait}
	}
	for name, p := range procs {
		p.addr = listenAddr(t, log, name)
	}

	targets, err := s.TargetList(ctx, ports.TargetListParams{})
	require.NoError(t, err)
	require.Len(t, targets, n)
	probe := &explainProbe{url: "http://" + procs["serve1"].addr + "/api/v1/targets/" + targets[0].Key() + "/explain"}
	probeCtx, stopProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { defer close(probed); probe.run(probeCtx) }()
	defer func() { stopProbe(); <-probed }()

	start := time.Now()
	require.NoError(t, ch.CreateVersion(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "v1"}))

	// Kill the victim once it holds work item leases.
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	held := func() int {
		var k int
		row := conn.QueryRow(ctx, `SELECT count(*) FROM reconcile_work_scope WHERE lease_expires_at IS NOT NULL AND lease_owner LIKE $1`,
			fmt.Sprintf("%%-%d-%%", procs["victim"].pid))
		require.NoError(t, row.Scan(&k))
		return k
	}
	var leases int
	waitUntil(t, 120*time.Second, func() bool { leases = held(); return leases > 0 })
	fromLive := takenFromLive(t, procs["victim"].addr)
	require.NoError(t, procs["victim"].kill())
	_ = procs["victim"].wait()
	t.Logf("killed the victim holding %d leases", leases)

	done := func(tg release.ReleaseTarget) bool {
		st, err := s.TargetJobState(ctx, tg)
		require.NoError(t, err)
		return st.Successful != nil && st.Successful.Version.ID == "v1"
	}
	waitUntil(t, 600*time.Second, func() bool {
		for _, tg := range targets {
			if !done(tg) {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	for _, name := range []string{"serve1", "serve2"} {
		fromLive += takenFromLive(t, procs[name].addr)
	}
	stopProbe()
	<-probed

	victimOwner := fmt.Sprintf("-%d-", procs["victim"].pid)
	liveLost := 0
	for _, tg := range targets {
		rows, err := s.JobsByTarget(ctx, tg, 0)
		require.NoError(t, err)
		for _, r := range rows {
			if r.Status == release.JobFailure && strings.HasPrefix(r.Message, "lost") && !strings.Contains(r.LeaseOwner, victimOwner) {
				liveLost++
				t.Logf("job %s of live owner %s lost: %s", r.ID, r.LeaseOwner, r.Message)
			}
		}
	}
	t.Logf("starvation: %d targets converged in %s under %d CPU hogs; leases taken from live processes %d; live jobs lost %d; explain %d answers, %d failed, slowest %s",
		n, took.Round(time.Millisecond), nHogs, fromLive, liveLost, probe.answers.Load(), probe.failed.Load(), time.Duration(probe.slowest.Load()))
	require.Zero(t, fromLive, "leases taken from live processes")
	require.Zero(t, liveLost, "jobs of live processes ended as lost")
	require.Positive(t, probe.answers.Load(), "explain was probed")
	require.Zero(t, probe.failed.Load(), "explain answers 200, or 503 with Retry-After, within 2 s: %s", probe.firstFailure())
}

// serveProc is one serve process of TestStarvation.
type serveProc struct {
	pid  int
	addr string
	kill func() error
	wait func() error
}

// takenFromLive is the sum of reconciler_leases_taken_total{from="live"}
// a serve process at addr exports.
func takenFromLive(t *testing.T, addr string) int {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "reconciler_leases_taken_total{") && strings.Contains(line, `from="live"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			require.NoError(t, err, line)
			sum += v
		}
	}
	require.NoError(t, sc.Err())
	return int(sum)
}

// explainProbe asks url every quarter second, each with a 2 s deadline,
// and counts the answers that are neither 200 nor 503 with Retry-After
// (a timeout counts as one).
type explainProbe struct {
	url string
	// keepTimes keeps every answer's latency for percentiles.
	keepTimes       bool
	answers, failed atomic.Int64
	slowest         atomic.Int64
	mu              sync.Mutex
	first           string
	times           []time.Duration
}

func (p *explainProbe) run(ctx context.Context) {
	c := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Now()
		res, err := c.Get(p.url)
		took := time.Since(sent)
		if ctx.Err() != nil {
			return
		}
		if int64(took) > p.slowest.Load() {
			p.slowest.Store(int64(took))
		}
		p.answers.Add(1)
		if p.keepTimes {
			p.mu.Lock()
			p.times = append(p.times, took)
			p.mu.Unlock()
		}
		why := ""
		switch {
		case err != nil:
			why = err.Error()
		case res.StatusCode == http.StatusOK:
		case res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") != "":
		default:
			why = res.Status
		}
		if res != nil {
			_ = res.Body.Close()
		}
		if why != "" {
			p.failed.Add(1)
			p.mu.Lock()
			if p.first == "" {
				p.first = why
			}
			p.mu.Unlock()
		}
	}
}

func (p *explainProbe) firstFailure() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// percentiles are the 50th and 99th percentiles of the kept latencies
// (zero without keepTimes or answers).
func (p *explainProbe) percentiles() (p50, p99 time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ts := slices.Clone(p.times)
	slices.Sort(ts)
	return benchstat.Quantile(ts, 0.50), benchstat.Quantile(ts, 0.99)
}
