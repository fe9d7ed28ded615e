package process

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/runobserve/runobservetest"
	"github.com/reconcilerhq/reconciler/internal/tracing"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TestMain makes the test binary the agents' supervisor too: the
// runtimes under test run it with SuperviseArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SuperviseArg {
		os.Exit(Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// supervisor is the Config.Supervisor of the tests: this test binary.
func supervisor() []string { return []string{os.Args[0], SuperviseArg} }

// stopAgents releases every agent rt holds and waits for them to end: a
// closed runtime leaves its agents running, a test does not.
func stopAgents(rt *Runtime) {
	rt.mu.Lock()
	procs := make([]*proc, 0, len(rt.procs))
	for ref, pr := range rt.procs {
		procs = append(procs, pr)
		delete(rt.procs, ref)
	}
	rt.mu.Unlock()
	for _, pr := range procs {
		rt.terminate(pr, "agent.release")
	}
	for _, pr := range procs {
		select {
		case <-pr.done:
		case <-time.After(runobservetest.Wait):
		}
	}
	// Released agents too: no supervisor may still write its state when
	// the test's directory is removed.
	all, _ := launches(rt.cfg.WorkRoot)
	deadline := time.Now().Add(runobservetest.Wait)
	for _, dirs := range all {
		for _, dir := range dirs {
			for supervised(dir) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
}

// secretFunc is a SecretResolver from a function.
type secretFunc func(release.SecretRef) (string, error)

func (f secretFunc) Resolve(_ context.Context, ref release.SecretRef) (string, error) { return f(ref) }

type bundle struct {
	rt    *Runtime
	store *runobservetest.Store
	wakes chan reconcile.RunRef
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// setup returns a runtime running `sh -c script`, with a fake store and the
// wake-ups on a channel.
func setup(t *testing.T, script string, edit func(c *Config)) bundle {
	t.Helper()
	b := bundle{store: runobservetest.NewStore("acme/suite"), wakes: make(chan reconcile.RunRef, 64), logs: &syncBuffer{}}
	cfg := Config{Command: "sh", Args: []string{"-c", script}, WorkRoot: t.TempDir(), Supervisor: supervisor(),
		StopGrace: 5 * time.Second, Heartbeat: time.Hour, Poll: 10 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := New(cfg, Options{Store: b.store, Logger: slog.New(slog.NewTextHandler(b.logs, nil)),
		Wake: func(_ context.Context, ref reconcile.RunRef) { b.wakes <- ref },
		Secrets: secretFunc(func(ref release.SecretRef) (string, error) {
			if ref.Ref == "env:RECONCILER_SECRET_TOKEN" {
				return "s3cr3t-value", nil
			}
			return "", errors.New("unknown secret " + ref.Ref)
		})})
	require.NoError(t, err)
	t.Cleanup(func() { stopAgents(rt); rt.Close() })
	b.rt = rt
	return b
}

// next returns the next observation, failing after a generous deadline.
func (b bundle) next(t *testing.T) ports.RunObserveParams {
	t.Helper()
	return b.store.Next(t)
}

// proc returns the run's current process.
func (b bundle) proc(t *testing.T, ref reconcile.RunRef) *proc {
	t.Helper()
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	pr := b.rt.procs[ref]
	require.NotNil(t, pr, "no process for %s", ref)
	return pr
}

// exited waits for the process to be reaped.
func exited(t *testing.T, pr *proc) {
	t.Helper()
	select {
	case <-pr.done:
	case <-time.After(20 * time.Second):
		t.Fatal("process did not exit")
	}
}

func launch(t *testing.T, b bundle, ref reconcile.RunRef, key string) {
	t.Helper()
	require.NoError(t, b.rt.AgentLaunch(context.Background(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
}

func TestProcessReportsStartAndExitInStateOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, "exit 0", nil)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r1"}
	b.store.Set(ref, reconcile.RepoQueued)
	launch(t, b, ref, "k1")
	exited(t, b.proc(t, ref))

	// The launch's move lands: the start is observed, and the run woken.
	b.store.Set(ref, reconcile.RepoProvisioning)
	o := b.next(t)
	require.Equal(t, reconcile.PodRunning, o.Pod.Phase)
	require.True(t, strings.HasPrefix(o.Pod.Name, "pid-"))
	require.False(t, o.Pod.Since.IsZero())
	require.False(t, o.Heartbeat.IsZero())
	require.Equal(t, ref, <-b.wakes)
	require.Empty(t, b.store.Observed, "the exit waits until the run is running")

	b.store.Set(ref, reconcile.RepoRunning)
	o = b.next(t)
	require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
	require.Equal(t, 0, *o.Pod.ExitCode)
	require.Nil(t, o.Patch, "a repo agent's success is its pod's exit 0")
	require.Equal(t, ref, <-b.wakes)
}

func TestProcessExitReportsCodeAndKindDone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind    reconcile.RunKind
		running reconcile.State
		script  string
		code    int
		patch   map[string]any
	}{
		{reconcile.KindStandalone, reconcile.StandaloneRunning, "exit 3", 3, nil},
		{reconcile.KindPRReview, reconcile.ReviewRunning, "exit 0", 0, map[string]any{"review_done": true, "review": (*reconcile.ReviewDraft)(nil)}},
		{reconcile.KindPersistentAgent, reconcile.AgentRunning, "exit 0", 0, map[string]any{"turn_done": true}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.script, nil)
			ref := reconcile.RunRef{Kind: tc.kind, ID: "x"}
			b.store.Set(ref, tc.running)
			launch(t, b, ref, "k")
			require.Equal(t, reconcile.PodRunning, b.next(t).Pod.Phase)
			o := b.next(t)
			require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
			require.Equal(t, tc.code, *o.Pod.ExitCode)
			require.Equal(t, tc.patch, o.Patch)
		})
	}
}

// TestProcessReviewComesBackWithTheExit: a review agent's review.md (at
// RECONCILER_REVIEW_FILE) and review-event are its exit's review draft,
// the review cut at MaxReview bytes and saying so.
func TestProcessReviewComesBackWithTheExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		want         *reconcile.ReviewDraft
	}{
		{"verdict", `printf 'Fix the nil case.' > "$RECONCILER_REVIEW_FILE"; echo request_changes > review-event`,
			&reconcile.ReviewDraft{Body: "Fix the nil case.", Event: "REQUEST_CHANGES"}},
		{"too long", `head -c 70000 /dev/zero | tr '\0' x > review.md`, &reconcile.ReviewDraft{Body: strings.Repeat("x", MaxReview) +
			"\n\n(reconciler: the agent's review may be longer; its runtime brings back at most 60000 bytes.)", Truncated: true}},
		{"failed agent", `echo half > review.md; exit 1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.script, nil)
			ref := reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "rv"}
			b.store.Set(ref, reconcile.ReviewRunning)
			launch(t, b, ref, "k")
			require.Equal(t, reconcile.PodRunning, b.next(t).Pod.Phase)
			o := b.next(t)
			require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
			if tc.want == nil {
				require.NotContains(t, o.Patch, "review", "a failed review reports no draft")
				return
			}
			require.Equal(t, tc.want, o.Patch["review"])
		})
	}
}

func TestProcessEnvironmentWorkDirAndSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t, `env > env.txt; pwd > pwd.txt; echo "token is $TOKEN"`, func(c *Config) {
		c.Env = map[string]string{"MODE": "fast"}
		c.Secrets = map[string]release.SecretRef{"TOKEN": {Ref: "env:RECONCILER_SECRET_TOKEN"}}
	})
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "../escape/me"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	// The pass that launches it is traced: the agent continues its trace.
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	require.NoError(t, b.rt.AgentLaunch(tracing.Remote(context.Background(), tp), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeResume,
		Trigger: "ci-failing", IdempotencyKey: "k"}))
	exited(t, b.proc(t, ref))
	dir := b.rt.WorkDir(ref)
	require.True(t, strings.HasPrefix(dir, b.rt.cfg.WorkRoot+string(filepath.Separator)), "the working directory stays under the root: %s", dir)
	env, err := os.ReadFile(filepath.Join(dir, "env.txt"))
	require.NoError(t, err)
	for _, want := range []string{"MODE=fast", "TOKEN=s3cr3t-value", "RECONCILER_RUN_KIND=standalone", "RECONCILER_RUN_ID=../escape/me",
		"RECONCILER_PURPOSE=resume", "RECONCILER_TRIGGER=ci-failing", "RECONCILER_WORKDIR=" + dir, "TRACEPARENT=" + tp} {
		require.Contains(t, string(env), want+"\n")
	}
	require.NotContains(t, string(env), "HOME=", "the daemon's environment is not inherited")
	pwd, err := os.ReadFile(filepath.Join(dir, "pwd.txt"))
	require.NoError(t, err)
	require.Equal(t, dir, strings.TrimSpace(string(pwd)))
	out, err := os.ReadFile(filepath.Join(dir, LogFile))
	require.NoError(t, err)
	require.Contains(t, string(out), "token is s3cr3t-value", "the agent's output goes to its log file")
	b.next(t)
	b.next(t)
	require.NotContains(t, b.logs.String(), "s3cr3t-value", "secrets never reach the daemon's log")
}

func TestProcessReleaseSendsSIGTERM(t *testing.T) {
	t.Parallel()
	b := setup(t, `trap 'echo term > got-term; exit 7' TERM; echo up > up; while :; do sleep 0.05; done`, nil)
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	launch(t, b, ref, "k")
	require.Equal(t, reconcile.PodRunning, b.next(t).Pod.Phase)
	pr := b.proc(t, ref)
	// Release once the shell has installed its trap (it writes "up" after).
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(b.rt.WorkDir(ref), "up")); return err == nil },
		20*time.Second, 10*time.Millisecond)
	require.NoError(t, b.rt.AgentRelease(context.Background(), ref, "rel"))
	exited(t, pr)
	require.Equal(t, 7, pr.exit, "the agent handled SIGTERM")
	_, err := os.Stat(filepath.Join(b.rt.WorkDir(ref), "got-term"))
	require.NoError(t, err)
	require.NoError(t, b.rt.AgentRelease(context.Background(), ref, "rel"), "a release is idempotent")
}

func TestProcessReleaseKillsAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t, `trap '' TERM; echo up > up; while :; do sleep 0.05; done`, func(c *Config) { c.StopGrace = 200 * time.Millisecond })
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	launch(t, b, ref, "k")
	b.next(t)
	pr := b.proc(t, ref)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(b.rt.WorkDir(ref), "up")); return err == nil },
		20*time.Second, 10*time.Millisecond)
	start := time.Now()
	require.NoError(t, b.rt.AgentRelease(context.Background(), ref, "rel"))
	exited(t, pr)
	require.Equal(t, 128+9, pr.exit, "SIGKILL after the grace period")
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
}

func TestProcessLaunchIsIdempotentAndReplacesTheOldAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, `echo up > up-$$; while :; do sleep 0.05; done`, func(c *Config) { c.StopGrace = 100 * time.Millisecond })
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s"}
	b.store.Set(ref, reconcile.StandaloneRunning)
	launch(t, b, ref, "k1")
	first := b.proc(t, ref)
	launch(t, b, ref, "k1")
	require.Same(t, first, b.proc(t, ref), "the same key starts nothing")
	launch(t, b, ref, "k2")
	second := b.proc(t, ref)
	require.NotSame(t, first, second)
	exited(t, first) // the new attempt stopped the old one first
	select {
	case <-second.done:
		t.Fatal("the new attempt runs")
	default:
	}
}

func TestProcessWithoutCommandRefusesLaunch(t *testing.T) {
	t.Parallel()
	b := setup(t, "", func(c *Config) { c.Command = "" })
	err := b.rt.AgentLaunch(context.Background(), ports.AgentLaunchParams{Ref: reconcile.RunRef{Kind: reconcile.KindRepo, ID: "r"}, IdempotencyKey: "k"})
	require.ErrorIs(t, err, ErrNoCommand)
	require.Contains(t, err.Error(), "--agent-command")
}

func TestProcessConfigValidateNamesTheField(t *testing.T) {
	t.Parallel()
	sup := supervisor()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "WorkRoot"},
		{Config{WorkRoot: "/x"}, "Supervisor"},
		{Config{WorkRoot: "/x", Supervisor: sup, Env: map[string]string{"A-B": "1"}}, `Env: "A-B"`},
		{Config{WorkRoot: "/x", Supervisor: sup, Secrets: map[string]release.SecretRef{"1X": {}}}, `Secrets: "1X"`},
		{Config{WorkRoot: "/x", Supervisor: sup, Env: map[string]string{"T": ""}, Secrets: map[string]release.SecretRef{"T": {}}}, "T is both"},
		{Config{WorkRoot: "/x", Supervisor: sup, Keys: -1}, "negative"},
	} {
		require.ErrorContains(t, tc.cfg.Validate(), tc.want)
	}
}

func TestSafeNameKeepsIDsApart(t *testing.T) {
	t.Parallel()
	require.Equal(t, "task-1", safeName("task-1"))
	require.NotEqual(t, safeName("a/b"), safeName("a_b"))
	require.NotContains(t, safeName("../x"), "/")
	require.NotEqual(t, "..", safeName(".."))
}
