package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// pages are every page of the seeded fixture, with text each must show.
var pages = map[string][]string{
	"/":                                {"System Shop", `data-target="web:dev:r1"`, `data-target="web:prod:r1"`, "approval pending"},
	"/grid":                            {`id="grid"`, `data-target="web:prod:r1"`},
	"/targets/web:prod:r1":             {"Rule verdicts for v1 on web:prod:r1", `data-rule="approval" data-verdict="pending"`, "0 of 1 required approvals", "Decision history", `data-how="no-release"`},
	"/versions/web-v1/plan":            {`data-target="web:dev:r1" data-chosen="true"`, `data-target="web:prod:r1" data-chosen="false"`, `data-rule="approval" data-verdict="pending"`},
	"/targets/web:prod:r1/live":        {`id="target-live"`, "Convergence"},
	"/deployments/web/versions":        {`data-version="v1"`, "web:dev:r1", `href="/versions/web-v1/plan"`},
	"/workflows":                       {"gated-1", "Running"},
	"/workflows/gated-1":               {`<svg id="dag"`, `data-task="gate"`, `data-task="deploy"`, `data-from="gate" data-to="deploy"`},
	"/workflows/gated-1/live":          {`id="workflow-live"`, `data-taskrun="gate"`},
	"/runs":                            {"run-repo", "run-standalone", "run-pr-review", "run-persistent-agent"},
	"/runs?kind=repo":                  {"run-repo"},
	"/catalog":                         {"workflow-template", "gated"},
	"/catalog/workflow-template/gated": {"published", "draft", "carol", `class="diff"`},
	"/operations":                      {`data-kind="probe"`, "probe failed", `data-dead="probe/thing/t1"`},
}

// TestPagesRender: every page answers 200 with its content, under the
// console's security headers, for a read-only session.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("read")
	for path, wants := range pages {
		res := c.get(path)
		require.Equal(t, http.StatusOK, res.status, "GET %s: %s", path, res.body)
		for _, w := range wants {
			require.Contains(t, res.body, w, "GET %s", path)
		}
		require.Contains(t, res.header.Get("Content-Security-Policy"), "script-src 'self'")
		require.Equal(t, "DENY", res.header.Get("X-Frame-Options"))
		require.Equal(t, "no-store", res.header.Get("Cache-Control"))
	}
	require.Regexp(t, `(?s)<strong>intent</strong> cancel.*<strong>transition</strong> no-dependencies`, c.page("/runs"), "newest first")
	// Landmarks, a skip link, labelled forms and tables with captions.
	home := c.page("/")
	for _, w := range []string{`<main id="main"`, `<nav aria-label="Main">`, `href="#main"`, "<caption>", `scope="col"`, `aria-current="page"`} {
		require.Contains(t, home, w)
	}
	obj := c.page("/catalog/workflow-template/gated")
	require.Contains(t, obj, `<label for="from">`)
	require.Contains(t, obj, `<select id="from"`)
	dag := c.page("/workflows/gated-1")
	require.Regexp(t, `<svg id="dag" role="img" aria-labelledby="dag-title dag-desc"`, dag)
	require.Contains(t, dag, "deploy depends on gate", "the drawing has a text description")
}

