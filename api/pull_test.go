package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// takePath, beatPath and reportPath are the pull routes of agent.
func takePath(agent, wait string) string {
	return "/api/v1/job-agents/" + agent + "/jobs/next?wait=" + wait
}

func beatPath(agent, job string) string {
	return "/api/v1/job-agents/" + agent + "/jobs/" + url.PathEscape(job) + "/heartbeat"
}

func reportPath(agent, job string) string {
	return "/api/v1/job-agents/" + agent + "/jobs/" + url.PathEscape(job) + "/report"
}

// taken is the part of a take's answer the tests read.
type taken struct {
	Job struct {
		ID         string    `json:"id"`
		Status     string    `json:"status"`
		Message    string    `json:"message"`
		TargetKey  string    `json:"target_key"`
		LeaseUntil time.Time `json:"lease_until"`
		Take       struct {
			HandOut     int    `json:"hand_out"`
			MaxHandOuts int    `json:"max_hand_outs"`
			Taker       string `json:"taker"`
		} `json:"take"`
	} `json:"job"`
	Release     struct{ ID string }        `json:"release"`
	Version     struct{ Tag string }       `json:"version"`
	Deployment  struct{ ID string }        `json:"deployment"`
	Environment struct{ Name string }      `json:"environment"`
	Resource    struct{ Name string }      `json:"resource"`
	TakeToken   string                     `json:"take_token"`
	_           struct{}                   `json:"-"`
	Raw         map[string]json.RawMessage `json:"-"`
}

// take takes ext's next job as taker with a token of scope agent and
// requires a job.
func (f *fixture) take(agent, taker string) taken {
	f.t.Helper()
	res := f.do(http.MethodPost, takePath(agent, "0s"), "agent", map[string]any{"taker": taker})
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	var tk taken
	require.NoError(f.t, json.Unmarshal(res.body, &tk))
	return tk
}

// jobField reads a field of a job through the API.
func (f *fixture) jobField(id, field string) any {
	f.t.Helper()
	res := f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil)
	require.Equal(f.t, http.StatusOK, res.status, string(res.body))
	return res.json(f.t)[field]
}

