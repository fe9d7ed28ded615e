package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestDemoRunsFinish drives the demo workspace through the real engine on
// the in-memory adapters with the simulated world, and requires every run
// to reach the end of its story: both repo tasks merged, the standalone run completed, the agent's turn done
// with its inbox empty, the review submitted.
func TestDemoRunsFinish(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := ports.SystemClock
	store, q := memory.NewRunStore(clock), memory.NewQueue(clock)
	sim := newDemoWorld(store, q, clock, 5*time.Millisecond)
	defer sim.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := engine.New(q, engine.Options{Logger: log, PollInterval: 10 * time.Millisecond})
	for _, k := range reconcile.Kinds {
		eng.Register(string(k), &runs.Processor{Kind: k, Store: store, Queue: q, Agents: sim, Code: sim,
			Config: reconcile.DefaultConfig(), Clock: clock, Logger: log}, engine.KindOptions{Concurrency: 2})
	}
	require.NoError(t, seedDemo(ctx, store, q))
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()

	want := map[reconcile.RunRef]reconcile.State{
		{Kind: reconcile.KindRepo, ID: "demo-fix-login"}:             reconcile.RepoCompleted,
		{Kind: reconcile.KindRepo, ID: "demo-update-docs"}:           reconcile.RepoCompleted,
		{Kind: reconcile.KindStandalone, ID: "demo-nightly-report"}:  reconcile.StandaloneCompleted,
		{Kind: reconcile.KindPRReview, ID: "demo-review-42"}:         reconcile.ReviewSubmitted,
		{Kind: reconcile.KindPersistentAgent, ID: "demo-triage-bot"}: reconcile.AgentIdle,
	}
	require.Len(t, want, len(demoRuns()), "every demo run has an expected end")
	deadline := time.Now().Add(20 * time.Second)
	for ref, state := range want {
		for {
			row, err := store.RunGet(ctx, ref)
			require.NoError(t, err)
			finished := row.State == state
			if ref.Kind == reconcile.KindPersistentAgent {
				var a reconcile.AgentRun
				require.NoError(t, json.Unmarshal(row.Body, &a))
				finished = finished && a.PendingMessages == 0 && a.TurnDone
			}
			if finished {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s stuck in %s, want %s", ref, row.State, state)
			time.Sleep(5 * time.Millisecond) // polling the store is the only signal the engine offers
		}
	}
	first, err := store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "demo-fix-login"})
	require.NoError(t, err)
	second, err := store.RunGet(ctx, reconcile.RunRef{Kind: reconcile.KindRepo, ID: "demo-update-docs"})
	require.NoError(t, err)
	require.NotNil(t, first.PR)
	require.Equal(t, reconcile.PRMerged, first.PR.State)
	require.NotNil(t, second.PR)
	require.NotEqual(t, first.PR.URL, second.PR.URL, "each task opened its own pull request")
	cancel()
	require.NoError(t, <-done)
}