// TestLogin: pages need a session; a bad, revoked or read-less token is
// refused; the cookie is HttpOnly and SameSite=Strict (Secure over TLS);
// logout ends it.
func TestLogin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	anon := f.anonymous()
	res := anon.get("/workflows/gated-1")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/login?next=%2Fworkflows%2Fgated-1", res.header.Get("Location"))
	res = anon.get("/grid")
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, http.StatusNotFound, anon.get("/debug/pprof/").status, "an unknown path is 404, session or not")
	req := httptest.NewRequest(http.MethodGet, "/grid", nil)
	req.Header.Set("HX-Request", "true")
	rec := httptest.NewRecorder()
	f.console.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, "a poll without a session")
	require.Equal(t, "true", rec.Header().Get("HX-Refresh"), "reloads the page, which logs in")

	login := anon.page("/login?next=/workflows")
	require.Contains(t, login, `<label for="token">API token</label>`)
	require.Contains(t, login, `value="/workflows"`)
	require.Contains(t, anon.page("/login?next=//evil.example"), `name="next" value="/"`, "next never leaves the site")

	for token, status := range map[string]int{"": http.StatusUnauthorized, "rcn_nope": http.StatusUnauthorized,
		f.tokens["revoked"]: http.StatusUnauthorized, f.tokens["agent"]: http.StatusForbidden} {
		res := anon.post("/login", url.Values{"token": {token}})
		require.Equal(t, status, res.status, res.body)
		require.Contains(t, res.body, `role="alert"`)
		require.Empty(t, res.header.Values("Set-Cookie"))
	}
	res = anon.post("/login", url.Values{"token": {f.tokens["read"]}, "next": {"/runs"}}, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, res.status, "a login posted from another site")

	// A TAB (dropped by browsers: "/\t/evil.example" is "//evil.example")
	// or another control character makes next not local.
	for _, next := range []string{"/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example"} {
		res = anon.post("/login", url.Values{"token": {f.tokens["read"]}, "next": {next}})
		require.Equal(t, http.StatusSeeOther, res.status)
		require.Equal(t, "/", res.header.Get("Location"), "%q", next)
	}
	res = anon.post("/login", url.Values{"token": {f.tokens["read"]}, "next": {"https://evil.example/"}})
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/", res.header.Get("Location"))
	cookie := res.header.Get("Set-Cookie")
	require.Contains(t, cookie, "reconciler_session=")
	require.Contains(t, cookie, "HttpOnly")
	require.Contains(t, cookie, "SameSite=Strict")
	require.NotContains(t, cookie, "Secure", "plain http: a Secure cookie would never come back")
	require.Contains(t, anon.page("/workflows"), "user-read")

	// Over TLS the cookie is Secure.
	tls := httptest.NewRequest(http.MethodPost, "https://console.example/login", strings.NewReader(url.Values{"token": {f.tokens["read"]}}.Encode()))
	tls.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = httptest.NewRecorder()
	f.console.Handler().ServeHTTP(rec, tls)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	require.Contains(t, rec.Header().Get("Set-Cookie"), "Secure")

	// A token revoked while its session lasts ends the session.
	_, secret, err := api.IssueToken(f.ctx, f.tokenStore, f.clock, "soon-gone", []ports.Scope{ports.ScopeRead, ports.ScopeApprove})
	require.NoError(t, err)
	f.tokens["soon-gone"] = secret
	gone := f.login("soon-gone")
	csrf := gone.csrf()
	toks, err := f.tokenStore.TokenList(f.ctx)
	require.NoError(t, err)
	for _, tok := range toks {
		if tok.Name == "soon-gone" {
			require.NoError(t, f.tokenStore.TokenRevoke(f.ctx, tok.ID, f.clock.Now()))
		}
	}
	require.Equal(t, http.StatusSeeOther, gone.get("/").status, "back to the login page")
	res = gone.post("/versions/web-v1/approve", url.Values{"csrf": {csrf}, "environment_id": {"prod"}})
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Empty(t, f.approvalsOf("web-v1", "prod"))

	res = anon.submit("/logout", nil)
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Contains(t, res.header.Get("Set-Cookie"), "Max-Age=0")
	require.Equal(t, http.StatusSeeOther, anon.get("/").status, "logged out")
}