func TestPullTakeHeartbeatReport(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		_, err := f.st.releases.JobAgents().Put(f.ctx, release.JobAgent{ID: "gha", Name: "actions", Type: "github-actions"}, 0)
		require.NoError(t, err)
		// Nothing to take yet: 204 at once, and after a short wait.
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-1"}).status)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("ext", "50ms"), "agent", map[string]any{"taker": "host-1"}).status)

		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		require.Equal(t, "pending", f.jobField(id, "status"), "dispatch leaves the job for a taker")

		// Refusals change nothing.
		f.do(http.MethodPost, takePath("ext", "0s"), "read", map[string]any{"taker": "h"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, takePath("ext", "0s"), "", map[string]any{"taker": "h"}).problem(t, http.StatusUnauthorized)
		p := f.do(http.MethodPost, takePath("ext", "soon"), "agent", map[string]any{"taker": "h"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "query.wait")
		p = f.do(http.MethodPost, takePath("ext", "2m"), "agent", map[string]any{"taker": "h"}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "query.wait")
		p = f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.taker")
		f.do(http.MethodPost, takePath("nope", "0s"), "admin", map[string]any{"taker": "h"}).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, takePath("nope", "0s"), "agent", map[string]any{"taker": "h"}).problem(t, http.StatusForbidden)
		p = f.do(http.MethodPost, takePath("gha", "0s"), "agent", map[string]any{"taker": "h"}).problem(t, http.StatusNotFound)
		require.Contains(t, p["detail"], "not a pull agent")
		require.Equal(t, "pending", f.jobField(id, "status"))

		now := f.clock.Now()
		tk := f.take("ext", "host-1")
		require.Equal(t, id, tk.Job.ID)
		require.Equal(t, "inProgress", tk.Job.Status)
		require.Equal(t, 1, tk.Job.Take.HandOut)
		require.Equal(t, release.DefaultHandOuts, tk.Job.Take.MaxHandOuts)
		require.Equal(t, "host-1", tk.Job.Take.Taker)
		require.True(t, now.Add(release.DefaultPullLease).Equal(tk.Job.LeaseUntil), "%s", tk.Job.LeaseUntil)
		require.Equal(t, "web", tk.Deployment.ID)
		require.Equal(t, "dev", tk.Environment.Name)
		require.Equal(t, "r1", tk.Resource.Name)
		require.Equal(t, "v1", tk.Version.Tag)
		require.NotEmpty(t, tk.Release.ID)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": "host-2"}).status,
			"a taken job is not handed out while its lease runs")

		// Heartbeat: renews from now; a wrong hand-out or another agent's
		// path is refused.
		f.clock.Advance(30 * time.Second)
		res := f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken})
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, f.clock.Now().Add(release.DefaultPullLease).Format(time.RFC3339Nano), res.json(t)["lease_until"])
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 2, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
		p = f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 0, "take_token": tk.TakeToken}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.hand_out")
		f.do(http.MethodPost, beatPath("gha", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusNotFound)
		f.do(http.MethodPost, beatPath("ext", "nope"), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusNotFound)
		// A guessed hand-out number without its take token is refused
		// (issue 28), and changes nothing.
		p = f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1}).problem(t, http.StatusUnprocessableEntity)
		require.Contains(t, locations(p), "body.take_token")
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": "guess"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": "guess", "status": "successful"}).problem(t, http.StatusForbidden)
		require.Equal(t, "inProgress", f.jobField(id, "status"), "a guessed hand-out reports nothing")
		require.NotContains(t, f.do(http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), "read", nil).json(t)["take"], "take_token",
			"the job shows the token's hash, never the token")
		f.do(http.MethodPost, beatPath("ext", id), "read", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusForbidden)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, reportPath("ext", id), "agent",
			map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "inProgress", "links": map[string]any{"logs": "https://ci.example/1"}}).status)

		// The taker stops heartbeating: at its lease's end the job is
		// handed out again, and the old taker is fenced.
		f.clock.Advance(release.DefaultPullLease)
		f.drain() // the chain's pass at the lease's end leaves the job to its next taker
		require.Equal(t, "inProgress", f.jobField(id, "status"), "a job with hand-outs left is not failed")
		tk2 := f.take("ext", "host-2")
		require.Equal(t, id, tk2.Job.ID)
		require.Equal(t, 2, tk2.Job.Take.HandOut)
		require.Contains(t, tk2.Job.Message, `handed out again to "host-2": the lease of "host-1" (hand-out 1) ran out`)
		late := f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "successful"}).problem(t, http.StatusConflict)
		require.Contains(t, late["detail"], "hand-out 1 is fenced")
		require.Contains(t, late["detail"], `"host-2" (hand-out 2)`)
		f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusConflict)
		require.Equal(t, "inProgress", f.jobField(id, "status"), "the fenced report changed nothing")

		res = f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 2, "take_token": tk2.TakeToken, "status": "successful", "message": "deployed"})
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 2, "take_token": tk2.TakeToken, "status": "successful"}).status,
			"a repeated report is a no-op")
		ended := f.do(http.MethodPost, beatPath("ext", id), "agent", map[string]any{"hand_out": 2, "take_token": tk2.TakeToken}).problem(t, http.StatusConflict)
		require.Contains(t, ended["detail"], "ended successful")
		require.Equal(t, "successful", f.jobField(id, "status"))
		require.Equal(t, "deployed", f.jobField(id, "message"))
		require.Equal(t, map[string]any{"logs": "https://ci.example/1"}, f.jobField(id, "links"))
	})
}

func TestPullSigned(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		body := []byte(`{"taker":"signed-host"}`)
		now := f.clock.Now()
		f.do(http.MethodPost, takePath("ext", "0s"), "", body, signed(http.MethodPost, takePath("ext", "0s"), "wrong", "ext", now, body)...).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, takePath("ext", "0s"), "", body, signed(http.MethodPost, takePath("ext", "0s"), agentSecret, id, now, body)...).problem(t, http.StatusUnauthorized)
		f.do(http.MethodPost, takePath("ext", "0s"), "", []byte(`{"taker":"other"}`), signed(http.MethodPost, takePath("ext", "0s"), agentSecret, "ext", now, body)...).problem(t, http.StatusUnauthorized)
		require.Equal(t, "pending", f.jobField(id, "status"), "a bad signature takes nothing")
		res := f.do(http.MethodPost, takePath("ext", "0s"), "", body, signed(http.MethodPost, takePath("ext", "0s"), agentSecret, "ext", now, body)...)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		replay := f.do(http.MethodPost, takePath("ext", "0s"), "", body, signed(http.MethodPost, takePath("ext", "0s"), agentSecret, "ext", now, body)...).problem(t, http.StatusUnauthorized)
		require.Contains(t, replay["detail"], "already used")

		var tk taken
		require.NoError(t, json.Unmarshal(res.body, &tk))
		beat := []byte(`{"hand_out":1,"take_token":"` + tk.TakeToken + `"}`)
		f.do(http.MethodPost, beatPath("ext", id), "", beat, signed(http.MethodPost, beatPath("ext", id), agentSecret, "ext", now, beat)...).problem(t, http.StatusUnauthorized)
		res = f.do(http.MethodPost, beatPath("ext", id), "", beat, signed(http.MethodPost, beatPath("ext", id), agentSecret, id, now, beat)...)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		rep := []byte(`{"hand_out":1,"take_token":"` + tk.TakeToken + `","status":"successful"}`)
		res = f.do(http.MethodPost, reportPath("ext", id), "", rep, signed(http.MethodPost, reportPath("ext", id), agentSecret, id, now, rep)...)
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		require.Equal(t, "successful", f.jobField(id, "status"))
	})
}

