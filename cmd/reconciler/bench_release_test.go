package main

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/pgtest"
)

// benchLine runs the CLI with args (a bench command), requires success and
// decodes its last line.
func benchLine(t *testing.T, args ...string) map[string]any {
	t.Helper()
	res := runCLI(t, "", args...)
	require.NoError(t, res.err, res.stderr)
	return lastJSONLine(t, res.stdout)
}

// lastJSONLine decodes the last line of stdout.
func lastJSONLine(t *testing.T, stdout string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got), "the last line is JSON: %q", stdout)
	return got
}

// TestBenchRelease: every target gets its job, on both stores, and the
// figures are in the final JSON line.
func TestBenchRelease(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"--targets", "200"}
			if name == "postgres" {
				args = append(args, "--dsn", pgtest.DSN(t))
			}
			got := benchLine(t, append([]string{"bench", "release"}, args...)...)
			require.Equal(t, "release", got["bench"])
			require.Equal(t, name, got["store"])
			require.EqualValues(t, 200, got["targets"])
			require.Greater(t, got["seconds"], 0.0)
			require.Greater(t, got["targets_per_sec"], 0.0)
			requireServerFigures(t, name, "target", 200, got)
		})
	}
}

// TestBenchReleasePolicies: with --policies the version goes through dev,
// staging and prod under progression, an approval, a window and a gradual
// rollout, and every target of the three environments gets its job; with
// --read-probe the line carries the reads' figures.
func TestBenchReleasePolicies(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "release", "--targets", "90", "--policies", "--read-probe"}
			if name == "postgres" {
				args = append(args, "--dsn", pgtest.DSN(t))
			}
			got := benchLine(t, args...)
			require.EqualValues(t, 90, got["targets"], "30 resources in each of 3 environments")
			require.Equal(t, true, got["policies"])
			// --read-probe: explain and the target page were read, and
			// answered.
			require.EqualValues(t, 0, got["reads_failed"], "%v", got["reads_first_failure"])
			for _, read := range []string{"explain", "target_page"} {
				require.Positive(t, got["reads_"+read], read)
				require.LessOrEqual(t, got["reads_"+read+"_p50_ms"], got["reads_"+read+"_p99_ms"], read)
			}
		})
	}
	res := runCLI(t, "", "bench", "release", "--policies", "--processes", "1", "--dsn", "postgres://x")
	require.Error(t, res.err)
	require.Equal(t, 2, res.code)
	require.Contains(t, res.err.Error(), "--policies")
}

// TestBenchReleaseProcesses: with --processes 1,2 the chain runs in that
// many worker processes, every target gets its job each time, and each run
// prints its JSON line with the workers' peak RSS; --cpuprofile writes one
// CPU profile per worker process; a DSN with pool settings is taken as
// serve takes it; --read-probe reads explain meanwhile.
func TestBenchReleaseProcesses(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	prof := filepath.Join(t.TempDir(), "cpu.pprof")
	// A pool setting in the DSN sizes each process's pool, as in serve.
	dsn := withParams(pgtest.DSN(t), map[string]string{"pool_max_conns": "3"})
	res := runCLI(t, "", "bench", "release", "--targets", "200", "--processes", "1,2", "--worker-bin", bin, "--dsn", dsn,
		"--cpuprofile", prof, "--read-probe")
	require.NoError(t, res.err, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 2, res.stdout)
	for i, want := range []int{1, 2} {
		got := lastJSONLine(t, lines[i])
		require.EqualValues(t, want, got["processes"])
		require.EqualValues(t, 200, got["targets"])
		rss, ok := got["workers_rss_mb"].([]any)
		require.True(t, ok, "workers_rss_mb: %v", got["workers_rss_mb"])
		require.Len(t, rss, want)
		for _, r := range rss {
			require.Greater(t, r, 0.0, "each worker's peak RSS")
			require.LessOrEqual(t, r, got["worker_max_rss_mb"])
		}
		requireServerFigures(t, "postgres", "target", 200, got)
		for w := range want {
			requireProfile(t, fmt.Sprintf("%s.%dprocs.%d", prof, want, w))
		}
		require.Equal(t, []any{3.0, 3.0}[:want], got["workers_pool_max_conns"], "each worker's pool, from the DSN")
		procs, ok := got["workers_gomaxprocs"].([]any)
		require.True(t, ok, "workers_gomaxprocs: %v", got["workers_gomaxprocs"])
		require.Len(t, procs, want)
		require.NotContains(t, got, "share_machine")
		require.EqualValues(t, 0, got["reads_failed"], "%v", got["reads_first_failure"])
		require.Positive(t, got["reads_explain"], "the read probe explained targets while the workers ran")
	}
}