// TestReadOnlySession: a token without approve, write or admin sees no
// button, and a forged POST (with the session's own CSRF token) is
// refused 403 and changes nothing.
func TestReadOnlySession(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("read")
	for path := range pages {
		require.NotContains(t, c.get(path).body, "data-action=", "GET %s shows a button", path)
	}
	require.Contains(t, c.page("/"), "(read-only)")
	forged := map[string]url.Values{
		"/versions/web-v1/approve":                             {"environment_id": {"prod"}},
		"/versions/web-v1/force-deploy":                        {"environment_id": {"prod"}},
		"/workflows/gated-1/cancel":                            nil,
		"/workflows/gated-1/task-runs/gate/approve":            nil,
		"/operations/redrive":                                  {"kind": {"probe"}, "scope_type": {"thing"}, "scope_id": {"t1"}},
		"/catalog/workflow-template/gated/revisions/x/propose": {"version": {"1"}},
		"/catalog/workflow-template/gated/revisions/x/approve": {"version": {"1"}},
	}
	for path, form := range forged {
		res := c.submit(path, form)
		require.Equal(t, http.StatusForbidden, res.status, "POST %s: %s", path, res.body)
		require.Contains(t, res.body, "lacks scope")
	}
	require.Empty(t, f.approvalsOf("web-v1", "prod"))
	w, err := f.wfs.WorkflowGet(f.ctx, "gated-1")
	require.NoError(t, err)
	require.False(t, w.CancelRequested)
	dead, err := f.queue.WorkDeadList(f.ctx, ports.DeadListParams{})
	require.NoError(t, err)
	require.Len(t, dead, 1)

	// An approver sees the approve buttons but not redrive (admin) nor
	// cancel or propose (write).
	a := f.login("reader+approver")
	require.Contains(t, a.page("/targets/web:prod:r1"), `data-action="approve"`)
	ops := a.page("/operations")
	require.NotContains(t, ops, `data-action="redrive"`)
	require.Equal(t, http.StatusForbidden, a.submit("/operations/redrive", forged["/operations/redrive"]).status)
	require.NotContains(t, a.page("/workflows/gated-1"), `data-action="cancel"`)

	// A writer sees cancel and propose, but neither approve nor force-deploy.
	w8 := f.login("reader+writer")
	wf := w8.page("/workflows/gated-1")
	require.Contains(t, wf, `data-action="cancel"`)
	require.NotContains(t, wf, `data-action="approve"`)
	require.Contains(t, w8.page("/catalog/workflow-template/gated"), `data-action="propose"`)
	require.NotContains(t, wf, "(read-only)")
	tp := w8.page("/targets/web:prod:r1")
	require.NotContains(t, tp, `data-action="approve"`)
	require.NotContains(t, tp, `data-action="force-deploy"`)
	require.Equal(t, http.StatusForbidden, w8.submit("/versions/web-v1/force-deploy", forged["/versions/web-v1/force-deploy"]).status)
}

