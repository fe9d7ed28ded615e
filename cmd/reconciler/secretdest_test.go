package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/adapters/kubernetesjob"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// TestWriteTokenCannotSendASecretWhereItChooses is finding 1 of issue 28,
// tried as it was reproduced: a write token stores a github-actions agent
// with tokenRef env:RECONCILER_SECRET_CANARY and a baseURL of its own (a
// listener on loopback, which --outbound-allow lets serve reach, so only
// the secret's binding stands in the way). The apply is refused with 422
// naming job_agent_config.tokenRef; the same baseURL slipped in through a
// version's job_agent_config (merged at dispatch) ends the job
// invalidJobAgent naming the reference, the destination and the flag; the
// listener never sees a request.
func TestWriteTokenCannotSendASecretWhereItChooses(t *testing.T) {
	const canary = "canary-d41d8cd98f00b204"
	t.Setenv("RECONCILER_SECRET_CANARY", canary)
	var hits atomic.Int32
	var leaked atomic.Bool
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(r.Header.Get("Authorization"), canary) || bytes.Contains(b, []byte(canary)) {
			leaked.Store(true)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(listener.Close)

	out, logs := &lockedBuffer{}, &lockedBuffer{}
	var be *backend
	o := serveOptions{listen: "127.0.0.1:0", concurrency: 2, lock: 30 * time.Second,
		resyncInterval: time.Minute, stallThreshold: time.Minute, unknownPodGrace: time.Minute, maxAutoResumes: 1,
		shutdownTimeout: 5 * time.Second, logLevel: "info", logFormat: "json", secretPrefix: envsecret.DefaultPrefix,
		outbound: outboundOptions{allow: []string{"127.0.0.0/8"}}, logOut: logs, // loopback reachable: only the binding refuses
		agents: agentOptions{workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second},
		opened: func(b *backend) { be = b }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, out, o) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	var addr, admin []string
	require.Eventually(t, func() bool {
		addr = regexp.MustCompile(`"msg":"listening","addr":"([^"]+)"`).FindStringSubmatch(logs.String())
		admin = regexp.MustCompile(`RECONCILER_TOKEN=(\S+)`).FindStringSubmatch(out.String())
		return addr != nil && admin != nil
	}, 30*time.Second, 10*time.Millisecond, "serve did not listen: %s", logs.String())
	server := "http://" + addr[1]
	ops, err := client.New(server, admin[1])
	require.NoError(t, err)
	_, writeSecret, err := api.IssueToken(ctx, be.tokens, ports.SystemClock, "attacker", []ports.Scope{ports.ScopeRead, ports.ScopeWrite})
	require.NoError(t, err)
	attacker, err := client.New(server, writeSecret)
	require.NoError(t, err)

	// The operator's agent: the GitHub API by default.
	agent := release.JobAgent{ID: "gha", Name: "GitHub", Type: githubactions.Type, Config: map[string]any{
		"owner": "acme", "repo": "web", "workflowFile": "deploy.yml", "tokenRef": "env:RECONCILER_SECRET_GH"}}
	putDemoWorkspace(t, ops, agent)

	// At apply: 422 naming the field, nothing stored.
	evil := agent
	evil.ID, evil.Config = "evil", map[string]any{"owner": "acme", "repo": "web", "workflowFile": "deploy.yml",
		"tokenRef": "env:RECONCILER_SECRET_CANARY", "baseURL": listener.URL}
	_, err = client.PutObject(ctx, attacker, client.JobAgents, evil.ID, evil, 0)
	var apiErr *client.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusUnprocessableEntity, apiErr.Status, "%v", err)
	require.ErrorContains(t, err, "config.tokenRef", "names the field")
	require.ErrorContains(t, err, "--secret-destination")

	// At dispatch: the baseURL and the reference through a version.
	_, err = attacker.CreateVersion(ctx, api.VersionCreate{DeploymentID: "web", Tag: "v9", JobAgentConfig: map[string]any{
		"tokenRef": "env:RECONCILER_SECRET_CANARY", "baseURL": listener.URL}})
	require.NoError(t, err)
	var job ports.JobRow
	require.Eventually(t, func() bool {
		page, err := attacker.ListJobs(ctx, api.JobFilter{DeploymentID: "web", Status: []string{string(release.JobInvalidJobAgent)}}, client.Page{})
		if err != nil || len(page.Items) == 0 {
			return false
		}
		job = page.Items[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "no job of v9 ended invalidJobAgent")
	msg := job.Job.Message
	require.Contains(t, msg, "env:RECONCILER_SECRET_CANARY", "names the reference")
	require.Contains(t, msg, strings.TrimPrefix(listener.URL, "http://"), "names the destination")
	require.Contains(t, msg, "--secret-destination", "names the flag")
	require.NotContains(t, msg, canary)
	require.Zero(t, hits.Load(), "no request reached the attacker's listener")
	require.False(t, leaked.Load())

	// Finding 5: a policy whose verification sends the Datadog keys to an
	// address of the (approve) token's choosing is 422.
	pol, err := policy.Decode([]byte(`{"id":"dd","workspace_id":"demo","name":"dd","selector":"true","rules":[{"id":"v","type":"verification","metrics":[` +
		`{"name":"errors","provider":{"type":"datadog","config":{"query":"q","address":"` + listener.URL + `"}},"interval_seconds":60,"count":1,"success_condition":"true"}]}]}`))
	require.NoError(t, err)
	_, err = client.PutObject(ctx, ops, client.Policies, pol.ID, pol, 0)
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusUnprocessableEntity, apiErr.Status, "%v", err)
	require.ErrorContains(t, err, "provider.config.apiKeyRef")
}

func TestOutboundOptionsRefuseBadFlagsNamingThem(t *testing.T) {
	t.Parallel()
	for flag, o := range map[string]outboundOptions{
		"--secret-destination":         {secretDests: []string{"env:RECONCILER_SECRET_GH=api.github.com"}},
		"--kubernetes-namespace":       {kube: kubernetesjob.Limits{Namespaces: []string{"Kube_System"}}},
		"--kubernetes-service-account": {kube: kubernetesjob.Limits{ServiceAccounts: []string{"a/b"}}},
	} {
		err := o.check()
		var ue usageError
		require.ErrorAs(t, err, &ue, flag)
		require.ErrorContains(t, err, flag)
	}
}

// TestApplyRefusesKubernetesJobsOutsideTheOperatorsLists: serve's apply
// check of a kubernetes-job agent (422 naming the field, finding 1 of
// issue 28) follows --kubernetes-namespace and --kubernetes-service-account.
func TestApplyRefusesKubernetesJobsOutsideTheOperatorsLists(t *testing.T) {
	t.Parallel()
	o := outboundOptions{kube: kubernetesjob.Limits{Namespaces: []string{"deploy"}, ServiceAccounts: []string{"deployer"}}}
	require.NoError(t, o.check())
	v := withOperatorLimits(agentConfigValidator(), &o)
	cfg := func(kv ...any) map[string]any {
		m := map[string]any{"namespace": "deploy", "image": "busybox", "serviceAccountName": "deployer"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	require.NoError(t, v(kubernetesjob.Type, cfg()))
	for field, c := range map[string]map[string]any{
		"job_agent_config.namespace":                 cfg("namespace", "kube-system"),
		"job_agent_config.serviceAccountName":        cfg("serviceAccountName", "cluster-admin"),
		"job_agent_config.template.spec.hostNetwork": cfg("template", map[string]any{"spec": map[string]any{"hostNetwork": true}}),
	} {
		var fe *release.FieldError
		require.ErrorAs(t, v(kubernetesjob.Type, c), &fe, field)
		require.Equal(t, field, fe.Field)
	}
}

// TestPolicyWithAnUnboundProviderIsRefused: finding 5 of issue 28 — an
// approve token pointed a verification's Datadog keys at an address of its
// choosing. serve's policy validator refuses it naming the field; the
// vendor's default site passes.
func TestPolicyWithAnUnboundProviderIsRefused(t *testing.T) {
	t.Parallel()
	o := outboundOptions{}
	require.NoError(t, o.check())
	validate := o.catalogValidators()[revision.KindPolicy]
	doc := func(provider string) []byte {
		return []byte(`{"id":"p","workspace_id":"ws","name":"p","selector":"true","rules":[{"id":"v","type":"verification","metrics":[` +
			`{"name":"errors","provider":` + provider + `,"interval_seconds":60,"count":1,"success_condition":"result.value < 1"}]}]}`)
	}
	require.NoError(t, validate(doc(`{"type":"datadog","config":{"query":"q"}}`)), "Datadog's own site, its default keys")
	err := validate(doc(`{"type":"datadog","config":{"query":"q","address":"https://dd.evil.example"}}`))
	require.ErrorContains(t, err, "rules[0].metrics[0].provider.config.apiKeyRef")
	require.ErrorContains(t, err, "--secret-destination")
	err = validate(doc(`{"type":"prometheus","config":{"query":"up","address":"https://prom.evil.example","tokenRef":"env:RECONCILER_SECRET_CANARY"}}`))
	require.ErrorContains(t, err, "rules[0].metrics[0].provider.config.tokenRef")
	require.NoError(t, validate(doc(`{"type":"http","config":{"url":"https://status.example"}}`)), "no secret")
}
