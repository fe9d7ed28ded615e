package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/pgtest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// catalogAPIServer serves the API over a fresh backend (memory, or a
// migrated Postgres schema) and returns its URL with a token per scope,
// each also of scope read.
func catalogAPIServer(t *testing.T, store string) (string, map[ports.Scope]string) {
	t.Helper()
	ctx := t.Context()
	dsn := ""
	if store == "postgres" {
		dsn, _ = pgtest.Schema(t)
	}
	clock := ports.SystemClock
	be, err := openBackend(ctx, dsn, true, clock)
	require.NoError(t, err)
	t.Cleanup(be.close)
	url := backendAPIServer(t, be, nil)
	out := map[ports.Scope]string{}
	for _, s := range ports.Scopes {
		// The changes read the revision first: each token reads too.
		_, secret, err := api.IssueToken(ctx, be.tokens, clock, "cli-"+string(s), []ports.Scope{ports.ScopeRead, s}, boundIfAgent(s)...)
		require.NoError(t, err)
		out[s] = secret
	}
	return url, out
}

// backendAPIServer serves the API over be with the release runtime, the
// catalog's validators and the system clock; with changes its options
// first. It returns the URL.
func backendAPIServer(t *testing.T, be *backend, with func(*api.Options)) string {
	t.Helper()
	clock := ports.SystemClock
	rt := newReleaseRuntime(be.releases, be.workflows, be.catalog, be.queue, clock, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	t.Cleanup(rt.close)
	o := api.Options{Chain: rt.chain, Flows: rt.flows, Catalog: catalog.New(be.catalog, catalog.Config{Validators: catalogValidators()}),
		Releases: be.releases, Workflows: be.workflows, Queue: be.queue, Tokens: be.tokens, Clock: clock,
		Runs: &runs.Control{Store: be.runs, Queue: be.queue, Clock: clock}}
	if with != nil {
		with(&o)
	}
	hs := httptest.NewServer(api.New(o).Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestCatalogThroughAPI runs the catalog commands with --server on both
// stores and checks the exit-status table: 0 ok, 2 bad input, 3 stale
// version, 4 not found, 5 unauthorized, 1 unreachable; and that the
// approver is the token's name.
func TestCatalogThroughAPI(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "postgres"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			url, tok := catalogAPIServer(t, store)
			as := func(s ports.Scope, stdin string, args ...string) cliResult {
				return runCLI(t, stdin, append(append([]string{"catalog"}, args...), "--server", url, "--token", tok[s])...)
			}
			get := func() ports.Revision {
				t.Helper()
				r := as(ports.ScopeRead, "", "get", "policy/gate", "-o", "json")
				require.Equal(t, 0, r.code, r.stderr)
				var rev ports.Revision
				require.NoError(t, json.Unmarshal([]byte(r.stdout), &rev), r.stdout)
				return rev
			}
			r := as(ports.ScopeWrite, policyJSON("one"), "create", "policy/gate", "-f", "-")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, "created policy/gate: draft")
			require.Equal(t, 3, as(ports.ScopeWrite, policyJSON("one"), "create", "policy/gate", "-f", "-").code, "an open draft exists")
			require.Equal(t, 5, as(ports.ScopeRead, policyJSON("one"), "create", "policy/other", "-f", "-").code, "read cannot write")
			require.Equal(t, 5, as(ports.ScopeAgent, "", "propose", "policy/gate", "--version", "1").code, "agent cannot write")
			require.Equal(t, 5, runCLI(t, "", "catalog", "get", "policy/gate", "--server", url, "--token", "rcn_bogus").code)
			require.Equal(t, 2, runCLI(t, "", "catalog", "get", "policy/gate", "--server", url).code, "--server needs a token")
			require.Equal(t, 2, runCLI(t, "", "catalog", "get", "policy/gate", "--server", url, "--token", "x", "--dsn", "postgres://x").code, "both")
			require.Equal(t, 1, runCLI(t, "", "catalog", "get", "policy/gate", "--server", "http://127.0.0.1:1", "--token", "x").code, "unreachable")
			require.Equal(t, 4, as(ports.ScopeRead, "", "get", "policy/nope").code)
			r = as(ports.ScopeWrite, `{"id": "gate"}`, "create", "policy/bad", "-f", "-")
			require.Equal(t, 2, r.code, "an invalid document: %s", r.err)

			d := get()
			require.Equal(t, revision.Draft, d.Lifecycle)
			v := fmt.Sprint(d.Version)
			// A policy's lifecycle changes need approve besides the route's
			// write: write alone may draft it, not move it.
			require.Equal(t, 5, as(ports.ScopeWrite, "", "propose", "policy/gate", "--version", v).code, "write cannot move a policy")
			require.Equal(t, 3, as(ports.ScopeAdmin, "", "propose", "policy/gate", "--version", fmt.Sprint(d.Version+1)).code, "stale version")
			require.Equal(t, 2, as(ports.ScopeApprove, "", "approve", "policy/gate", "--version", v).code, "a draft is not proposed yet")
			r = as(ports.ScopeAdmin, "", "propose", "policy/gate", "--version", v)
			require.Equal(t, 0, r.code, r.stderr)
			// unpropose over the API takes it back to draft; propose again.
			r = as(ports.ScopeAdmin, "", "unpropose", "policy/gate", "--version", fmt.Sprint(get().Version))
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, revision.Draft, get().Lifecycle)
			r = as(ports.ScopeAdmin, "", "propose", "policy/gate", "--version", fmt.Sprint(get().Version))
			require.Equal(t, 0, r.code, r.stderr)
			v = fmt.Sprint(get().Version)
			r = as(ports.ScopeWrite, "", "approve", "policy/gate", "--version", v)
			require.Equal(t, 5, r.code, "write cannot approve: %v", r.err)
			require.Equal(t, 2, as(ports.ScopeApprove, "", "approve", "policy/gate", "--version", v, "--by", "mallory").code, "no free-text approver")
			r = as(ports.ScopeApprove, "", "approve", "policy/gate", "--version", v)
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, "revision 1")
			pub := get()
			require.Equal(t, revision.Published, pub.Lifecycle)
			require.Equal(t, "cli-approve", pub.ApprovedBy, "the approver is the token's name")
			r = as(ports.ScopeRead, "", "plan", "policy/gate")
			require.Equal(t, 0, r.code, r.stderr)
			require.Regexp(t, `^plan`, r.stdout)
			r = as(ports.ScopeRead, "", "plan", "policy/gate", "-o", "json")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, `"targets"`)
			dr := as(ports.ScopeRead, "", "diff", "policy/gate", "-o", "json")
			require.Equal(t, 0, dr.code, dr.stderr)
			require.Equal(t, r.stdout, dr.stdout, "catalog diff is catalog plan")
			require.Equal(t, 2, as(ports.ScopeRead, "", "plan", "workflow-template/x").code, "only policies")

			r = as(ports.ScopeRead, "", "get", "policy/gate", "--revision", "1", "-o", "content")
			require.Equal(t, 0, r.code, r.stderr)
			require.Contains(t, r.stdout, `"one"`)
			require.Equal(t, 4, as(ports.ScopeRead, "", "get", "policy/gate", "--revision", "2").code)
			r = as(ports.ScopeRead, "", "list", "--kind", "policy", "--name", "gate", "-o", "json")
			require.Equal(t, 0, r.code, r.stderr)
			var rs []ports.Revision
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rs))
			require.Len(t, rs, 1)
			// list across objects, and label, over the API too.
			r = as(ports.ScopeWrite, policyJSON("two"), "create", "policy/other", "-f", "-")
			require.Equal(t, 0, r.code, r.stderr)
			r = as(ports.ScopeRead, "", "list", "-o", "json")
			require.Equal(t, 0, r.code, r.stderr)
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rs))
			names := map[string]revision.Lifecycle{}
			for _, x := range rs {
				names[string(x.Kind)+"/"+x.Name] = x.Lifecycle
			}
			require.Equal(t, revision.Published, names["policy/gate"])
			require.Equal(t, revision.Draft, names["policy/other"])
			r = as(ports.ScopeRead, "", "list", "--lifecycle", "draft", "-o", "json")
			require.Equal(t, 0, r.code, r.stderr)
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rs))
			require.Len(t, rs, 1)
			require.Equal(t, "other", rs[0].Name)
			pv := fmt.Sprint(pub.Version)
			require.Equal(t, 5, as(ports.ScopeRead, "", "label", "policy/gate", "tier=gold", "--version", pv).code, "read cannot label")
			require.Equal(t, 3, as(ports.ScopeWrite, "", "label", "policy/gate", "tier=gold", "--version", fmt.Sprint(pub.Version-1)).code, "stale version")
			require.Equal(t, 2, as(ports.ScopeWrite, "", "label", "policy/gate", "tier", "--version", pv).code)
			require.Equal(t, 2, as(ports.ScopeWrite, "", "label", "policy/gate", "tier=\x1b[31m", "--version", pv).code, "a control character")
			r = as(ports.ScopeWrite, "", "label", "policy/gate", "tier=gold", "team=web", "--version", pv)
			require.Equal(t, 0, r.code, r.stderr)
			pub = get()
			require.Equal(t, map[string]string{"tier": "gold", "team": "web"}, pub.Labels)
			r = as(ports.ScopeWrite, "", "label", "policy/gate", "team-", "--version", fmt.Sprint(pub.Version))
			require.Equal(t, 0, r.code, r.stderr)
			pub = get()
			require.Equal(t, map[string]string{"tier": "gold"}, pub.Labels)
			require.Equal(t, revision.Published, pub.Lifecycle)

			// Proposing a policy's deletion lifts its gates: write alone may not.
			require.Equal(t, 5, as(ports.ScopeWrite, "", "propose-delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(pub.Version)).code)
			r = as(ports.ScopeAdmin, "", "propose-delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(pub.Version))
			require.Equal(t, 0, r.code, r.stderr)
			gone := get()
			require.Equal(t, revision.DeletionProposed, gone.Lifecycle)
			// undo-propose-delete over the API: stale version 3, then published again.
			require.Equal(t, 3, as(ports.ScopeAdmin, "", "undo-propose-delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(gone.Version-1)).code)
			r = as(ports.ScopeAdmin, "", "undo-propose-delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(gone.Version))
			require.Equal(t, 0, r.code, r.stderr)
			back := get()
			require.Equal(t, revision.Published, back.Lifecycle)
			r = as(ports.ScopeAdmin, "", "propose-delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(back.Version))
			require.Equal(t, 0, r.code, r.stderr)
			gone = get()
			require.Equal(t, revision.DeletionProposed, gone.Lifecycle)
			r = as(ports.ScopeAdmin, "", "delete", "policy/gate", "--revision", "1", "--version", fmt.Sprint(gone.Version))
			require.Equal(t, 0, r.code, r.stderr)
			require.Equal(t, 4, as(ports.ScopeRead, "", "get", "policy/gate").code)
		})
	}
}