// TestPullWaitEndsWhenAJobComes: a take waiting for a job answers as soon
// as the chain creates one, long before its wait ends.
func TestPullWaitEndsWhenAJobComes(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		type answer struct {
			status int
			body   []byte
		}
		done := make(chan answer, 1)
		go func() {
			res := f.do(http.MethodPost, takePath("ext", "1m"), "agent", map[string]any{"taker": "waiter"})
			done <- answer{res.status, res.body}
		}()
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		a := <-done
		// A wait that ran out answers without a job: this one ended with it.
		require.Equal(t, http.StatusOK, a.status, string(a.body))
		require.Contains(t, string(a.body), `"taker":"waiter"`)
	})
}

// TestPullLostAfterLastHandOut: after the lease of a job's last hand-out
// runs out the chain ends it as lost, saying why.
func TestPullLostAfterLastHandOut(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		_, err := f.st.releases.JobAgents().Put(f.ctx, release.JobAgent{ID: "once", Name: "once", Type: release.PullAgentType,
			Config: map[string]any{"lease": "10s", "max_hand_outs": 1}}, 0)
		require.NoError(t, err)
		_, err = f.st.releases.Deployments().Put(f.ctx, release.Deployment{ID: "api", SystemID: "sys", Name: "api", Slug: "api", JobAgentID: "once", ResourceSelector: "true"}, 0)
		require.NoError(t, err)
		_, err = f.chain.SyncTargets(f.ctx, "sys")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "api", "tag": "v1"}).status)
		id := f.activeJob("api:dev:r1")
		tk := f.take("once", "host-1")
		require.Equal(t, id, tk.Job.ID)
		require.Equal(t, 1, tk.Job.Take.MaxHandOuts)
		f.clock.Advance(10 * time.Second)
		f.drain()
		require.Equal(t, "failure", f.jobField(id, "status"))
		require.Contains(t, f.jobField(id, "message"), `lost: handed out 1 times (the agent's max_hand_outs), and the lease of its last taker "host-1" ran out`)
		require.Equal(t, http.StatusNoContent, f.do(http.MethodPost, takePath("once", "0s"), "agent", map[string]any{"taker": "host-2"}).status)
	})
}

// TestPullConcurrentTakers: N takers over HTTP share M jobs, each taken
// exactly once.
func TestPullConcurrentTakers(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		const jobs, takers = 12, 5
		for i := 2; i <= jobs; i++ {
			name := fmt.Sprintf("r%d", i)
			_, err := f.st.releases.Resources().Put(f.ctx, release.Resource{ID: name, WorkspaceID: "ws", Kind: "cluster", Identifier: "k8s/" + name, Name: name}, 0)
			require.NoError(t, err)
		}
		_, err := f.chain.SyncTargets(f.ctx, "sys")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		f.drain()
		got := make([][]string, takers)
		var wg sync.WaitGroup
		for w := range takers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					res := f.do(http.MethodPost, takePath("ext", "0s"), "agent", map[string]any{"taker": fmt.Sprintf("t%d", w)})
					if res.status == http.StatusNoContent {
						return
					}
					var tk taken
					if res.status != http.StatusOK || json.Unmarshal(res.body, &tk) != nil {
						got[w] = append(got[w], "error: "+string(res.body))
						return
					}
					got[w] = append(got[w], tk.Job.ID)
				}
			}()
		}
		wg.Wait()
		seen := map[string]int{}
		for _, ids := range got {
			for _, id := range ids {
				seen[id]++
			}
		}
		require.Len(t, seen, jobs, "every dev job is taken: %v", got)
		for id, n := range seen {
			require.Equal(t, 1, n, "job %s taken %d times", id, n)
			require.Equal(t, "inProgress", f.jobField(id, "status"))
		}
	})
}

// TestAgentTokenBound: an agent token acts only for the job agents it is
// bound to, on the taker routes and on POST /jobs/{id}/report, and a
// taken pull job is not reported around its take (issue 28, finding 3).
func TestAgentTokenBound(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		report := "/api/v1/jobs/" + url.PathEscape(id) + "/report"
		success := map[string]any{"status": "successful"}
		f.do(http.MethodPost, takePath("ext", "0s"), "agent-elsewhere", map[string]any{"taker": "h"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, report, "agent-elsewhere", success).problem(t, http.StatusForbidden)
		require.Equal(t, "pending", f.jobField(id, "status"), "an unrelated agent token takes and reports nothing")

		tk := f.take("ext", "h")
		f.do(http.MethodPost, beatPath("ext", id), "agent-elsewhere", map[string]any{"hand_out": 1, "take_token": tk.TakeToken}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, reportPath("ext", id), "agent-elsewhere", map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "successful"}).problem(t, http.StatusForbidden)
		f.do(http.MethodPost, report, "agent-elsewhere", success).problem(t, http.StatusForbidden)
		p := f.do(http.MethodPost, report, "agent", success).problem(t, http.StatusForbidden)
		require.Contains(t, p["detail"], "taken")
		require.NotEqual(t, "successful", f.jobField(id, "status"), "no forged success")
		res := f.do(http.MethodPost, reportPath("ext", id), "agent", map[string]any{"hand_out": 1, "take_token": tk.TakeToken, "status": "successful"})
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		require.Equal(t, "successful", f.jobField(id, "status"))
	})
}