// TestDemoReleaseRollsOut loads testdata/demo as serve does and runs it
// through the chain and the test runner (sped up): v1 reaches prod, v2
// reaches staging but stops before prod, which it is not approved for.
func TestDemoReleaseRollsOut(t *testing.T) {
	t.Parallel()
	fsys, where, err := demoFS("")
	require.NoError(t, err)
	w, err := loadReleaseDemo(fsys, where)
	require.NoError(t, err)
	require.Len(t, w.Environments, 3)
	for i := range w.JobAgents {
		w.JobAgents[i].Config = map[string]any{"delay": "5ms"}
	}
	for i := range w.Versions {
		if w.Versions[i].After > 0 {
			w.Versions[i].After = demoDelay(300 * time.Millisecond)
		}
		if w.Versions[i].Config != nil {
			w.Versions[i].Config["pace"] = "5ms" // the workflow's jobs
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := ports.SystemClock
	store, q, wfs := memory.NewReleaseStore(clock), memory.NewQueue(clock), memory.NewWorkflowStore()
	var logs lockedBuffer
	log, err := newLogger(&logs, "info", "text")
	require.NoError(t, err)
	rt := newReleaseRuntime(store, wfs, memory.NewCatalog(clock), q, clock, log, nil, nil)
	defer rt.close()
	eng := engine.New(q, engine.Options{Logger: log, PollInterval: 10 * time.Millisecond})
	rt.register(eng, 4)
	require.NoError(t, seedReleaseDemo(ctx, rt.chain, rt.flows.Catalog, memory.NewTransactor(store, q), w))
	go func() { _ = eng.Run(ctx) }()

	latestOf := func(dep, env, res string) (ports.JobRow, bool) {
		rows, err := store.JobsByTarget(ctx, release.ReleaseTarget{DeploymentID: dep, EnvironmentID: env, ResourceID: res}, 1)
		require.NoError(t, err)
		if len(rows) == 0 {
			return ports.JobRow{}, false
		}
		return rows[0], true
	}
	latest := func(env, res string) (string, release.JobStatus) {
		rows, err := store.JobsByTarget(ctx, release.ReleaseTarget{DeploymentID: "web", EnvironmentID: env, ResourceID: res}, 1)
		require.NoError(t, err)
		if len(rows) == 0 {
			return "", ""
		}
		return rows[0].VersionID, rows[0].Status
	}
	require.Eventually(t, func() bool {
		for _, res := range []string{"eu-1", "us-1", "ap-1"} {
			if v, st := latest("staging", res); v != "web-v2" || st != release.JobSuccessful {
				return false
			}
			if v, st := latest("prod", res); v != "web-v1" || st != release.JobSuccessful {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "v1 in prod and v2 in staging")
	d, err := store.DesiredGet(ctx, release.ReleaseTarget{DeploymentID: "web", EnvironmentID: "prod", ResourceID: "eu-1"})
	require.NoError(t, err)
	rel, err := store.ReleaseGet(ctx, d.ReleaseID)
	require.NoError(t, err)
	require.Equal(t, "web-v1", rel.VersionID, "prod keeps v1: v2 is not approved there")
	// The README's promise: the info-level log says why v2 stops before
	// prod, on a readable line with the short release id.
	waits := regexp.MustCompile(`level=INFO msg=release.decision kind=desired-release id=web:prod:eu-1 action=release reason=\S+ duration=\S+ version=v1 release=[0-9a-f]{16} examined=2 waiting="v2: approval pending`)
	require.Eventually(t, func() bool { return waits.MatchString(logs.String()) }, 5*time.Second, 10*time.Millisecond,
		"no info line says why v2 waits before prod:\n%s", logs.String())

	// worker runs each release as the rollout workflow, in every
	// environment, prod included (worker-v1 is approved there).
	require.Eventually(t, func() bool {
		for _, env := range []string{"dev", "staging", "prod"} {
			for _, res := range []string{"eu-1", "us-1", "ap-1"} {
				if j, ok := latestOf("worker", env, res); !ok || j.Status != release.JobSuccessful {
					return false
				}
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "worker-v1 everywhere")
	j, _ := latestOf("worker", "prod", "eu-1")
	st, err := rt.flows.Status(ctx, j.ExternalID)
	require.NoError(t, err)
	require.Equal(t, "rollout", st.Workflow.TemplateName)
	require.Equal(t, 1, st.Workflow.TemplateRevision)
	msgs := map[string]string{}
	for _, r := range st.TaskRuns {
		msgs[r.Task] = r.Message
	}
	require.Equal(t, map[string]string{
		"deploy": "deployed worker:1.0 ×3 to eu-1 (prod)",
		"smoke":  "smoke test of https://eu-1.prod.example.com passed",
	}, msgs, "parameters from the version and the variables, outputs feeding the next task")
}

// TestDemoReleaseBadFile: a demo file with a mistake is refused with its
// file, field and line, and serve exits 2.
func TestDemoReleaseBadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "workspace: {id: demo, name: Demo}\nsystems:\n  - {id: shop, workspace_id: demo, name: Shop}\nversions:\n  - {id: v1, deployment_id: web, tag: v1, after: soon}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, demoReleaseFile), []byte(src), 0o600))
	_, err := loadReleaseDemo(os.DirFS(dir), dir)
	require.ErrorContains(t, err, dir+"/release.yaml:5: versions[0].after")
	require.NoError(t, os.WriteFile(filepath.Join(dir, demoReleaseFile), []byte("workspace: {id: demo, nmae: Demo}\n"), 0o600))
	_, err = loadReleaseDemo(os.DirFS(dir), dir)
	require.ErrorContains(t, err, "release.yaml:1: workspace.nmae")

	res := runCLI(t, "", "serve", "--demo-dir", dir, "--listen", "")
	require.Equal(t, 2, res.code, res.stderr)
	res = runCLI(t, "", "serve", "--demo-dir", t.TempDir(), "--listen", "")
	require.Equal(t, 2, res.code, "a directory without release.yaml: %s", res.stderr)
}

// TestDemoReleaseBadExpression: an invalid CEL expression or RRULE in a
// --demo-dir file is refused before anything starts, naming the file, the
// line and column, the field and the expression's own position; exit 2.
func TestDemoReleaseBadExpression(t *testing.T) {
	t.Parallel()
	base := "workspace: {id: demo, name: Demo}\nsystems:\n  - {id: shop, workspace_id: demo, name: Shop}\n"
	for _, tt := range []struct {
		name, src, want string
	}{
		{"cel", base + "environments:\n  - {id: dev, system_id: shop, name: dev, resource_selector: 'resource.kind =='}\n",
			"release.yaml:5:62: environments[0].resource_selector"},
		{"rrule", base + "policies:\n  - id: p\n    workspace_id: demo\n    name: p\n    priority: 1\n    enabled: true\n    rules:\n      - {id: w, type: deploymentWindow, rrule: 'FREQ=SOMETIMES', duration_minutes: 60}\n",
			"release.yaml:11:48: policies[0].rules[0].rrule"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, demoReleaseFile), []byte(tt.src), 0o600))
			res := runCLI(t, "", "serve", "--demo-dir", dir, "--listen", "")
			require.Equal(t, 2, res.code, "%v", res.err)
			require.ErrorContains(t, res.err, dir+"/"+tt.want)
		})
	}
}

// String returns what was written so far.
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
