package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// pullE2E is a pull-agent test's world: two `serve --dsn` processes on one
// database, a client on each with a token of scopes read, write, approve
// and agent, and the demo workspace with web on pull agent "puller".
type pullE2E struct {
	c1, c2 *client.Client
	// bin, url1 and token run the CLI against the first process.
	bin, url1, token string
}

func startPullE2E(t *testing.T, agentConfig map[string]any) *pullE2E {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ := pgtest.Schema(t)
	token := createToken(t, bin, dsn, "puller", "read,write,approve,agent", "--agent", "puller")
	w := &pullE2E{bin: bin, url1: "http://" + startServeAPI(t, bin, dsn), token: token}
	w.c1, err = client.New(w.url1, token)
	require.NoError(t, err)
	w.c2, err = client.New("http://"+startServeAPI(t, bin, dsn), token)
	require.NoError(t, err)
	putDemoWorkspace(t, w.c1, release.JobAgent{ID: "puller", Name: "puller", Type: release.PullAgentType, Config: agentConfig})
	_, err = w.c1.CreateVersion(t.Context(), api.VersionCreate{DeploymentID: "web", Tag: "v1"})
	require.NoError(t, err)
	_, err = w.c1.Approve(t.Context(), "web-v1", "prod")
	require.NoError(t, err)
	return w
}

