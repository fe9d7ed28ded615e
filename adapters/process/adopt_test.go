package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/runobserve/runobservetest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// waitingAgent writes "up" once its TERM trap is set, then waits for a file
// "go" in its working directory and exits 7 (or 143 on SIGTERM).
const waitingAgent = `trap 'echo term > got-term; exit 143' TERM; echo $$ > up; while [ ! -e go ]; do sleep 0.02; done; exit 7`

// generation is one runtime on a shared work root and store, with its log.
type generation struct {
	rt     *Runtime
	events *runobservetest.Events
}

// newGeneration starts a runtime on root and store, adopting what an
// earlier one left.
func newGeneration(t *testing.T, root string, store *runobservetest.Store, edit func(*Config)) generation {
	t.Helper()
	g := generation{events: &runobservetest.Events{}}
	cfg := Config{Command: "sh", Args: []string{"-c", waitingAgent}, WorkRoot: root, Supervisor: supervisor(),
		StopGrace: 5 * time.Second, Heartbeat: time.Hour, Poll: 10 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	rt, err := New(cfg, Options{Store: store, Logger: g.events.Logger()})
	require.NoError(t, err)
	require.NoError(t, rt.Start(t.Context()))
	t.Cleanup(func() { stopAgents(rt); rt.Close() })
	g.rt = rt
	return g
}

// agentPid waits for the agent's "up" file and returns its pid.
func agentPid(t *testing.T, rt *Runtime, ref reconcile.RunRef) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(rt.WorkDir(ref), "up"))
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid = atoi(t, strings.TrimSpace(string(b)))
		return true
	}, runobservetest.Wait, 10*time.Millisecond)
	return pid
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', "not a pid: %q", s)
		n = n*10 + int(c-'0')
	}
	return n
}

// alive reports whether process pid exists.
func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// stateStarted is the start recorded in the state of ref's launch k1.
func (r *Runtime) stateStarted(t *testing.T, ref reconcile.RunRef) time.Time {
	t.Helper()
	var l launchRecord
	require.NoError(t, readJSON(r.stateDir(ref, "k1"), launchFile, &l))
	return l.Started
}

// launchRunning launches ref (already running in store) under key in g and
// returns the start observation.
func launchRunning(t *testing.T, g generation, store *runobservetest.Store, ref reconcile.RunRef, key string) ports.RunObserveParams {
	t.Helper()
	require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: key}))
	o := store.Next(t)
	require.Equal(t, reconcile.PodRunning, o.Pod.Phase)
	return o
}

// leftBehind launches ref (running in a new store) under key k1 in a
// runtime on a new work root, waits for its agent to be up and closes the
// runtime, as a crash would, leaving the agent running. It returns the
// root, the store, the closed generation and the agent's pid.
func leftBehind(t *testing.T, ref reconcile.RunRef, running reconcile.State) (string, *runobservetest.Store, generation, int) {
	t.Helper()
	root, store := t.TempDir(), runobservetest.NewStore("acme/suite")
	store.Set(ref, running)
	first := newGeneration(t, root, store, nil)
	launchRunning(t, first, store, ref, "k1")
	pid := agentPid(t, first.rt, ref)
	first.rt.Close()
	require.True(t, alive(pid), "the agent outlives its runtime")
	return root, store, first, pid
}

func TestARestartedRuntimeAdoptsItsAgent(t *testing.T) {
	t.Parallel()
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
	root, store, first, _ := leftBehind(t, ref, reconcile.StandaloneRunning)
	start := first.events.Of("agent.start", ref)[0]

	second := newGeneration(t, root, store, nil)
	require.Equal(t, 1, second.events.Count("agent.adopt", ref))
	o := store.Next(t)
	require.Equal(t, reconcile.PodRunning, o.Pod.Phase, "the adopted agent's start is observed again")
	require.Equal(t, fmt.Sprintf("pid-%d", start.Pid), o.Pod.Name, "it is the same process")
	require.True(t, first.rt.stateStarted(t, ref).Equal(o.Pod.Since), "running since its real start")
	require.NoError(t, second.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: "k1"}))
	require.Zero(t, second.events.Count("agent.start", ref), "the launch retried after the restart starts nothing")
	require.Equal(t, 1, first.events.Count("agent.start", ref))

	require.NoError(t, os.WriteFile(filepath.Join(second.rt.WorkDir(ref), "go"), nil, 0o600))
	o = store.Next(t)
	require.Equal(t, reconcile.PodTerminated, o.Pod.Phase)
	require.Equal(t, 7, *o.Pod.ExitCode, "the agent's real exit code, from its supervisor")
	require.Eventually(t, func() bool { _, err := os.Stat(second.rt.stateDir(ref, "k1")); return os.IsNotExist(err) },
		runobservetest.Wait, 10*time.Millisecond, "a reported exit's state is removed")
}