// TestBenchReleaseShareMachine: with --share-machine each of n worker
// processes runs with GOMAXPROCS of the CPUs / n and a pool of the
// default's / n, as each reports it.
func TestBenchReleaseShareMachine(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	res := runCLI(t, "", "bench", "release", "--targets", "100", "--processes", "2", "--share-machine", "--worker-bin", bin,
		"--dsn", pgtest.DSN(t))
	require.NoError(t, res.err, res.stderr)
	got := lastJSONLine(t, res.stdout)
	require.EqualValues(t, 100, got["targets"])
	require.Equal(t, true, got["share_machine"])
	cpus := runtime.NumCPU()
	procs, conns := float64(max(1, cpus/2)), float64(max(2, max(4, cpus)/2))
	require.Equal(t, []any{procs, procs}, got["workers_gomaxprocs"])
	require.Equal(t, []any{conns, conns}, got["workers_pool_max_conns"])
}

// TestWorkerShare: the share of each of n workers, and a DSN that sizes
// its pool keeps it.
func TestWorkerShare(t *testing.T) {
	const dsn = "postgres://u@h/db?sslmode=disable"
	tests := []struct {
		n, cpus int
		dsn     string
		share   bool
		want    machineShare
	}{
		{2, 2, dsn, false, machineShare{dsn: dsn}},
		{1, 2, dsn, true, machineShare{dsn: "postgres://u@h/db?pool_max_conns=4&sslmode=disable", env: []string{"GOMAXPROCS=2"}}},
		{2, 2, dsn, true, machineShare{dsn: "postgres://u@h/db?pool_max_conns=2&sslmode=disable", env: []string{"GOMAXPROCS=1"}}},
		{3, 2, dsn, true, machineShare{dsn: "postgres://u@h/db?pool_max_conns=2&sslmode=disable", env: []string{"GOMAXPROCS=1"}}},
		{2, 16, dsn, true, machineShare{dsn: "postgres://u@h/db?pool_max_conns=8&sslmode=disable", env: []string{"GOMAXPROCS=8"}}},
		{2, 2, dsn + "&pool_max_conns=5", true, machineShare{dsn: dsn + "&pool_max_conns=5", env: []string{"GOMAXPROCS=1"}}},
		{2, 2, "host=h dbname=db", true, machineShare{dsn: "host=h dbname=db pool_max_conns=2", env: []string{"GOMAXPROCS=1"}}},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, workerShare(tt.n, tt.cpus, tt.dsn, tt.share), "%d workers, %d CPUs, %s, share %v", tt.n, tt.cpus, tt.dsn, tt.share)
	}
}

// requireProfile requires path to hold a profile as runtime/pprof writes
// them: a gzipped protocol buffer, not empty.
func requireProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err, "%s is gzipped", path)
	body, err := io.ReadAll(zr)
	require.NoError(t, err, path)
	require.NotEmpty(t, body, path)
}

// TestBenchReleaseBadFlags: non-positive sizes are usage errors.
func TestBenchReleaseBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--targets", "0"}, {"--workers", "-1"}, {"--timeout", "0s"},
		{"--processes", "0"}, {"--processes", "1,x"}, {"--processes", "2"} /* needs --dsn */, {"--share-machine"} /* needs --processes */} {
		res := runCLI(t, "", append([]string{"bench", "release"}, args...)...)
		require.Equal(t, 2, res.code, "%v: %s", args, res.stderr)
	}
}

// TestBenchWorkflow: the workflow runs to Succeeded on both stores and the
// figures are in the final JSON line.
func TestBenchWorkflow(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "workflow", "--items", "300", "--max-parallel", "40"}
			if name == "postgres" {
				args = append(args, "--dsn", pgtest.DSN(t))
			}
			got := benchLine(t, args...)
			require.Equal(t, "workflow", got["bench"])
			require.EqualValues(t, 300, got["items"])
			require.Greater(t, got["taskruns_per_sec"], 0.0)
			require.Equal(t, "Succeeded", got["phase"])
			requireServerFigures(t, name, "taskrun", 300, got)
		})
	}
}

// TestBenchWorkflowPollAfter: bench workflow reads the phase every 100 ms
// for the first 10 s, then every hundredth of the time run so far.
func TestBenchWorkflowPollAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ elapsed, want time.Duration }{
		{0, 100 * time.Millisecond},
		{5 * time.Second, 100 * time.Millisecond},
		{10 * time.Second, 100 * time.Millisecond},
		{20 * time.Second, 200 * time.Millisecond},
		{100 * time.Second, time.Second},
	} {
		require.Equal(t, c.want, benchWorkflowPollAfter(c.elapsed), "after %s", c.elapsed)
	}
}

