package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler"
	"github.com/reconcilerhq/reconciler/adapters/envsecret"
	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

// browserPath finds Debian's chromium (or another Chromium-based browser).
// Outside CI a machine without one skips the browser tests; in CI (.ci/run
// installs chromium) its absence fails them.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); CI runs this test")
	return ""
}

// fastDemo writes the demo directory with its waits cut short: jobs take
// 150ms, v2 comes 1s after start.
func fastDemo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sub, err := fs.Sub(reconciler.DemoFiles, "testdata/demo")
	require.NoError(t, err)
	require.NoError(t, os.CopyFS(dir, sub))
	p := filepath.Join(dir, demoReleaseFile)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	for old, repl := range map[string]string{
		"config: {delay: 3s}":           "config: {delay: 150ms}",
		"after: 15s":                    "after: 1s",
		`config: {image: "worker:1.0"}`: `config: {image: "worker:1.0", pace: 150ms}`,
	} {
		require.Contains(t, string(b), old, "the demo changed: update fastDemo")
		b = bytes.ReplaceAll(b, []byte(old), []byte(repl))
	}
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return dir
}

// consoleServe runs `serve` in this process on the fast demo with the
// console's fallback poll an hour away, so its live parts change only
// through the event stream; it returns the console's URL, a token with
// read and approve scope and a read-only one.
func consoleServe(t *testing.T) (base, approver, reader string) {
	t.Helper()
	var tokens ports.Tokens
	o := serveOptions{listen: "127.0.0.1:0", demo: true, demoDir: fastDemo(t), concurrency: 4, lock: 30 * time.Second,
		resyncInterval: time.Minute, stallThreshold: 15 * time.Minute, maxAutoResumes: 10, unknownPodGrace: 5 * time.Minute,
		shutdownTimeout: 5 * time.Second, logLevel: "info", logFormat: "json", secretPrefix: envsecret.DefaultPrefix,
		consoleRefresh: time.Hour, opened: func(be *backend) { tokens = be.tokens },
		agents: agentOptions{workRoot: t.TempDir(), stopGrace: time.Second, heartbeat: time.Second}}
	records, stop := startServeInProcess(t, o)
	t.Cleanup(stop)
	addr := ""
	for addr == "" {
		r, ok := <-records
		require.True(t, ok, "serve stopped before it listened")
		if r["msg"] == "listening" {
			addr, _ = r["addr"].(string)
		}
	}
	go func() {
		for range records { // keep serve's log flowing
		}
	}()
	issue := func(name string, scopes ...ports.Scope) string {
		_, secret, err := api.IssueToken(t.Context(), tokens, ports.SystemClock, name, scopes)
		require.NoError(t, err)
		return secret
	}
	return "http://" + addr, issue("ada", ports.ScopeRead, ports.ScopeApprove), issue("rita", ports.ScopeRead)
}

// newBrowser starts the one headless chromium of the browser tests; tab
// opens tabs in it.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserPath(t)), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// tab opens a tab of browser in a browser context of its own (cookies
// apart), with an overall deadline.
func tab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}

