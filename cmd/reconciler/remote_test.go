package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
)

// apiServer serves the API over in-memory stores seeded with the demo
// workspace, wired as serve wires its memory backend, and returns its URL
// with a token per scope.
func apiServer(t *testing.T) (string, map[ports.Scope]string) {
	t.Helper()
	ctx := t.Context()
	clock := ports.SystemClock
	releases, q, wfs, tokens := memory.NewReleaseStore(clock), memory.NewQueue(clock), memory.NewWorkflowStore(), memory.NewTokens()
	cat := releases.Catalog // as serve's memory backend: the policies the demo seeds are the API's
	rt := newReleaseRuntime(releases, wfs, cat, q, clock, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	t.Cleanup(rt.close)
	fsys, where, err := demoFS("")
	require.NoError(t, err)
	demo, err := loadReleaseDemo(fsys, where)
	require.NoError(t, err)
	require.NoError(t, seedReleaseDemo(ctx, rt.chain, cat, memory.NewTransactor(releases, q), demo))
	srv := api.New(api.Options{Chain: rt.chain, Flows: rt.flows, Catalog: catalog.New(cat, catalog.Config{Validators: catalogValidators()}),
		Releases: releases, Workflows: wfs, Queue: q, Tokens: tokens, Clock: clock,
		Runs: &runs.Control{Store: memory.NewRunStore(clock), Queue: q, Clock: clock},
		Tx:   memory.NewTransactor(releases, q), Audit: memory.NewAuditLog(), AgentConfig: agentConfigValidator()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	out := map[ports.Scope]string{}
	for _, s := range ports.Scopes {
		_, secret, err := api.IssueToken(ctx, tokens, clock, "cli-"+string(s), []ports.Scope{s}, boundIfAgent(s)...)
		require.NoError(t, err)
		out[s] = secret
	}
	return hs.URL, out
}

// TestCLIThroughAPI runs the commands with --server and checks the exit
// status table: 0 ok, 2 bad input, 3 conflict, 4 not found, 5 unauthorized.
func TestCLIThroughAPI(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	as := func(s ports.Scope, args ...string) cliResult {
		return runCLI(t, "", append(args, "--server", url, "--token", tok[s])...)
	}
	r := as(ports.ScopeWrite, "versions", "create", "web", "v9")
	require.Equal(t, 0, r.code, r.stderr+r.stdout)
	require.Contains(t, r.stdout, "created version web-v9 (v9) of web")
	require.Equal(t, 3, as(ports.ScopeWrite, "versions", "create", "web", "v9").code, "the id exists")
	require.Equal(t, 4, as(ports.ScopeWrite, "versions", "create", "nope", "v1").code)
	r = as(ports.ScopeWrite, "versions", "create", "web", "v10", "--status", "shipped")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.err.Error(), "body.status")
	require.Equal(t, 5, as(ports.ScopeRead, "versions", "create", "web", "v11").code, "a scope it lacks")
	require.Equal(t, 5, runCLI(t, "", "versions", "create", "web", "v11", "--server", url, "--token", "rcn_bogus").code)
	require.Equal(t, 2, runCLI(t, "", "versions", "create", "web", "v11", "--server", url).code, "--server needs a token")
	require.Equal(t, 1, runCLI(t, "", "get", "targets", "--server", "http://127.0.0.1:1", "--token", "x").code, "unreachable")

	r = as(ports.ScopeApprove, "approve", "web-v9", "prod")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "cli-approve approved web-v9 in environment prod\n", r.stdout, "the approver is the token's name")
	require.Equal(t, 2, as(ports.ScopeApprove, "approve", "web-v9", "prod", "--user", "mallory").code, "no free-text approver")
	require.Equal(t, 4, as(ports.ScopeApprove, "approve", "web-v404", "prod").code)
	r = as(ports.ScopeApprove, "versions", "force-deploy", "web-v9", "--environment", "prod", "--expires", "1h")
	require.Equal(t, 0, r.code, r.stderr)

	r = as(ports.ScopeRead, "explain", "web:prod:eu-1", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "target:\n")
	r = as(ports.ScopeRead, "explain", "web:prod:eu-1")
	require.Contains(t, r.stdout, "forced:")
	r = as(ports.ScopeRead, "explain", "web:prod:nope")
	require.Equal(t, 4, r.code)
	require.Contains(t, r.err.Error(), "get target web:prod:nope: not found", "the error names the target as the user gave it")
	require.Equal(t, 2, as(ports.ScopeRead, "explain", "web:prod:eu-1", "-o", "xml").code)

	r = as(ports.ScopeRead, "get", "targets", "--deployment", "web", "--limit", "2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 3, strings.Count(r.stdout, "\n"), "a header and two rows: %s", r.stdout)
	require.Contains(t, r.stderr, "more: add --cursor ")
	r = as(ports.ScopeRead, "get", "versions", "--deployment", "web", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"web-v9"`)
	require.Equal(t, 2, as(ports.ScopeRead, "get", "versions").code, "--deployment is required")
	require.Equal(t, 4, as(ports.ScopeRead, "get", "version", "nope").code)
	r = as(ports.ScopeRead, "get", "jobs", "--target", "web:dev:eu-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 4, as(ports.ScopeRead, "get", "job", "nope").code)
	require.Equal(t, 4, as(ports.ScopeAgent, "jobs", "report", "nope", "--status", "successful").code)
	require.Equal(t, 2, as(ports.ScopeAgent, "jobs", "report", "nope", "--status", "done").code)
	require.Equal(t, 2, as(ports.ScopeAgent, "jobs", "report", "nope", "--status", "successful", "--link", "no-url").code)
	r = as(ports.ScopeAgent, "jobs", "report", "nope", "--status", "successful", "--link", "logs=https://ci.example/1?a=b,c")
	require.Equal(t, 4, r.code, "a well-formed --link reaches the server, which looks the job up")
	r = as(ports.ScopeRead, "dead")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "queue: ")
	require.Equal(t, 5, as(ports.ScopeRead, "dead", "redrive", "a", "b", "c").code)
	require.Equal(t, 4, as(ports.ScopeAdmin, "dead", "redrive", "a", "b", "c").code)
	r = as(ports.ScopeRead, "queue")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `^KIND +PENDING +LEASED +DEAD +OLDEST\ndesired-release +\d+ +\d+ +\d+ +(-|\d+\S*)\n$`, r.stdout)
	r = as(ports.ScopeRead, "queue", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var kinds []api.KindDepth
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &kinds), r.stdout)
	for _, k := range kinds {
		require.NotEmpty(t, k.Kind)
		require.Contains(t, r.stdout, `"kind": "`+k.Kind+`"`)
	}
	require.Equal(t, 2, as(ports.ScopeRead, "queue", "-o", "xml").code)
	require.Equal(t, 5, runCLI(t, "", "queue", "--server", url, "--token", "rcn_bogus").code)

	r = as(ports.ScopeWrite, "workflow", "run", "rollout", "--param", "image=x:1", "--id", "wf-cli")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, 3, as(ports.ScopeWrite, "workflow", "run", "rollout", "--param", "image=x:1", "--id", "wf-cli").code)
	require.Equal(t, 2, as(ports.ScopeWrite, "workflow", "run", "rollout").code, "image is required")
	r = as(ports.ScopeRead, "workflow", "status", "wf-cli")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "workflow wf-cli (rollout revision 1)")
	require.Equal(t, 0, as(ports.ScopeWrite, "workflow", "cancel", "wf-cli").code)
	require.Equal(t, 4, as(ports.ScopeRead, "get", "workflow", "nope").code)
}

// TestCLIThroughAPIInProcess runs the client-only commands with --dsn: the
// API served in the process over the database, acting as $USER.
func TestCLIThroughAPIInProcess(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	r := runCLI(t, "", "get", "targets", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "TARGET  DESIRED  CURRENT  ACTIVE\n", r.stdout)
	require.Equal(t, 4, runCLI(t, "", "get", "version", "nope", "--dsn", dsn).code)
	require.Equal(t, 2, runCLI(t, "", "get", "targets").code, "neither --server nor --dsn")
	require.Equal(t, 2, runCLI(t, "", "get", "targets", "--dsn", dsn, "--server", "http://x", "--token", "t").code, "both")
	r = runCLI(t, "", "dead", "-o", "json", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout)
	r = runCLI(t, "", "queue", "-o", "yaml", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout, "an empty queue has no kinds")
}

func TestServeInsecureOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "", "serve", "--insecure-no-auth", "--listen", "0.0.0.0:0")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.err.Error(), "not a loopback address")
	require.True(t, loopback("127.0.0.1:8080"))
	require.True(t, loopback("[::1]:8080"))
	require.True(t, loopback("localhost:8080"))
	require.False(t, loopback(":8080"), "every interface")
}

// TestTokenCommands: create prints the secret once, list never shows it,
// revoke refuses the token from then on.
func TestTokenCommands(t *testing.T) {
	t.Parallel()
	dsn, _ := pgtest.Schema(t)
	r := runCLI(t, "", "token", "create", "--name", "ci", "--scope", "read", "--scope", "write", "--dsn", dsn, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var created struct {
		Token  ports.Token
		Secret string
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	require.Equal(t, []ports.Scope{ports.ScopeRead, ports.ScopeWrite}, created.Token.Scopes)
	r = runCLI(t, "", "token", "list", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, created.Token.ID)
	require.NotContains(t, r.stdout, created.Secret)
	require.Equal(t, 2, runCLI(t, "", "token", "create", "--name", "x", "--scope", "root", "--dsn", dsn).code)
	require.Equal(t, 2, runCLI(t, "", "token", "create", "--scope", "read", "--dsn", dsn).code)
	require.Equal(t, 4, runCLI(t, "", "token", "revoke", "nope", "--dsn", dsn).code)
	require.Equal(t, 0, runCLI(t, "", "token", "revoke", created.Token.ID, "--dsn", dsn).code)
	r = runCLI(t, "", "token", "list", "--dsn", dsn, "-o", "json")
	require.Contains(t, r.stdout, "revoked_at")

	// --expires: stored, shown by list; out of range or malformed is exit 2.
	r = runCLI(t, "", "token", "create", "--name", "temp", "--scope", "read", "--expires", "720h", "--dsn", dsn, "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &created))
	require.WithinDuration(t, time.Now().Add(720*time.Hour), created.Token.ExpiresAt, time.Minute)
	r = runCLI(t, "", "token", "list", "--dsn", dsn)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "EXPIRES")
	require.Contains(t, r.stdout, created.Token.ExpiresAt.UTC().Format(time.RFC3339))
	require.Equal(t, 2, runCLI(t, "", "token", "create", "--name", "x", "--scope", "read", "--expires", "-1h", "--dsn", dsn).code)
	require.Equal(t, 2, runCLI(t, "", "token", "create", "--name", "x", "--scope", "read", "--expires", "soon", "--dsn", dsn).code)
	r = runCLI(t, "", "token", "create", "--name", "x\x1b[31m", "--scope", "read", "--dsn", dsn)
	require.Equal(t, 2, r.code, "a control character in the name")
	require.Contains(t, r.err.Error(), "name")
}

// TestTokenCommandsThroughServer: create, list and revoke on --server need
// a token of scope admin; the created secret works until revoked.
func TestTokenCommandsThroughServer(t *testing.T) {
	t.Parallel()
	url, tok := apiServer(t)
	as := func(s ports.Scope, args ...string) cliResult {
		return runCLI(t, "", append(args, "--server", url, "--token", tok[s])...)
	}
	r := as(ports.ScopeAdmin, "token", "create", "--name", "remote-ci", "--scope", "read,agent", "--expires", "24h", "-o", "yaml")
	require.Equal(t, 2, r.code, "an agent token names its job agents")
	require.Contains(t, r.err.Error(), "--agent")
	r = as(ports.ScopeAdmin, "token", "create", "--name", "remote-ci", "--scope", "read", "--agent", "deployer")
	require.Equal(t, 2, r.code, "--agent only with scope agent")
	r = as(ports.ScopeAdmin, "token", "create", "--name", "remote-ci", "--scope", "read,agent", "--agent", "deployer,web-runner", "--expires", "24h", "-o", "yaml")
	require.Equal(t, 0, r.code, r.stderr)
	var created api.TokenCreated
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &created), r.stdout)
	require.Equal(t, []ports.Scope{ports.ScopeRead, ports.ScopeAgent}, created.Token.Scopes)
	require.Equal(t, []string{"deployer", "web-runner"}, created.Token.Agents)
	require.WithinDuration(t, time.Now().Add(24*time.Hour), created.Token.ExpiresAt, time.Minute)
	require.Equal(t, 0, runCLI(t, "", "get", "targets", "--server", url, "--token", created.Secret).code, "the new secret works")
	r = as(ports.ScopeAdmin, "token", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^`+created.Token.ID+` +remote-ci +read,agent +\S+ +\S+ +-$`, r.stdout)
	require.NotContains(t, r.stdout, created.Secret)
	r = as(ports.ScopeAdmin, "token", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, created.Secret)
	require.Equal(t, 5, as(ports.ScopeRead, "token", "list").code, "scope admin is needed")
	require.Equal(t, 5, as(ports.ScopeWrite, "token", "create", "--name", "x", "--scope", "read").code)
	require.Equal(t, 5, as(ports.ScopeApprove, "token", "revoke", created.Token.ID).code)
	require.Equal(t, 2, as(ports.ScopeAdmin, "token", "create", "--name", "x", "--scope", "root").code)
	require.Equal(t, 2, as(ports.ScopeAdmin, "token", "create", "--scope", "read").code)
	require.Equal(t, 4, as(ports.ScopeAdmin, "token", "revoke", "nope").code)
	r = as(ports.ScopeAdmin, "token", "revoke", created.Token.ID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "revoked token "+created.Token.ID+"\n", r.stdout)
	require.Equal(t, 5, runCLI(t, "", "get", "targets", "--server", url, "--token", created.Secret).code, "revoked")
}

// boundIfAgent binds a test token of scope s to a job agent when s is
// agent, as every agent token must be.
func boundIfAgent(s ports.Scope) []api.TokenOption {
	if s != ports.ScopeAgent {
		return nil
	}
	return []api.TokenOption{api.ForAgents("test-agent")}
}