// TestBenchWorkflowTimeout: a workflow that does not finish in time still
// gets its line, saying so, and the command fails.
func TestBenchWorkflowTimeout(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "bench", "workflow", "--items", "20000", "--max-parallel", "1", "--timeout", "1s")
	require.Error(t, res.err)
	require.Equal(t, 1, res.code, res.stderr)
	require.ErrorContains(t, res.err, "not finished after 1s")
	got := lastJSONLine(t, res.stdout)
	require.Equal(t, "workflow", got["bench"])
	require.NotEqual(t, "Succeeded", got["phase"])
	require.NotContains(t, got, "taskruns_per_sec")
	require.Greater(t, got["max_rss_mb"], 0.0)
}

// requireServerFigures checks the figures every bench line holds: the peak
// RSS, and on Postgres the server's counts for units units of work (at
// least one commit; the server is shared with parallel tests, so no upper
// bound) and its durability settings.
func requireServerFigures(t *testing.T, store, unit string, units int, got map[string]any) {
	t.Helper()
	require.Greater(t, got["max_rss_mb"], 0.0)
	if store == "memory" {
		require.NotContains(t, got, "commits")
		return
	}
	require.Equal(t, unit, got["unit"])
	commits := got["commits"].(float64)
	require.Greater(t, commits, 0.0)
	require.InDelta(t, commits/float64(units), got["commits_per_unit"], 0.001)
	require.Greater(t, got["rows_written"], 0.0)
	require.Greater(t, got["xids"], 0.0)
	for _, k := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		require.NotEmpty(t, got[k], k)
	}
}

// TestBenchSteady: at a tiny size, versions of two deployments stream
// through dev → staging → prod in one worker process; the run's line has
// the latencies of both hand-offs, no dead letters and an emptied backlog,
// after lines of the queue's depth.
func TestBenchSteady(t *testing.T) {
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	res := runCLI(t, "", "bench", "steady", "--targets", "12", "--deployments", "2", "--processes", "1", "--every", "300ms",
		"--duration", "2s", "--settle", "1m", "--worker-bin", bin, "--dsn", pgtest.DSN(t))
	require.NoError(t, res.err, res.stderr)
	require.Contains(t, res.stdout, `"bench":"steady-depth"`)
	got := lastJSONLine(t, res.stdout)
	require.Equal(t, "steady", got["bench"])
	require.EqualValues(t, 12, got["targets"])
	require.Greater(t, got["versions"], 0.0)
	require.Greater(t, got["version_to_dispatch_n"], 0.0)
	require.Greater(t, got["progression_n"], 0.0, "some job hands off to the next environment")
	require.LessOrEqual(t, got["version_to_dispatch_p50_s"], got["version_to_dispatch_p99_s"])
	require.LessOrEqual(t, got["progression_p50_s"], got["progression_p99_s"])
	require.Equal(t, true, got["backlog_emptied"])
	require.EqualValues(t, 0, got["dead"])
	require.Contains(t, res.stdout, `"oldest_due_wait_s"`)
	require.Contains(t, got, "queue_max_oldest_due_wait_s")
	// The timed span's figures, per job.
	require.Equal(t, "job", got["unit"])
	require.Equal(t, got["jobs"], got["versions"].(float64)*12/2, "each version deploys to its deployment's 6 targets")
	require.Positive(t, got["commits_per_unit"])
	require.Positive(t, got["cpu_us_per_unit"])
}

// TestBenchSteadyVersionsDue: versions are due at start + k × --every, so
// a slow creation does not push the later ones back.
func TestBenchSteadyVersionsDue(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	require.Equal(t, start, versionDue(start, 0, 3*time.Second))
	require.Equal(t, start.Add(30*time.Second), versionDue(start, 10, 3*time.Second))
	require.Equal(t, start.Add(39*time.Second), versionDue(start, 13, 3*time.Second), "due 39 s after the start however long version 12 took")
}

// TestBenchSteadyBadFlags: too few targets for the deployments, and no
// database, are usage errors.
func TestBenchSteadyBadFlags(t *testing.T) {
	t.Parallel()
	res := runCLI(t, "", "bench", "steady", "--targets", "5", "--deployments", "2", "--dsn", "postgres://x")
	requireExit(t, res.err, 2, "--targets")
	res = runCLI(t, "", "bench", "steady")
	requireExit(t, res.err, 2, "--dsn")
}