// login signs in with token through the login form, by keyboard.
func login(ctx context.Context, base, token string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input#token`)),
		chromedp.SendKeys(chromedp.CSS(`input#token`), token+kb.Enter), // the keyboard submits the form
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=user]`)),
	)
}

// screenshot saves the page as docs/console-NAME.png when
// RECONCILER_SCREENSHOTS is set (make screenshots), else takes it only.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "a PNG")
	if os.Getenv("RECONCILER_SCREENSHOTS") != "" {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", "console-"+name+".png"), png, 0o644))
	}
}

// TestConsoleInBrowser drives the console of `serve`'s demo in headless
// chromium: log in, see v1 reach prod, see why v2 waits there, approve
// it, watch it reach prod; open a workflow and see its DAG; a read-only
// token sees no button and its forged approval is refused. It awaits
// every change by polling the DOM, never by sleeping.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	ctx := tab(t, browser)
	base, approver, reader := consoleServe(t)
	target := func(key, attrs string) chromedp.CSS {
		return chromedp.CSS(fmt.Sprintf(`li[data-target=%q]%s`, key, attrs))
	}

	// Log in; v1 reaches prod on all three clusters, v2 reaches staging.
	require.NoError(t, login(ctx, base, approver))
	for _, res := range []string{"eu-1", "us-1", "ap-1"} {
		require.NoError(t, chromedp.Do(ctx,
			chromedp.WaitVisible(target("web:prod:"+res, `[data-current="v1"][data-status="in-sync"]`)),
			chromedp.WaitVisible(target("web:staging:"+res, `[data-current="v2"][data-status="in-sync"]`)),
		), "web on %s", res)
	}
	// The grid renders a target's reason on its own poll, maybe after its
	// status: await the text.
	reason := `document.querySelector('li[data-target="web:prod:eu-1"] .reason')`
	waits, err := chromedp.Run(ctx, chromedp.Poll[string](reason+`?.textContent.includes("v2: approval pending") && `+reason+`.textContent`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(time.Minute)))
	if err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Text(target("web:prod:eu-1", " .reason")))
		require.NoError(t, err, "the grid says why v2 waits; it says %q", got)
	}
	require.Contains(t, waits, "v2: approval pending", "the grid says why v2 waits")
	screenshot(t, ctx, "grid")

	// Why v2 waits in prod: its approval rule is pending. The grid is
	// swapped for a new one on every poll, so the link is clicked in the
	// page as it is at that moment: a click by node could wait forever on
	// a node the poll had just replaced (it hung TestConsoleInBrowser
	// until its deadline once in a loaded `make test`).
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('li[data-target="web:prod:eu-1"] a').click()`),
		chromedp.WaitVisible(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"][data-verdict="pending"]`)),
	))
	why, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"]`)))
	require.NoError(t, err)
	require.Contains(t, why, "0 of 1 required approvals for environment prod")
	screenshot(t, ctx, "target")

	// The target's decision history is on its page, and v2's plan (from
	// the deployment's versions) shows every target: staging has it,
	// prod waits for its approval.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`table.decisions tr[data-how]`)),
		chromedp.Navigate(base+"/deployments/web/versions"),
		chromedp.Click(chromedp.CSS(`tr[data-version="v2"] a.plan-link`)),
		chromedp.WaitVisible(chromedp.CSS(`table.plan tr[data-target="web:prod:eu-1"][data-chosen="false"] li[data-rule="approval"][data-verdict="pending"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.plan tr[data-target="web:staging:eu-1"][data-chosen="true"]`)),
		chromedp.Navigate(base+"/targets/web:prod:eu-1"),
		chromedp.WaitVisible(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"][data-verdict="pending"]`)),
	), "the plan view")

	// A read-only token, in another browser context, sees the same page
	// without a button, and its forged approval is refused.
	ro := tab(t, browser)
	require.NoError(t, login(ro, base, reader))
	require.NoError(t, chromedp.Do(ro,
		chromedp.Navigate(base+"/targets/web:prod:eu-1"),
		chromedp.WaitVisible(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"][data-verdict="pending"]`)),
	))
	buttons, err := chromedp.Run(ro, chromedp.Evaluate[int](`document.querySelectorAll('[data-action]').length`))
	require.NoError(t, err)
	require.Zero(t, buttons, "a read-only session sees no button")
	status, err := chromedp.Run(ro, chromedp.Evaluate[int](`fetch('/versions/web-v2/approve', {method: 'POST', body: new URLSearchParams({
		csrf: document.querySelector('input[name=csrf]').value, environment_id: 'prod'})}).then(r => r.status)`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, 403, status, "a forged approval with the session's own CSRF token")
	require.NoError(t, chromedp.Do(ro, chromedp.Navigate(base+"/targets/web:prod:eu-1"),
		chromedp.WaitVisible(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"][data-verdict="pending"]`))),
		"still unapproved")

	// The read-only session watches the grid while v2 is approved in the
	// other tab: the grid follows the event stream (its fallback poll is
	// an hour away), re-reading itself once per change event, never on a
	// timer.
	require.NoError(t, chromedp.Do(ro,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(target("web:prod:eu-1", `[data-current="v1"]`)),
		chromedp.Evaluate[chromedp.Void](`window.changeEvents = 0;
			document.body.addEventListener('reconciler-change', () => { window.changeEvents++ });`),
	))
	gridReads := `performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname === '/grid').length`
	before, err := chromedp.Run(ro, chromedp.Evaluate[int](gridReads))
	require.NoError(t, err)

	// Approve v2 in prod: the target's live state follows it to prod.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Focus(chromedp.CSS(`article[data-version="v2"] button[data-action="approve"]`)), // by keyboard
		chromedp.SendKeys(chromedp.CSS(`article[data-version="v2"] button[data-action="approve"]`), kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`article[data-version="v2"] tr[data-rule="approval"][data-verdict="allowed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dl.facts[data-current="v2"][data-status="in-sync"]`)),
		chromedp.Navigate(base+"/"),
	))
	for _, res := range []string{"eu-1", "us-1", "ap-1"} {
		require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(target("web:prod:"+res, `[data-current="v2"][data-status="in-sync"]`))))
	}
	require.NoError(t, chromedp.Do(ro, chromedp.WaitVisible(target("web:prod:eu-1", `[data-current="v2"][data-status="in-sync"]`))),
		"the watching grid shows v2 in prod")
	reads, err := chromedp.Run(ro, chromedp.Evaluate[int](gridReads+` - `+strconv.Itoa(before)))
	require.NoError(t, err)
	events, err := chromedp.Run(ro, chromedp.Evaluate[int](`window.changeEvents`))
	require.NoError(t, err)
	require.Positive(t, reads, "the grid was re-read")
	require.LessOrEqual(t, reads, events, "each read of the grid follows a change event: no poll")

	// A workflow's DAG: deploy, then smoke, each succeeded.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/workflows"),
		chromedp.Click(chromedp.CSS(`table a[href^="/workflows/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#dag`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#dag g[data-task="deploy"][data-phase="Succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg#dag g[data-task="smoke"][data-phase="Succeeded"]`)),
		chromedp.WaitReady(chromedp.CSS(`svg#dag path.edge[data-from="deploy"][data-to="smoke"]`)),
	))
	desc, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`svg#dag desc`)))
	require.NoError(t, err)
	require.Contains(t, desc, "smoke depends on deploy")
	screenshot(t, ctx, "workflow")

	// The runs of the four kinds with their newest decisions.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(base+"/runs"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-run="demo-fix-login"] [data-decision="transition"]`)),
	))
	screenshot(t, ctx, "runs")

	for _, p := range []struct{ name, path, title string }{
		{"catalog", "/catalog/workflow-template/rollout", "workflow-template rollout"},
		{"operations", "/operations", "Operations"},
	} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(`main h1`))))
		title, err := chromedp.Run(ctx, chromedp.Title())
		require.NoError(t, err)
		require.Equal(t, p.title+" · reconciler", title)
		screenshot(t, ctx, p.name)
	}
}