func TestAnAdoptedAgentIsReleasedLikeALaunchedOne(t *testing.T) {
	t.Parallel()
	ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "a-1"}
	root, store, _, pid := leftBehind(t, ref, reconcile.AgentRunning)

	second := newGeneration(t, root, store, nil)
	require.Equal(t, reconcile.PodRunning, store.Next(t).Pod.Phase)
	require.NoError(t, second.rt.AgentRelease(t.Context(), ref, "r1"))
	require.Eventually(t, func() bool { return !alive(pid) }, runobservetest.Wait, 10*time.Millisecond)
	_, err := os.Stat(filepath.Join(second.rt.WorkDir(ref), "got-term"))
	require.NoError(t, err, "the adopted agent got SIGTERM")
	require.Eventually(t, func() bool { _, err := os.Stat(second.rt.stateDir(ref, "k1")); return os.IsNotExist(err) },
		runobservetest.Wait, 10*time.Millisecond, "a released launch's state is removed once it ended")
	require.Equal(t, 1, second.events.Count("agent.release", ref))
}

func TestAnAgentThatEndedUnwatchedReportsItsExit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, rt *Runtime, ref reconcile.RunRef, pid int)
		want func(t *testing.T, p *reconcile.Pod)
	}{
		{"exit", func(t *testing.T, rt *Runtime, ref reconcile.RunRef, _ int) {
			require.NoError(t, os.WriteFile(filepath.Join(rt.WorkDir(ref), "go"), nil, 0o600))
			require.Eventually(t, func() bool { return exists(rt.stateDir(ref, "k1"), exitFile) }, runobservetest.Wait, 10*time.Millisecond)
		}, func(t *testing.T, p *reconcile.Pod) {
			require.Equal(t, reconcile.PodTerminated, p.Phase)
			require.Equal(t, 7, *p.ExitCode)
		}},
		{"supervisor killed", func(t *testing.T, rt *Runtime, ref reconcile.RunRef, pid int) {
			pgid, err := syscall.Getpgid(pid)
			require.NoError(t, err)
			require.NoError(t, syscall.Kill(-pgid, syscall.SIGKILL))
			require.Eventually(t, func() bool { return !supervised(rt.stateDir(ref, "k1")) }, runobservetest.Wait, 10*time.Millisecond)
		}, func(t *testing.T, p *reconcile.Pod) {
			require.Equal(t, reconcile.PodError, p.Phase, "no exit status: the agent is lost")
			require.Nil(t, p.ExitCode)
			require.Contains(t, p.LastError, "without recording an exit status")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
			root, store, first, pid := leftBehind(t, ref, reconcile.StandaloneRunning)
			tc.end(t, first.rt, ref, pid)

			newGeneration(t, root, store, nil)
			require.Equal(t, reconcile.PodRunning, store.Next(t).Pod.Phase)
			o := store.Next(t)
			tc.want(t, o.Pod)
		})
	}
}

func TestARunTheStoreDoesNotKnowIsNotAdopted(t *testing.T) {
	t.Parallel()
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
	root, store, first, pid := leftBehind(t, ref, reconcile.StandaloneRunning)
	store.Delete(ref)
	second := newGeneration(t, root, store, nil)
	// No runtime will end it: the test does, before the runtimes' cleanups.
	t.Cleanup(func() { _ = os.WriteFile(filepath.Join(first.rt.WorkDir(ref), "go"), nil, 0o600) })
	require.Zero(t, second.events.Count("agent.adopt", ref))
	require.Equal(t, 1, second.events.Count("agent.not_adopted", ref))
	require.True(t, alive(pid), "another daemon's agent is left alone")
}

func TestTheRecordOfKeysIsBounded(t *testing.T) {
	t.Parallel()
	root, store := t.TempDir(), runobservetest.NewStore("acme/suite")
	g := newGeneration(t, root, store, func(c *Config) { c.Keys = 3; c.Args = []string{"-c", "exit 0"} })
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}
	for i, k := range keys {
		require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: k}))
		require.NoError(t, g.rt.AgentRelease(context.Background(), ref, "r"+k))
		require.LessOrEqual(t, g.rt.KeysRecorded(), 6, "after %d launches and releases", i+1)
	}
	require.Equal(t, 6, g.rt.KeysRecorded(), "the newest 3 of each")
	require.Equal(t, len(keys), g.events.Count("agent.start", ref))
	// The newest keys are still idempotent.
	require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: "k7"}))
	require.NoError(t, g.rt.AgentRelease(t.Context(), ref, "rk7"))
	require.Equal(t, len(keys), g.events.Count("agent.start", ref))
	require.Equal(t, len(keys), g.events.Count("agent.release", ref))
}

func TestTheCurrentAgentsKeyOutlivesTheRecord(t *testing.T) {
	t.Parallel()
	root, store := t.TempDir(), runobservetest.NewStore("acme/suite")
	g := newGeneration(t, root, store, func(c *Config) { c.Keys = 1; c.Args = []string{"-c", "exec sleep 60"} })
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s-1"}
	require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: "current"}))
	for _, k := range []string{"x", "y", "z"} { // other runs push the key out of the record
		other := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: k}
		require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: other, Purpose: ports.PurposeRun, IdempotencyKey: k}))
	}
	require.False(t, g.rt.launches.Has("current"))
	require.NoError(t, g.rt.AgentLaunch(t.Context(), ports.AgentLaunchParams{Ref: ref, Purpose: ports.PurposeRun, IdempotencyKey: "current"}))
	require.Equal(t, 1, g.events.Count("agent.start", ref), "the run's current agent keeps its own key")
}
