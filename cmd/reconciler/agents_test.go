package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/process"
	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// processWorld is the engine on the in-memory store with the process agent
// runtime running `sh -c script`.
type processWorld struct {
	store *memory.RunStore
	q     *memory.Queue
	procs *process.Runtime
}

func setupProcessWorld(t *testing.T, script string) processWorld {
	t.Helper()
	return setupWorld(t, script, io.Discard, nil)
}

// setupWorld is setupProcessWorld logging to logw, with the code host
// withCode builds over the store and queue (nil: the in-memory recorder).
func setupWorld(t *testing.T, script string, logw io.Writer, withCode func(store ports.RunStore, q ports.Queue, log *slog.Logger) *githubHost) processWorld {
	t.Helper()
	clock := ports.SystemClock
	w := processWorld{store: memory.NewRunStore(clock), q: memory.NewQueue(clock)}
	log := slog.New(slog.NewJSONHandler(logw, nil))
	var code ports.CodeHost = simulated.NewCodeHost()
	var gh *githubHost
	var exit func(context.Context, reconcile.RunRef, string, *ports.RunObserveParams)
	if withCode != nil {
		gh = withCode(w.store, w.q, log)
		code, exit = gh, gh.exit
	}
	procs, err := newProcessRuntime(t.Context(), agentOptions{command: "sh", args: []string{"-c", script}, workRoot: t.TempDir(),
		stopGrace: 5 * time.Second, heartbeat: time.Hour}, w.store, w.q, nil, clock, log, exit)
	require.NoError(t, err)
	w.procs = procs
	eng := engine.New(w.q, engine.Options{Logger: log, PollInterval: 10 * time.Millisecond})
	for _, k := range reconcile.Kinds {
		eng.Register(string(k), &runs.Processor{Kind: k, Store: w.store, Queue: w.q, Agents: procs, Code: code,
			Config: reconcile.DefaultConfig(), Clock: clock, Logger: log}, engine.KindOptions{Concurrency: 2})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	polled := make(chan error, 1)
	if gh != nil {
		go func() { polled <- gh.poller.Run(ctx) }()
	} else {
		polled <- nil
	}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, <-polled)
		procs.Close()
	})
	return w
}

// create stores a run in state and enqueues it.
func (w processWorld) create(t *testing.T, ref reconcile.RunRef, state reconcile.State, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	_, err = w.store.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: state, Body: b, Repo: "o/r"})
	require.NoError(t, err)
	w.wake(t, ref)
}

func (w processWorld) wake(t *testing.T, ref reconcile.RunRef) {
	t.Helper()
	require.NoError(t, w.q.WorkEnqueue(context.Background(), ports.EnqueueParams{Key: runs.Key(ref)}))
}

// await polls the store until the run is in want (and every also holds);
// the store offers no state-change signal to wait on.
func (w processWorld) await(t *testing.T, ref reconcile.RunRef, want reconcile.State, also ...func(ports.RunRow) bool) ports.RunRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := w.store.RunGet(context.Background(), ref)
		require.NoError(t, err)
		ok := row.State == want
		for _, f := range also {
			ok = ok && f(row)
		}
		if ok {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s stuck in %s, want %s", ref, row.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProcessRuntimeRunsStandaloneToCompletion(t *testing.T) {
	t.Parallel()
	w := setupProcessWorld(t, "exit 0")
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "nightly"}
	w.create(t, ref, reconcile.StandaloneQueued, reconcile.StandaloneRun{})
	row := w.await(t, ref, reconcile.StandaloneCompleted)
	require.Equal(t, reconcile.PodTerminated, row.Pod.Phase)
	require.Equal(t, 0, *row.Pod.ExitCode)
}

func TestProcessRuntimeFailsStandaloneOnNonZeroExit(t *testing.T) {
	t.Parallel()
	w := setupProcessWorld(t, "exit 2")
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "broken"}
	w.create(t, ref, reconcile.StandaloneQueued, reconcile.StandaloneRun{})
	row := w.await(t, ref, reconcile.StandaloneFailed)
	require.Equal(t, 2, *row.Pod.ExitCode)
}

func TestProcessRuntimeTakesAnAgentTurn(t *testing.T) {
	t.Parallel()
	w := setupProcessWorld(t, "exit 0")
	ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "helper"}
	w.create(t, ref, reconcile.AgentIdle, reconcile.AgentRun{PendingMessages: 1})
	row := w.await(t, ref, reconcile.AgentIdle, func(r ports.RunRow) bool { return r.Pod != nil })
	var run reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &run))
	require.Zero(t, run.PendingMessages, "the turn consumed the messages")
	require.Zero(t, run.ConsecutiveFailures, "the turn succeeded")
}

func TestProcessRuntimeRepoAgentWithoutPRNeedsAttention(t *testing.T) {
	t.Parallel()
	w := setupProcessWorld(t, "exit 0")
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "task"}
	w.create(t, ref, reconcile.RepoQueued, reconcile.RepoRun{})
	w.await(t, ref, reconcile.RepoNeedsAttention)
}

// TestProcessRuntimeCancelStopsTheAgent: cancelling a running repo run
// makes the kernel release the pod, and the runtime stops the process with
// SIGTERM.
func TestProcessRuntimeCancelStopsTheAgent(t *testing.T) {
	t.Parallel()
	w := setupProcessWorld(t, `trap 'echo bye > stopped; exit 0' TERM; echo up > up; while :; do sleep 0.05; done`)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "long"}
	w.create(t, ref, reconcile.RepoQueued, reconcile.RepoRun{})
	w.await(t, ref, reconcile.RepoRunning)
	// Cancel once the agent has installed its SIGTERM handler.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(w.procs.WorkDir(ref), "up"))
		return err == nil
	}, 30*time.Second, 5*time.Millisecond)
	_, err := w.store.RunObserve(context.Background(), ports.RunObserveParams{Ref: ref, Patch: map[string]any{
		"reconcile": map[string]any{"control_intent": "cancel"}}})
	require.NoError(t, err)
	w.wake(t, ref)
	w.await(t, ref, reconcile.RepoCancelled)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(w.procs.WorkDir(ref), "stopped"))
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the agent got SIGTERM")
}