// runningV1 counts web's targets that run v1 (of 9).
func (w *pullE2E) runningV1(t *testing.T) int {
	t.Helper()
	page, err := w.c1.ListTargets(t.Context(), client.TargetFilter{DeploymentID: "web"}, client.Page{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Items, 9, "3 environments × 3 clusters")
	n := 0
	for _, st := range page.Items {
		if st.Current != nil && st.Current.Version.ID == "web-v1" {
			n++
		}
	}
	return n
}

// finish heartbeats and reports a taken job in progress, then successful.
func finish(ctx context.Context, c *client.Client, taken pull.Taken) error {
	tk := taken.Job
	hb, err := c.HeartbeatJob(ctx, "puller", tk.ID, tk.Take.HandOut, taken.TakeToken)
	if err != nil {
		return err
	}
	if hb.LeaseUntil.Before(tk.LeaseUntil) {
		return context.DeadlineExceeded // never: a heartbeat only extends
	}
	if err := c.ReportTakenJob(ctx, "puller", tk.ID, api.TakerReport{HandOut: tk.Take.HandOut, TakeToken: taken.TakeToken,
		JobReport: api.JobReport{Status: release.JobInProgress, ExternalID: "run-" + tk.ID}}); err != nil {
		return err
	}
	return c.ReportTakenJob(ctx, "puller", tk.ID, api.TakerReport{HandOut: tk.Take.HandOut, TakeToken: taken.TakeToken,
		JobReport: api.JobReport{Status: release.JobSuccessful, Message: "deployed by " + tk.Take.Taker}})
}

// TestPullAgentEndToEnd: two pullers outside, each long-polling its own
// `serve --dsn` process (both on one database), take, heartbeat and report
// the jobs of a rollout of the demo's web deployment (dev → staging →
// prod, 9 targets) until v1 runs everywhere; every job is taken exactly
// once, under its first hand-out.
func TestPullAgentEndToEnd(t *testing.T) {
	t.Parallel()
	w := startPullE2E(t, map[string]any{"lease": "30s"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var mu sync.Mutex
	takes := map[string][]int{}
	finished := make(chan error, 16)
	var wg sync.WaitGroup
	for i, c := range []*client.Client{w.c1, w.c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tk, ok, err := c.NextJob(ctx, "puller", []string{"puller-a", "puller-b"}[i], 5*time.Second)
				if ctx.Err() != nil {
					return
				}
				if err == nil && ok {
					mu.Lock()
					takes[tk.Job.ID] = append(takes[tk.Job.ID], tk.HandOut())
					mu.Unlock()
					err = finish(ctx, c, tk)
				}
				if err != nil || ok {
					finished <- err
				}
			}
		}()
	}
	deadline := time.After(2 * time.Minute)
	for w.runningV1(t) < 9 {
		select {
		case err := <-finished:
			require.NoError(t, err)
		case <-deadline:
			t.Fatalf("web-v1 runs on %d of 9 targets after 2 minutes", w.runningV1(t))
		}
	}
	cancel()
	wg.Wait()
	require.Len(t, takes, 9, "one job per target")
	for id, hs := range takes {
		require.Equal(t, []int{1}, hs, "job %s is taken once, under hand-out 1", id)
	}
	st, err := w.c2.GetTarget(t.Context(), "web:prod:eu-1")
	require.NoError(t, err)
	require.Contains(t, st.Current.Job.Message, "deployed by puller-")
}

// TestPullAgentHandsOutAgainEndToEnd: a taker on one `serve --dsn`
// process takes dev's three jobs and stops heartbeating; at the end of
// their 3 s lease a second taker, on the other process, gets each of them
// (hand-out 2) and finishes it; the first taker's late heartbeat and
// report are refused (409, fenced), and v1 runs on dev.
func TestPullAgentHandsOutAgainEndToEnd(t *testing.T) {
	t.Parallel()
	w := startPullE2E(t, map[string]any{"lease": "3s", "max_hand_outs": 2})
	ctx := t.Context()
	var first []ports.JobRow
	for len(first) < 3 {
		tk, ok, err := w.c1.NextJob(ctx, "puller", "stops", 30*time.Second)
		require.NoError(t, err)
		require.True(t, ok, "dev's jobs come")
		require.Equal(t, 1, tk.HandOut())
		first = append(first, tk.Job)
	}
	for range first {
		tk, ok, err := w.c2.NextJob(ctx, "puller", "rescuer", 30*time.Second)
		require.NoError(t, err)
		require.True(t, ok, "a job whose taker stopped heartbeating is handed out again")
		require.Equal(t, 2, tk.HandOut())
		require.Contains(t, tk.Job.Message, `the lease of "stops" (hand-out 1) ran out`)
		require.NoError(t, finish(ctx, w.c2, tk))
	}
	for _, j := range first {
		_, err := w.c1.HeartbeatJob(ctx, "puller", j.ID, 1, "stale")
		require.ErrorIs(t, err, ports.ErrConflict, "a late heartbeat is fenced")
		err = w.c1.ReportTakenJob(ctx, "puller", j.ID, api.TakerReport{HandOut: 1, TakeToken: "stale", JobReport: api.JobReport{Status: release.JobFailure}})
		require.ErrorIs(t, err, ports.ErrConflict, "a late report is fenced")
		require.Contains(t, err.Error(), "hand-out 1 is fenced")
		got, err := w.c1.GetJob(ctx, j.ID)
		require.NoError(t, err)
		require.Equal(t, release.JobSuccessful, got.Status)
		require.Equal(t, "deployed by rescuer", got.Message)
	}

	// By hand, with the CLI: a fenced heartbeat exits 3 saying why; next
	// waits for staging's first job (dev succeeded) and prints it.
	takeTok := "stale" // a fenced hand-out's token, whatever it was
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(w.bin, append(args, "--server", w.url1, "--token", w.token)...)
		cmd.Env = append(os.Environ(), takeTokenEnv+"="+takeTok)
		out, _ := cmd.CombinedOutput() // the exit code says how it went
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli("jobs", "heartbeat", first[0].ID, "--agent", "puller", "--hand-out", "1")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "hand-out 1 is fenced")
	out, code = cli("jobs", "next", "--agent", "puller", "--taker", "by-hand", "--wait", "30s")
	require.Equal(t, 0, code, out)
	var tk struct {
		Job         ports.JobRow
		Environment release.Environment
		TakeToken   string `json:"take_token"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tk), out)
	require.Equal(t, "staging", tk.Environment.Name)
	require.Equal(t, "by-hand", tk.Job.Take.Taker)
	takeTok = tk.TakeToken
	out, code = cli("jobs", "report", tk.Job.ID, "--agent", "puller", "--hand-out", "1", "--status", "successful")
	require.Equal(t, 0, code, out)
}

// TestPullWorkflowJobEndToEnd: a workflow template whose task runs on pull
// agent "puller", run on a `serve --dsn` process; the CLI takes the
// task's job (jobs next), heartbeats and reports it success; the job is
// listed by GET /jobs meanwhile and the workflow completes.
func TestPullWorkflowJobEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("process test")
	}
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ := pgtest.Schema(t)
	token := createToken(t, bin, dsn, "puller", "read,write,agent", "--agent", "puller")
	url := "http://" + startServeAPI(t, bin, dsn)
	c, err := client.New(url, token)
	require.NoError(t, err)
	approver, err := client.New(url, createToken(t, bin, dsn, "approver", "approve"))
	require.NoError(t, err)
	ctx := t.Context()
	_, err = client.PutObject(ctx, c, client.JobAgents, "puller", release.JobAgent{ID: "puller", Name: "puller", Type: release.PullAgentType,
		Config: map[string]any{"lease": "30s"}}, 0)
	require.NoError(t, err)
	tpl := `{"apiVersion": "reconciler.dev/v1", "kind": "WorkflowTemplate", "metadata": {"name": "pulled"},
 "spec": {"tasks": [{"name": "deploy", "type": "job", "jobAgentRef": "puller", "config": {"image": "web:2"}},
   {"name": "after", "type": "wait", "dependencies": ["deploy"], "wait": {"duration": "1ms"}}]}}`
	obj := revision.Object{Kind: revision.KindWorkflowTemplate, Name: "pulled"}
	rev, err := c.CreateRevision(ctx, obj, api.RevisionCreate{Content: json.RawMessage(tpl)})
	require.NoError(t, err)
	ref := ports.RevisionRef{Kind: obj.Kind, Name: obj.Name, ID: rev.ID}
	rev, err = c.ChangeRevision(ctx, ref, "propose", rev.Version)
	require.NoError(t, err)
	_, err = approver.ChangeRevision(ctx, ref, "approve", rev.Version)
	require.NoError(t, err)
	_, err = c.RunWorkflow(ctx, api.WorkflowRun{Template: "pulled", ID: "wfe"})
	require.NoError(t, err)

	takeTok := ""
	cli := func(args ...string) (string, int) {
		cmd := exec.Command(bin, append(args, "--server", url, "--token", token)...)
		cmd.Env = append(os.Environ(), takeTokenEnv+"="+takeTok)
		out, _ := cmd.CombinedOutput() // the exit code says how it went
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := cli("jobs", "next", "--agent", "puller", "--taker", "by-hand", "--wait", "30s")
	require.Equal(t, 0, code, out)
	var tk pull.Taken
	require.NoError(t, json.Unmarshal([]byte(out), &tk), out)
	require.Equal(t, pull.KindWorkflow, tk.Kind)
	require.Equal(t, "wfe", tk.Job.Workflow.ID)
	require.Equal(t, "deploy", tk.Job.Workflow.Task)
	require.Equal(t, "web:2", tk.Job.JobAgentConfig["image"])
	page, err := c.ListJobs(ctx, api.JobFilter{JobAgentID: "puller"}, client.Page{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "the taken job is listed")
	require.Equal(t, release.JobInProgress, page.Items[0].Status)
	out, code = cli("get", "jobs", "--job-agent", "puller")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "wfe/deploy")

	takeTok = tk.TakeToken
	out, code = cli("jobs", "heartbeat", tk.Job.ID, "--agent", "puller", "--hand-out", "1")
	require.Equal(t, 0, code, out)
	out, code = cli("jobs", "report", tk.Job.ID, "--agent", "puller", "--hand-out", "1", "--status", "successful", "--message", "deployed")
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		st, err := c.GetWorkflow(ctx, "wfe")
		return err == nil && st.Workflow.Phase == workflow.WorkflowSucceeded
	}, time.Minute, 50*time.Millisecond, "the taker's report completes the workflow")
	got, err := c.GetJob(ctx, tk.Job.ID)
	require.NoError(t, err)
	require.Equal(t, release.JobSuccessful, got.Status)
	require.Equal(t, "deployed", got.Message)
}