// TestClientSignedPullCalls: the Go client takes, heartbeats and reports
// as a pull agent signed with its report secret, no token sent; a wrong
// key is refused (issue 31).
func TestClientSignedPullCalls(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		c, err := client.New(f.http.URL, "")
		require.NoError(t, err)
		now := f.clock.Now
		_, _, err = c.NextJobSigned(f.ctx, client.Signer{Secret: "wrong", Now: now}, "ext", "signed-host", 0)
		require.ErrorIs(t, err, client.ErrUnauthorized)
		_, _, err = c.NextJobSigned(f.ctx, client.Signer{Now: now}, "ext", "signed-host", 0)
		require.ErrorIs(t, err, client.ErrUnauthorized, "an empty key is refused before sending")
		s := client.Signer{Secret: agentSecret, Now: now}
		tk, ok, err := c.NextJobSigned(f.ctx, s, "ext", "signed-host", 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, id, tk.Job.ID)
		f.clock.Advance(time.Second) // a new timestamp: another signature for the same body
		hb, err := c.HeartbeatJobSigned(f.ctx, s, "ext", id, api.HeartbeatRequest{HandOut: 1, TakeToken: tk.TakeToken})
		require.NoError(t, err)
		require.Equal(t, 1, hb.HandOut)
		require.NoError(t, c.ReportTakenJobSigned(f.ctx, s, "ext", id, api.TakerReport{HandOut: 1, TakeToken: tk.TakeToken,
			JobReport: api.JobReport{Status: release.JobSuccessful, Message: "signed"}}))
		require.Equal(t, "successful", f.jobField(id, "status"))
	})
}

// TestPullSignedAgentIDsNotEnumerable: without a secret, a signed take
// for an unknown agent is answered exactly as one for a real agent with a
// wrong signature (issue 28: agent ids were enumerable).
func TestPullSignedAgentIDsNotEnumerable(t *testing.T) {
	t.Parallel()
	f := setup(t, "memory")
	body := []byte(`{"taker":"probe"}`)
	now := f.clock.Now()
	known := f.do(http.MethodPost, takePath("ext", "0s"), "", body, signed(http.MethodPost, takePath("ext", "0s"), "guess", "ext", now, body)...).problem(t, http.StatusUnauthorized)
	unknown := f.do(http.MethodPost, takePath("no-such-agent", "0s"), "", body, signed(http.MethodPost, takePath("no-such-agent", "0s"), "guess", "no-such-agent", now, body)...).problem(t, http.StatusUnauthorized)
	require.Equal(t, known["detail"], unknown["detail"])
	require.NotContains(t, unknown["detail"], "no-such-agent")
}

// TestAgentTokenCannotReportAFollowedAgentsJob: a job of an agent serve
// follows (github-actions here: its status is the vendor's) takes no
// report from an agent token, even one bound to its agent; an admin's
// report is the operator's override (issue 28).
func TestAgentTokenCannotReportAFollowedAgentsJob(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, f *fixture) {
		require.Equal(t, http.StatusCreated, f.do(http.MethodPost, "/api/v1/versions", "write", map[string]any{"deployment_id": "web", "tag": "v1"}).status)
		id := f.activeJob("web:dev:r1")
		a, err := f.st.releases.JobAgents().Get(f.ctx, "ext")
		require.NoError(t, err)
		a.Value.Type = "github-actions" // the job's agent is now one serve follows
		_, err = f.st.releases.JobAgents().Put(f.ctx, a.Value, a.Version)
		require.NoError(t, err)
		report := "/api/v1/jobs/" + url.PathEscape(id) + "/report"
		p := f.do(http.MethodPost, report, "agent", map[string]any{"status": "successful"}).problem(t, http.StatusForbidden)
		require.Contains(t, p["detail"], "needs scope admin")
		require.NotEqual(t, "successful", f.jobField(id, "status"), "no forged success")
		res := f.do(http.MethodPost, report, "admin", map[string]any{"status": "successful"})
		require.Equal(t, http.StatusNoContent, res.status, string(res.body))
		require.Equal(t, "successful", f.jobField(id, "status"))
	})
}
