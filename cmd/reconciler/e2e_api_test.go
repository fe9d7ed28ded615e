package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestEndToEndThroughTheAPI starts `serve --dsn` as a real process and,
// only through its API with a token, creates the demo workspace
// (testdata/demo/release.yaml, its web deployment on an outside agent),
// pushes a version, approves prod and reports every job as an outside agent
// would (HMAC-signed), until the version runs everywhere, prod included.
func TestEndToEndThroughTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	t.Parallel()
	bin, err := buildBinary()
	require.NoError(t, err)
	dsn, _ := pgtest.Schema(t)
	token := createToken(t, bin, dsn, "release-bot", "read,write,approve")

	const secret = "e2e-agent-secret"
	addr := startServeAPI(t, bin, dsn, "RECONCILER_SECRET_E2E="+secret)
	ctx := t.Context()
	c, err := client.New("http://"+addr, token)
	require.NoError(t, err)
	putDemoWorkspace(t, c, release.JobAgent{ID: "outside", Name: "outside agent", Type: release.APIAgentType,
		Config: map[string]any{api.ReportSecretKey: "env:RECONCILER_SECRET_E2E"}})

	_, err = c.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v1"})
	require.NoError(t, err)
	a, err := c.Approve(ctx, "web-v1", "prod")
	require.NoError(t, err)
	require.Equal(t, "release-bot", a.Approval.User)

	// The outside agent: report each pending job in progress, then done,
	// signed; the chain moves dev → staging → prod.
	agentClient, err := client.New("http://"+addr, "")
	require.NoError(t, err)
	reported := 0
	deadline := time.Now().Add(2 * time.Minute)
	for {
		page, err := c.ListTargets(ctx, client.TargetFilter{DeploymentID: "web"}, client.Page{Limit: 100})
		require.NoError(t, err)
		require.Len(t, page.Items, 9, "3 environments × 3 clusters")
		done := 0
		for _, st := range page.Items {
			if st.Current != nil && st.Current.Version.ID == "web-v1" {
				done++
				continue
			}
			if st.Active == nil {
				continue
			}
			job := st.Active.Job.ID
			require.NoError(t, agentClient.ReportJobSigned(ctx, job, api.JobReport{Status: release.JobInProgress, ExternalID: "run-" + job}, secret, time.Now()))
			require.NoError(t, agentClient.ReportJobSigned(ctx, job, api.JobReport{Status: release.JobSuccessful, Message: "deployed"}, secret, time.Now()))
			reported++
		}
		if done == len(page.Items) {
			break
		}
		require.False(t, time.Now().After(deadline), "web-v1 did not reach every target: %d of %d", done, len(page.Items))
		waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		<-waitCtx.Done()
		cancel()
	}
	require.Equal(t, 9, reported, "one job per target, each reported once")
	st, err := c.GetTarget(ctx, "web:prod:eu-1")
	require.NoError(t, err)
	require.Equal(t, "v1", st.Current.Version.Tag)
	require.Equal(t, "deployed", st.Current.Job.Message)

	// A signature is good once.
	body := api.JobReport{Status: release.JobSuccessful}
	at := time.Now()
	require.NoError(t, agentClient.ReportJobSigned(ctx, st.Current.Job.ID, body, secret, at))
	require.ErrorIs(t, agentClient.ReportJobSigned(ctx, st.Current.Job.ID, body, secret, at), client.ErrUnauthorized)
}

// startServeAPI starts `serve --dsn dsn` as a process listening on a free
// loopback port, with env added to its environment, and returns its
// address.
func startServeAPI(t *testing.T, bin, dsn string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--dsn", dsn, "--listen", "127.0.0.1:0", "--lock", "2s")
	cmd.Env = append(append(os.Environ(), "RECONCILER_DSN="), env...)
	log := &procLog{keep: []string{"listening"}}
	startProcessLog(t, cmd, "engine starting", "serve", log)
	lines := log.matching("listening")
	require.NotEmpty(t, lines)
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lines[0].text)
	require.NotNil(t, addr, lines[0].text)
	return addr[1]
}

// putDemoWorkspace creates the release demo's workspace
// (testdata/demo/release.yaml) through c, with its web deployment on
// agent.
func putDemoWorkspace(t *testing.T, c *client.Client, agent release.JobAgent) {
	t.Helper()
	ctx := t.Context()
	fsys, where, err := demoFS("")
	require.NoError(t, err)
	demo, err := loadReleaseDemo(fsys, where)
	require.NoError(t, err)
	put := func(err error) { t.Helper(); require.NoError(t, err) }
	_, err = client.PutObject(ctx, c, client.Workspaces, demo.Workspace.ID, demo.Workspace, 0)
	put(err)
	for _, s := range demo.Systems {
		_, err = client.PutObject(ctx, c, client.Systems, s.ID, s, 0)
		put(err)
	}
	for _, e := range demo.Environments {
		_, err = client.PutObject(ctx, c, client.Environments, e.ID, e, 0)
		put(err)
	}
	for _, r := range demo.Resources {
		_, err = client.PutObject(ctx, c, client.Resources, r.ID, r, 0)
		put(err)
	}
	for _, p := range demo.Policies {
		_, err = client.PutObject(ctx, c, client.Policies, p.ID, p, 0)
		put(err)
	}
	_, err = client.PutObject(ctx, c, client.JobAgents, agent.ID, agent, 0)
	put(err)
	var web release.Deployment
	for _, d := range demo.Deployments {
		if d.ID == "web" {
			web = d
		}
	}
	web.JobAgentID = agent.ID
	_, err = client.PutObject(ctx, c, client.Deployments, web.ID, web, 0)
	put(err)
}

// createToken creates an API token on dsn with the binary and returns its
// secret; more are further flags (--agent ID for scope agent).
func createToken(t *testing.T, bin, dsn, name, scopes string, more ...string) string {
	t.Helper()
	args := append([]string{"token", "create", "--name", name, "--scope", scopes, "--dsn", dsn, "-o", "json"}, more...)
	out, err := exec.Command(bin, args...).Output()
	require.NoError(t, err)
	var created struct{ Secret string }
	require.NoError(t, json.Unmarshal(out, &created))
	require.NotEmpty(t, created.Secret)
	return created.Secret
}
