package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/argoworkflows"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// argoWorld is an Argo Server implementing the submit and get endpoints
// of namespace "ci": a submitted Workflow runs until the test ends it;
// it records every submit and when each get came.
type argoWorld struct {
	mu      sync.Mutex
	phase   map[string]string // Workflow name → phase
	labels  map[string]string // Workflow name → its label
	submits []string
	gets    []time.Time
	srv     *httptest.Server
}

const e2eArgoWorkflowsToken = "argo-wf-e2e-token"

func newArgoWorld(t *testing.T) *argoWorld {
	w := &argoWorld{phase: map[string]string{}, labels: map[string]string{}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *argoWorld) serve(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+e2eArgoWorkflowsToken {
		e2eJSON(rw, http.StatusUnauthorized, map[string]any{"code": 16, "message": "token not valid"})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/workflows/ci/")
	wf := func(name string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{argoworkflows.Label: w.labels[name]}},
			"status": map[string]any{"phase": w.phase[name]}}
	}
	switch {
	case ok && r.Method == http.MethodPost && rest == "submit":
		var body struct {
			ResourceName  string `json:"resourceName"`
			SubmitOptions struct{ Name, Labels string }
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) != nil || body.ResourceName != "deploy" {
			e2eJSON(rw, http.StatusBadRequest, map[string]any{"code": 3, "message": "bad submit " + string(b)})
			return
		}
		name := body.SubmitOptions.Name
		if _, exists := w.phase[name]; exists {
			e2eJSON(rw, http.StatusConflict, map[string]any{"code": 6, "message": "already exists"})
			return
		}
		_, w.labels[name], _ = strings.Cut(body.SubmitOptions.Labels, "=")
		w.phase[name] = "Running"
		w.submits = append(w.submits, name)
		e2eJSON(rw, http.StatusOK, wf(name))
	case ok && r.Method == http.MethodGet:
		if _, exists := w.phase[rest]; !exists {
			e2eJSON(rw, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
			return
		}
		w.gets = append(w.gets, time.Now())
		e2eJSON(rw, http.StatusOK, wf(rest))
	default:
		e2eJSON(rw, http.StatusNotFound, map[string]any{"code": 5, "message": "not found"})
	}
}

// getsSince counts the gets after t.
func (w *argoWorld) getsSince(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, g := range w.gets {
		if g.After(t) {
			n++
		}
	}
	return n
}

// TestKilledServeFollowerIsResumedByTheNextOne: a serve process is
// SIGKILLed while the release job it dispatched to Argo Workflows runs
// there (chosen by state: the job is inProgress with its external id and
// the victim's follower has read the Workflow); a serve started after it
// resumes following the Workflow once the job's lease ran out, with no
// second submit, and reports the outcome when the Workflow ends: one job,
// successful, its success recorded once.
func TestKilledServeFollowerIsResumedByTheNextOne(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	ctx := t.Context()
	bin, dsn, be := runnerBackend(t)
	world := newArgoWorld(t)
	s := be.releases
	must := func(_ int64, err error) { t.Helper(); require.NoError(t, err) }
	must(s.Workspaces().Put(ctx, release.Workspace{ID: "ws", Name: "ws"}, 0))
	must(s.Systems().Put(ctx, release.System{ID: "sys", WorkspaceID: "ws", Name: "sys"}, 0))
	must(s.Environments().Put(ctx, release.Environment{ID: "prod", SystemID: "sys", Name: "prod", ResourceSelector: "true"}, 0))
	must(s.JobAgents().Put(ctx, release.JobAgent{ID: "argo", Name: "Argo", Type: argoworkflows.Type, Config: map[string]any{
		"server": world.srv.URL, "namespace": "ci", "workflowTemplate": "deploy", "tokenRef": "env:RECONCILER_SECRET_ARGO_WF_TOKEN"}}, 0))
	must(s.Deployments().Put(ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", JobAgentID: "argo",
		ResourceSelector: `resource.kind == "Node"`}, 0))
	must(s.Resources().Put(ctx, release.Resource{ID: "node-1", WorkspaceID: "ws", Kind: "Node", Identifier: "node-1", Name: "node-1"}, 0))
	ch := &chain.Chain{Store: s, Queue: be.queue, Clock: ports.SystemClock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	_, err := ch.SyncTargets(ctx, "sys")
	require.NoError(t, err)
	target := release.ReleaseTarget{DeploymentID: "api", EnvironmentID: "prod", ResourceID: "node-1"}

	log := &procLog{keep: []string{"action=resumed", "msg=release.job"}}
	serve := func(what string) *exec.Cmd {
		cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "", "--lock", "2s", "--concurrency", "4", "--outbound-allow", "127.0.0.0/8",
			"--secret-destination", "env:RECONCILER_SECRET_ARGO_WF_TOKEN="+world.srv.URL)
		cmd.Env = append(os.Environ(), "RECONCILER_DSN=", "RECONCILER_SECRET_ARGO_WF_TOKEN="+e2eArgoWorkflowsToken)
		startProcessLog(t, cmd, "engine starting", what, log)
		return cmd
	}
	victim := serve("victim")
	require.NoError(t, ch.CreateVersion(ctx, release.DeploymentVersion{ID: "v1", DeploymentID: "api", Tag: "v1"}))

	// The moment: the job runs in Argo, dispatched and followed by the
	// victim, which holds its lease.
	var job ports.JobRow
	waitUntil(t, 60*time.Second, func() bool {
		rows, err := s.JobsByTarget(ctx, target, 0)
		require.NoError(t, err)
		if len(rows) != 1 || rows[0].Status != release.JobInProgress || rows[0].ExternalID == "" {
			return false
		}
		job = rows[0]
		return world.getsSince(time.Time{}) >= 1
	})
	require.True(t, time.Now().Before(job.LeaseUntil.Add(time.Second)), "the victim holds the job's lease: %s", job.LeaseUntil)
	require.NoError(t, victim.Process.Kill())
	_ = victim.Wait()
	killed := time.Now()

	serve("successor")
	waitUntil(t, 60*time.Second, func() bool { return world.getsSince(killed) >= 1 }) // someone follows the Workflow again
	rows, err := s.JobsByTarget(ctx, target, 0)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, release.JobInProgress, rows[0].Status, "not ended as lost: %s", rows[0].Message)

	world.mu.Lock()
	world.phase[world.submits[0]] = "Succeeded"
	world.mu.Unlock()
	waitUntil(t, 60*time.Second, func() bool {
		rows, err = s.JobsByTarget(ctx, target, 0)
		require.NoError(t, err)
		return len(rows) == 1 && rows[0].Status.IsTerminal()
	})
	require.Equal(t, release.JobSuccessful, rows[0].Status, rows[0].Message)
	require.Equal(t, job.ID, rows[0].ID)
	require.Equal(t, job.ExternalID, rows[0].ExternalID)

	world.mu.Lock()
	require.Len(t, world.submits, 1, "one external run")
	world.mu.Unlock()
	resumed := log.matching("action=resumed")
	require.NotEmpty(t, resumed, "the successor resumed the job")
	for _, l := range resumed {
		require.Equal(t, "successor", l.proc, l.text)
		require.Contains(t, l.text, "job="+job.ID)
	}
	// The outcome's log line follows the commit the store showed above:
	// await it rather than race it.
	var successes []procLine
	waitUntil(t, 30*time.Second, func() bool {
		successes = successes[:0]
		for _, l := range log.matching("msg=release.job") {
			if strings.Contains(l.text, "status=successful") {
				successes = append(successes, l)
			}
		}
		return len(successes) > 0
	})
	require.Len(t, successes, 1, "the outcome recorded once: %+v", successes)
	require.Equal(t, "successor", successes[0].proc)
}