// TestCSRF: a POST without the session's CSRF token, with another one, or
// sent from another site is refused 403; without a session it is 401.
func TestCSRF(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	form := url.Values{"environment_id": {"prod"}}
	res := c.post("/versions/web-v1/approve", form)
	require.Equal(t, http.StatusForbidden, res.status)
	require.Contains(t, res.body, "CSRF")
	other := f.login("reader+approver").csrf()
	res = c.post("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "csrf": {other}})
	require.Equal(t, http.StatusForbidden, res.status, "another session's token")
	token := c.csrf()
	res = c.post("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "csrf": {token}}, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, res.status)
	res = c.post("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "csrf": {token}}, "Origin", "http://evil.example")
	require.Equal(t, http.StatusForbidden, res.status)
	res = f.anonymous().post("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "csrf": {token}})
	require.Equal(t, http.StatusUnauthorized, res.status)
	require.Empty(t, f.approvalsOf("web-v1", "prod"))

	// The header form (htmx requests) is accepted like the field.
	res = c.post("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "next": {"/targets/web:prod:r1"}}, "X-CSRF-Token", token)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, []string{"user-admin"}, f.approvalsOf("web-v1", "prod"))

	// Only the accepted approval is on record, with who and what.
	entries, err := f.audit.AuditList(f.ctx, ports.AuditListParams{})
	require.NoError(t, err)
	require.Len(t, entries, 1, "the refused posts left no record")
	require.Equal(t, "user-admin", entries[0].Actor)
	require.Equal(t, "console /versions/{id}/approve", entries[0].Action)
	require.Equal(t, "web-v1", entries[0].ID)
	require.Equal(t, "environment_id=prod", entries[0].Summary)
}

// TestApproveAndForceDeploy: the target page's buttons approve a version
// as the session's user, after which prod deploys it, and force-deploy a
// version with the user as its author.
func TestApproveAndForceDeploy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("reader+approver")
	target := c.page("/targets/web:prod:r1")
	require.Contains(t, target, `action="/versions/web-v1/approve"`)
	require.Contains(t, target, `data-status="no-release"`)
	res := c.submit("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "next": {"/targets/web:prod:r1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/targets/web:prod:r1", res.header.Get("Location"))
	require.Equal(t, []string{"ann"}, f.approvalsOf("web-v1", "prod"))
	f.drain()
	target = c.page("/targets/web:prod:r1")
	require.Contains(t, target, `data-rule="approval" data-verdict="allowed"`)
	require.Contains(t, target, "Approved in prod by ann")
	require.NotContains(t, target, `action="/versions/web-v1/approve"`, "already approved")
	require.Contains(t, target, `data-status="deploying"`)

	// The job ends: prod runs v1.
	for _, d := range f.agent.jobs {
		require.NoError(t, f.chain.ReportJob(f.ctx, ports.JobReport{JobID: d.Job.ID, Status: release.JobSuccessful}))
	}
	f.drain()
	require.Contains(t, c.page("/grid"), `data-target="web:prod:r1" data-current="v1" data-desired="v1" data-status="in-sync"`)
	require.Regexp(t, `(?s)data-version="v1".*web:prod:r1`, c.page("/deployments/web/versions"))

	// Force-deploy v2 on r1 in prod, whatever the policy says.
	require.NoError(t, f.chain.CreateVersion(f.ctx, release.DeploymentVersion{ID: "web-v2", DeploymentID: "web", Tag: "v2"}))
	f.drain()
	target = c.page("/targets/web:prod:r1")
	require.Contains(t, target, `action="/versions/web-v2/force-deploy"`)
	res = c.submit("/versions/web-v2/force-deploy", url.Values{"environment_id": {"prod"}, "resource_id": {"r1"}, "reason": {"hotfix"},
		"next": {"/targets/web:prod:r1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	skips, err := f.rel.PolicySkipList(f.ctx, "web-v2")
	require.NoError(t, err)
	require.Len(t, skips, 1)
	require.Equal(t, "ann", skips[0].CreatedBy)
	require.Equal(t, "hotfix", skips[0].Reason)
	f.drain()
	require.Contains(t, c.page("/targets/web:prod:r1"), "Forced")
}

// TestWorkflowActions: the workflow page approves a waiting approval task
// (as the user), after which the DAG shows both regions' jobs, and cancels
// the workflow; it stops polling once the workflow ended.
func TestWorkflowActions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	page := c.page("/workflows/gated-1")
	require.Contains(t, page, `hx-get="/workflows/gated-1/live"`, "a running workflow polls")
	require.Contains(t, page, `data-task="deploy" data-phase="NotStarted"`)
	require.Contains(t, page, `id="approve-gate"`)
	require.Contains(t, page, "waiting for approval (0 of 1): ship web:1?", "approvers see what they approve")
	res := c.submit("/workflows/gated-1/task-runs/gate/approve", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/workflows/gated-1", res.header.Get("Location"))
	f.drain()
	r, err := f.wfs.TaskRunGet(f.ctx, "gated-1", "gate")
	require.NoError(t, err)
	require.Equal(t, []string{"user-admin"}, r.ApprovedBy)
	page = c.page("/workflows/gated-1/live")
	require.Contains(t, page, `data-task="deploy" data-phase="Running"`)
	require.Contains(t, page, "#0 eu: Running")
	require.Contains(t, page, "#1 us: Running")
	require.Regexp(t, `data-task="gate" data-phase="Succeeded"`, page)
	require.Contains(t, page, "approved by [user-admin]: ship web:1?")

	// Approving it again is refused: it no longer waits (422).
	res = c.submit("/workflows/gated-1/task-runs/gate/approve", nil)
	require.Equal(t, http.StatusUnprocessableEntity, res.status, res.body)
	require.Contains(t, res.body, "not waiting for approval")

	res = c.submit("/workflows/gated-1/cancel", nil)
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	f.drain()
	w, err := f.wfs.WorkflowGet(f.ctx, "gated-1")
	require.NoError(t, err)
	require.True(t, w.CancelRequested)
	// The agent's jobs end (cancelled); the workflow ends and the page stops polling.
	for _, d := range f.agent.jobs {
		if strings.HasPrefix(d.Job.ID, "wf/") {
			_ = f.flows.ReportJob(f.ctx, ports.JobReport{JobID: d.Job.ID, Status: release.JobCancelled})
		}
	}
	f.drain()
	st, err := f.flows.Status(f.ctx, "gated-1")
	require.NoError(t, err)
	require.Equal(t, workflow.WorkflowCancelled, st.Workflow.Phase)
	page = c.page("/workflows/gated-1")
	require.NotContains(t, page, "hx-trigger", "a finished workflow does not poll")
	require.NotContains(t, page, `data-action="cancel"`)
	require.Contains(t, page, `data-phase="Cancelled"`)
}

// TestCatalogActions: propose a draft (write), approve it (approve) as
// the user; the diff shows the changed line.
func TestCatalogActions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rs, err := f.cat.List(f.ctx, ports.CatalogListParams{Kind: revision.KindWorkflowTemplate, Name: "gated"})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	pub, draft := rs[0], rs[1]
	c := f.login("admin")
	page := c.page("/catalog/workflow-template/gated?from=" + pub.ID + "&to=" + draft.ID)
	require.Regexp(t, `<del>- +&#34;message&#34;: &#34;ship \{\{workflow.parameters.image}}\?&#34;</del>`, page)
	require.Regexp(t, `<ins>\+ +&#34;message&#34;: &#34;ship \{\{workflow.parameters.image}} now\?&#34;</ins>`, page)
	require.Equal(t, 2, strings.Count(page, `class="dadd"`)+strings.Count(page, `class="ddel"`), "one line changed")
	require.Contains(t, page, `data-action="propose"`)

	base := "/catalog/workflow-template/gated/revisions/" + draft.ID
	res := c.submit(base+"/propose", url.Values{"version": {"99"}})
	require.Equal(t, http.StatusConflict, res.status, "a stale version: %s", res.body)
	res = c.submit(base+"/propose", url.Values{"version": {"x"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.status)
	require.Contains(t, res.body, "version")
	res = c.submit(base+"/propose", url.Values{"version": {itoa(draft.Version)}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	got, err := f.cat.Get(f.ctx, draft.Ref())
	require.NoError(t, err)
	require.Equal(t, revision.Proposed, got.Lifecycle)
	require.Contains(t, c.page("/catalog/workflow-template/gated"), `data-action="approve"`)
	res = f.login("reader+writer").submit(base+"/approve", url.Values{"version": {itoa(got.Version)}})
	require.Equal(t, http.StatusForbidden, res.status, "write may not approve")
	res = c.submit(base+"/approve", url.Values{"version": {itoa(got.Version)}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	got, err = f.cat.Get(f.ctx, draft.Ref())
	require.NoError(t, err)
	require.Equal(t, revision.Published, got.Lifecycle)
	require.Equal(t, "user-admin", got.ApprovedBy)
	require.Equal(t, 2, got.Revision)
	// The object's page shows who proposed and approved it, newest first;
	// the refused posts are not there.
	page = c.page("/catalog/workflow-template/gated")
	require.Contains(t, page, `<h2 id="history-h">History</h2>`)
	require.Equal(t, 2, strings.Count(page, "data-audit="), page)
	require.Less(t, strings.Index(page, "/approve</code>"), strings.Index(page, "/propose</code>"))
}

// TestRedrive: an admin redrives a dead-lettered item from the operations
// page; it is pending again.
func TestRedrive(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	require.Contains(t, c.page("/operations"), `data-action="redrive"`)
	res := c.submit("/operations/redrive", url.Values{"kind": {"probe"}, "scope_type": {"thing"}, "scope_id": {"t1"}})
	require.Equal(t, http.StatusSeeOther, res.status, res.body)
	require.Equal(t, "/operations", res.header.Get("Location"))
	it, err := f.queue.WorkGet(f.ctx, ports.WorkKey{Kind: "probe", ScopeType: "thing", ScopeID: "t1"})
	require.NoError(t, err)
	require.Equal(t, ports.WorkPending, it.State)
	res = c.submit("/operations/redrive", url.Values{"kind": {"probe"}, "scope_type": {"thing"}, "scope_id": {"t1"}})
	require.Equal(t, http.StatusConflict, res.status, "not dead any more: %s", res.body)
	res = c.submit("/operations/redrive", url.Values{"kind": {"probe"}})
	require.Equal(t, http.StatusUnprocessableEntity, res.status)
}

// TestBadInput: bad paths, ids and forms get a clear 4xx page, never a
// 500, and change nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	for path, status := range map[string]int{
		"/targets/nope":                                http.StatusUnprocessableEntity,
		"/targets/web:prod:nowhere":                    http.StatusNotFound,
		"/deployments/nope/versions":                   http.StatusNotFound,
		"/workflows/nope":                              http.StatusNotFound,
		"/runs?kind=robot":                             http.StatusBadRequest,
		"/catalog/gadget/x":                            http.StatusUnprocessableEntity,
		"/catalog/workflow-template/nope":              http.StatusNotFound,
		"/catalog/workflow-template/gated?from=a&to=b": http.StatusNotFound,
		"/no/such/page":                                http.StatusNotFound,
		"/static/README.md":                            http.StatusNotFound,
	} {
		res := c.get(path)
		require.Equal(t, status, res.status, "GET %s: %s", path, res.body)
		require.Contains(t, res.body, `data-testid="problem"`, "GET %s", path)
	}
	for path, tc := range map[string]struct {
		form   url.Values
		status int
	}{
		"/versions/nope/approve":      {url.Values{"environment_id": {"prod"}}, http.StatusNotFound},
		"/versions/web-v1/approve":    {url.Values{}, http.StatusUnprocessableEntity},
		"/versions/nope/force-deploy": {url.Values{}, http.StatusNotFound},
		"/workflows/nope/cancel":      {nil, http.StatusNotFound},
	} {
		res := c.submit(path, tc.form)
		require.Equal(t, tc.status, res.status, "POST %s: %s", path, res.body)
	}
	// A form that is too large.
	res := c.post("/versions/web-v1/approve", url.Values{"csrf": {c.csrf()}, "environment_id": {strings.Repeat("x", 70<<10)}})
	require.Equal(t, http.StatusRequestEntityTooLarge, res.status)
	// next never leads off the site.
	res = c.submit("/versions/web-v1/approve", url.Values{"environment_id": {"prod"}, "next": {"//evil.example/x"}})
	require.Equal(t, http.StatusSeeOther, res.status)
	require.Equal(t, "/", res.header.Get("Location"))
}

// TestNoSecretRendered: the sensitive variable's value reached the agent
// (so it exists in the running system), yet no page, fragment or error
// shows it, nor its reference, nor the session's token.
func TestNoSecretRendered(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	require.Equal(t, http.StatusSeeOther, c.submit("/workflows/gated-1/task-runs/gate/approve", nil).status)
	f.drain()
	seen := false
	for _, d := range f.agent.jobs {
		seen = seen || strings.Contains(jsonOf(t, d), secretValue)
	}
	require.True(t, seen, "the workflow's job was dispatched with the secret resolved")
	st, err := f.flows.Status(f.ctx, "gated-1")
	require.NoError(t, err)
	paths := []string{"/login"}
	for p := range pages {
		paths = append(paths, p)
	}
	require.NotEmpty(t, st.TaskRuns)
	for _, p := range paths {
		body := c.get(p).body
		for _, secret := range []string{secretValue, secretRef, "RECONCILER_SECRET", f.tokens["admin"], workflow.Redacted} {
			require.NotContains(t, body, secret, "GET %s", p)
		}
	}
}

// TestEmbeddedScriptPinned: the embedded htmx is the file whose sha256
// static/README.md records, served as JavaScript.
func TestEmbeddedScriptPinned(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("static/README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`\| htmx\.min\.js \| ([0-9a-f]{64}) \|`).FindStringSubmatch(string(readme))
	require.NotNil(t, m, "README records the file's sha256")
	f := setup(t)
	res := f.anonymous().get("/static/htmx.min.js")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, res.header.Get("Content-Type"), "javascript")
	sum := sha256.Sum256([]byte(res.body))
	require.Equal(t, m[1], hex.EncodeToString(sum[:]), "the served script is the pinned one")
	require.Equal(t, http.StatusOK, f.anonymous().get("/static/console.css").status)
}

// TestInsecure: without auth every request is an admin "anonymous", the
// login page leads home, and actions need no CSRF token (as the API on a
// loopback listener).
func TestInsecure(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := httptest.NewServer(newInsecure(f).Handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + "/targets/web:prod:r1")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	res2, err := http.PostForm(srv.URL+"/versions/web-v1/approve", url.Values{"environment_id": {"prod"}})
	require.NoError(t, err)
	defer res2.Body.Close()
	require.Equal(t, http.StatusOK, res2.StatusCode, "followed the redirect home")
	require.Equal(t, []string{"anonymous"}, f.approvalsOf("web-v1", "prod"))
}

// TestUndecodablePathIs400: a NUL or another control character in a
// console path or query is a 400 page, not a 500.
func TestUndecodablePathIs400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("admin")
	for _, p := range []string{"/targets/web:prod:r1%00", "/workflows/a%00b", "/catalog/policy/a%00", "/deployments/web%00/versions", "/runs?kind=%00"} {
		res := c.get(p)
		require.Equal(t, http.StatusBadRequest, res.status, p)
		require.Contains(t, res.body, "control character", p)
	}
}

// TestTargetShowsRelations: the target page shows how each reference
// variable resolves: the rule and related resource, or why not.
func TestTargetShowsRelations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, s := f.ctx, f.rel
	_, err := s.Resources().Put(ctx, release.Resource{ID: "vpc-1", WorkspaceID: "ws", Kind: "VPC", Identifier: "aws/vpc-1", Name: "vpc-1",
		Metadata: map[string]string{"region": "eu-west-1"}}, 0)
	require.NoError(t, err)
	r1, err := s.Resources().Get(ctx, "r1")
	require.NoError(t, err)
	r1.Value.Metadata = map[string]string{"vpc": "vpc-1"}
	_, err = s.Resources().Put(ctx, r1.Value, r1.Version)
	require.NoError(t, err)
	_, err = s.RelationshipRules().Put(ctx, release.RelationshipRule{ID: "cluster-vpc", WorkspaceID: "ws", Name: "vpc", Match: `from.metadata.vpc == to.id`}, 0)
	require.NoError(t, err)
	web, err := s.Deployments().Get(ctx, "web")
	require.NoError(t, err)
	web.Value.Variables = append(web.Value.Variables,
		release.DeploymentVariable{Key: "region", Default: &release.Value{Reference: &release.Reference{Relation: "vpc", Path: []string{"metadata", "region"}}}},
		release.DeploymentVariable{Key: "db", Default: &release.Value{Reference: &release.Reference{Relation: "database", Path: []string{"id"}}}})
	_, err = s.Deployments().Put(ctx, web.Value, web.Version)
	require.NoError(t, err)

	page := f.login("read").page("/targets/web:dev:r1")
	require.Contains(t, page, "<dt>Variable region</dt><dd class=\"relation\">vpc.metadata.region: rule cluster-vpc, resource vpc-1</dd>")
	require.Contains(t, page, "<dt>Variable db</dt><dd class=\"relation\">database.id: unresolved: no resource is related to r1 as &#34;database&#34;</dd>")
}

// TestRunPageSaysWhyItWaits: a run whose newest decision could not be
// applied (no agent runtime) shows why it waits at the top of its page,
// not only in the ERROR log (issue 29); a later decision clears it.
func TestRunPageSaysWhyItWaits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := f.login("read")
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "run-standalone"}
	require.NotContains(t, c.page("/runs/standalone/run-standalone"), "data-waiting")
	row, err := f.runs.RunGet(f.ctx, ref)
	require.NoError(t, err)
	why := "launch could not be applied: no agent runtime is configured (serve --runtime)"
	v, err := f.runs.RunUpdate(f.ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: row.Version, State: row.State, Body: row.Body,
		Decision: &ports.RunDecision{Action: runs.DecisionWaiting, Reason: why}})
	require.NoError(t, err)
	require.Contains(t, c.page("/runs/standalone/run-standalone"), "<dt>Waiting</dt><dd data-waiting>"+why+"</dd>")
	_, err = f.runs.RunUpdate(f.ctx, ports.RunUpdateParams{Ref: ref, ExpectedVersion: v, State: row.State, Body: row.Body,
		Decision: &ports.RunDecision{Action: "intent", Reason: "cancel", By: "alice"}})
	require.NoError(t, err)
	require.NotContains(t, c.page("/runs/standalone/run-standalone"), "data-waiting")
}

// TestRevisionPagePlansPublishing: a policy's revision page shows what
// publishing its open draft would change, as catalog plan computes it: a
// draft that disables prod-gate moves web:prod:r1 from no release (waiting
// for its approval) to v1, its approval rule stopping.
func TestRevisionPagePlansPublishing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	content, err := json.Marshal(policy.Policy{ID: "prod-gate", WorkspaceID: "ws", Name: "prod gate", Selector: `environment.name == "prod"`,
		Rules: []policy.Rule{{ID: "approval", Spec: policy.AnyApproval{MinApprovals: 1}}}})
	require.NoError(t, err)
	d, err := f.cat.Create(f.ctx, catalog.CreateParams{Kind: revision.KindPolicy, Name: "prod-gate", Content: content})
	require.NoError(t, err)
	page := f.login("read").page("/catalog/policy/prod-gate")
	require.Contains(t, page, `data-revision="`+d.ID+`"`)
	require.Contains(t, page, "What publishing "+d.ID+" would change")
	require.Regexp(t, `<tr data-target="web:prod:r1">\s*<th scope="row"><a href="[^"]*">web:prod:r1</a></th>\s*<td class="before">no release</td><td class="after">v1</td>`, page)
	require.Contains(t, page, "- prod-gate/approval (anyApproval, revision 1)")
	require.NotContains(t, page, `data-target="web:dev:r1"`, "dev is not affected")
}
