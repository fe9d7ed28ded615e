package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/adapters/simulated"
	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/internal/runobserve"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

type runBundle struct {
	q      *memory.Queue
	store  *memory.RunStore
	agents *simulated.AgentRuntime
	code   *simulated.CodeHost
	eng    *engine.Engine
	proc   func(k reconcile.RunKind) *runs.Processor
}

func setupRuns(t *testing.T) runBundle {
	t.Helper()
	b := runBundle{
		q:      memory.NewQueue(ports.SystemClock),
		store:  memory.NewRunStore(ports.SystemClock),
		agents: simulated.NewAgentRuntime(),
		code:   simulated.NewCodeHost(),
	}
	b.proc = func(k reconcile.RunKind) *runs.Processor {
		return &runs.Processor{Kind: k, Store: b.store, Queue: b.q, Agents: b.agents, Code: b.code,
			Config: reconcile.DefaultConfig(), Clock: ports.SystemClock, Logger: quietLogger()}
	}
	b.eng = engine.New(b.q, engine.Options{Logger: quietLogger(), PollInterval: 10 * time.Millisecond})
	for _, k := range reconcile.Kinds {
		b.eng.Register(string(k), b.proc(k), engine.KindOptions{Concurrency: 2})
	}
	return b
}

func createAgent(t *testing.T, s ports.RunStore, id string, state reconcile.State, run reconcile.AgentRun) reconcile.RunRef {
	t.Helper()
	body, err := json.Marshal(run)
	require.NoError(t, err)
	ref := reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: id}
	_, err = s.RunCreate(context.Background(), ports.RunRow{Ref: ref, State: state, Body: body,
		Settings: reconcile.Settings{PodLifecycle: reconcile.LifecycleOnDemand}})
	require.NoError(t, err)
	return ref
}

// awaitState polls the store until the run reaches want; the engine offers
// no state-change signal to wait on, so polling the store is the signal.
func awaitState(t *testing.T, s ports.RunStore, ref reconcile.RunRef, want reconcile.State) ports.RunRow {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := s.RunGet(context.Background(), ref)
		require.NoError(t, err)
		if row.State == want {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s stuck in %s, want %s", ref, row.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProcessorDrivesAgentTurn(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "a1", reconcile.AgentIdle, reconcile.AgentRun{PendingMessages: 1})
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))
	run(t, b.eng)

	awaitState(t, b.store, ref, reconcile.AgentProvisioning)
	launches := b.agents.Launches()
	require.Len(t, launches, 1, "one turn launched")
	require.Equal(t, ports.PurposeTurn, launches[0].Purpose)

	// The pod comes up: a producer records it and wakes the run.
	_, err := b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Name: "p", Phase: reconcile.PodReady}})
	require.NoError(t, err)
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))
	awaitState(t, b.store, ref, reconcile.AgentRunning)

	// The turn halts successfully.
	_, err = b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Patch: runobserve.DonePatch(reconcile.KindPersistentAgent)})
	require.NoError(t, err)
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))
	row := awaitState(t, b.store, ref, reconcile.AgentIdle)
	var body reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &body))
	require.Zero(t, body.ConsecutiveFailures)
	require.Len(t, b.agents.Launches(), 1, "no second launch")
}

// TestMessageDuringTurnStartsTheNextTurn: a message sent while a turn runs
// is not counted as read by that turn's end; it starts the next turn. (The
// turn's end used to reset the pending count to 0, losing it.)
func TestMessageDuringTurnStartsTheNextTurn(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ctl := &runs.Control{Store: b.store, Queue: b.q, Clock: ports.SystemClock}
	ref := createAgent(t, b.store, "a-mid-turn", reconcile.AgentIdle, reconcile.AgentRun{PendingMessages: 1})
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))
	run(t, b.eng)
	awaitState(t, b.store, ref, reconcile.AgentProvisioning)
	_, err := b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Name: "p", Phase: reconcile.PodReady}})
	require.NoError(t, err)
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))
	awaitState(t, b.store, ref, reconcile.AgentRunning)

	// A message arrives while the turn runs, then the turn ends.
	_, err = ctl.Message(ctx, ref, "one more thing", "tester")
	require.NoError(t, err)
	_, err = b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Patch: runobserve.DonePatch(reconcile.KindPersistentAgent)})
	require.NoError(t, err)
	require.NoError(t, b.q.WorkEnqueue(ctx, ports.EnqueueParams{Key: runs.Key(ref)}))

	// The next turn starts for it: a second launch, for one message.
	row := awaitState(t, b.store, ref, reconcile.AgentProvisioning)
	require.Len(t, b.agents.Launches(), 2, "the message sent during the turn launched a second one")
	var body reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &body))
	require.Equal(t, 1, body.PendingMessages)
	require.Equal(t, 1, body.TurnMessages)
}

func TestProcessorIntentClearedInSameWrite(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "a2", reconcile.AgentFailed, reconcile.AgentRun{ConsecutiveFailures: 3,
		Reconcile: reconcile.Reconcile{Intent: reconcile.IntentResume}})
	p := b.proc(reconcile.KindPersistentAgent)
	out := p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	require.Equal(t, "requeue", out.String())
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.AgentIdle, row.State)
	require.Equal(t, int64(2), row.Version, "transition, patch and intent clear are one write")
	var body reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &body))
	require.Equal(t, reconcile.IntentNone, body.Reconcile.Intent)
	require.Zero(t, body.ConsecutiveFailures)
}

// TestProcessorRaceAppliesExactlyOnce races many executors on one run
// observed at the same version: exactly one transition is applied, the rest
// are stale, and the side effect happens once.
func TestProcessorRaceAppliesExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "a3", reconcile.AgentQueued, reconcile.AgentRun{PendingMessages: 1})
	const racers = 16
	type result struct {
		outcome string
		err     error
	}
	results := make(chan result, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range racers {
		p := b.proc(reconcile.KindPersistentAgent)
		snap, row, err := p.Snapshot(ctx, ref)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outcome, _, err := p.Apply(ctx, row, snap, reconcile.Decide(snap))
			results <- result{outcome, err}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	counts := map[string]int{}
	for r := range results {
		require.NoError(t, r.err)
		counts[r.outcome]++
	}
	require.Equal(t, 1, counts[runs.OutcomeApplied], "exactly one transition applied: %v", counts)
	require.Equal(t, racers-1, counts[runs.OutcomeStale], "%v", counts)
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.AgentProvisioning, row.State)
	require.Equal(t, int64(2), row.Version)
	require.Len(t, b.agents.Launches(), 1, "the launch is idempotent by key")
}

func TestProcessorReadErrorDefers(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "a4", reconcile.AgentQueued, reconcile.AgentRun{PendingMessages: 1})
	p := b.proc(reconcile.KindPersistentAgent)
	p.Store = failingCounts{b.store}
	out := p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	require.Equal(t, "requeue", out.String())
	require.True(t, out.At().After(time.Now().Add(25*time.Second)), "wakes after the backoff")
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.AgentQueued, row.State, "a read error never transitions")
	var body reconcile.AgentRun
	require.NoError(t, json.Unmarshal(row.Body, &body))
	require.Equal(t, 1, body.Reconcile.Attempts)
	require.False(t, body.Reconcile.BackoffUntil.IsZero())
}

func TestResyncEnqueuesNonTerminalRuns(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	createAgent(t, b.store, "live", reconcile.AgentIdle, reconcile.AgentRun{})
	createAgent(t, b.store, "gone", reconcile.AgentArchived, reconcile.AgentRun{})
	r := &engine.Resync{Queue: b.q, Clock: ports.SystemClock, Logger: quietLogger(),
		Sources: []engine.ResyncSource{runs.NonTerminal(b.store, reconcile.Kinds...)}}
	n, err := r.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = b.q.WorkGet(ctx, runs.Key(reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "live"}))
	require.NoError(t, err)
	_, err = b.q.WorkGet(ctx, runs.Key(reconcile.RunRef{Kind: reconcile.KindPersistentAgent, ID: "gone"}))
	require.ErrorIs(t, err, ports.ErrNotFound)
}

// failingCounts is a store whose capacity read fails.
type failingCounts struct{ ports.RunStore }

func (failingCounts) RunCounts(context.Context, string) (ports.RunCounts, error) {
	return ports.RunCounts{}, context.DeadlineExceeded
}

// TestProcessorLaunchForgetsOldPod: a retried standalone run must not be
// judged by the pod of its failed attempt.
func TestProcessorLaunchForgetsOldPod(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	body, err := json.Marshal(reconcile.StandaloneRun{MaxRetries: 3})
	require.NoError(t, err)
	ref := reconcile.RunRef{Kind: reconcile.KindStandalone, ID: "s1"}
	_, err = b.store.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.StandaloneQueued, Body: body})
	require.NoError(t, err)
	code := 1
	_, err = b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, Pod: &reconcile.Pod{Name: "old", Phase: reconcile.PodTerminated, ExitCode: &code}})
	require.NoError(t, err)

	p := b.proc(reconcile.KindStandalone)
	p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.StandaloneRunning, row.State)
	require.Nil(t, row.Pod, "the launch forgets the old pod in the same write")
	p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	row, err = b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, reconcile.StandaloneRunning, row.State, "a fresh attempt waits for its pod")
	require.Len(t, b.agents.Launches(), 1)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) records(t *testing.T) []map[string]json.RawMessage {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]json.RawMessage
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		var rec map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(line, &rec), "%s", line)
		out = append(out, rec)
	}
	return out
}

// TestProcessorLogsDecisionAndSnapshot: every pass logs
// reconcile.decision with kind, id, action, reason, outcome and duration;
// at debug level the snapshot it logs replays (as `reconciler decide` reads
// it) to the same decision.
func TestProcessorLogsDecisionAndSnapshot(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "logged", reconcile.AgentQueued, reconcile.AgentRun{PendingMessages: 1})
	var sink syncBuffer
	p := b.proc(reconcile.KindPersistentAgent)
	p.Logger = slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelDebug}))

	p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1, EventTime: time.Now()})

	var snapshot, decision map[string]json.RawMessage
	for _, rec := range sink.records(t) {
		switch string(rec["msg"]) {
		case `"reconcile.snapshot"`:
			snapshot = rec
		case `"reconcile.decision"`:
			decision = rec
		}
	}
	require.NotNil(t, decision, "a reconcile.decision record")
	for _, k := range []string{"kind", "id", "action", "reason", "outcome", "duration"} {
		require.Contains(t, decision, k)
	}
	str := func(raw json.RawMessage) string {
		var s string
		require.NoError(t, json.Unmarshal(raw, &s))
		return s
	}
	require.Equal(t, string(ref.Kind), str(decision["kind"]))
	require.Equal(t, ref.ID, str(decision["id"]))
	require.Equal(t, runs.OutcomeApplied, str(decision["outcome"]))

	require.NotNil(t, snapshot, "a reconcile.snapshot record at debug level")
	snap, err := reconcile.DecodeSnapshot(snapshot["snapshot"])
	require.NoError(t, err, "the logged snapshot is in the format decide reads")
	replayed := reconcile.Decide(snap)
	require.Equal(t, str(decision["action"]), string(replayed.Type()))
	require.Equal(t, str(decision["reason"]), replayed.Why())
}

// TestProcessorResumeLaunchesOnce: an automatic resume moves the run
// back to queued without launching; the one launch is the move out of
// queued, and it resumes the agent on the trigger.
func TestProcessorResumeLaunchesOnce(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	pr := reconcile.PullRequest{URL: "https://git.example.com/o/r/pull/3", Number: 3, State: reconcile.PROpen,
		Checks: reconcile.ChecksPending, Review: reconcile.ReviewNone, HeadSHA: "abc"}
	body, err := json.Marshal(reconcile.RepoRun{PR: reconcile.PRFields{URL: pr.URL, Number: pr.Number, State: pr.State,
		Checks: pr.Checks, Review: pr.Review, HeadSHA: pr.HeadSHA}})
	require.NoError(t, err)
	ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: "resume-1"}
	_, err = b.store.RunCreate(ctx, ports.RunRow{Ref: ref, State: reconcile.RepoPROpened, Repo: "o/r", Body: body,
		Settings: reconcile.Settings{AutoResume: true}})
	require.NoError(t, err)
	pr.Checks = reconcile.ChecksFailing
	_, err = b.store.RunObserve(ctx, ports.RunObserveParams{Ref: ref, PR: &pr})
	require.NoError(t, err)

	p := b.proc(reconcile.KindRepo)
	var states []reconcile.State
	for range 3 {
		p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
		row, err := b.store.RunGet(ctx, ref)
		require.NoError(t, err)
		states = append(states, row.State)
	}
	require.Equal(t, []reconcile.State{reconcile.RepoQueued, reconcile.RepoProvisioning, reconcile.RepoProvisioning}, states)
	launches := b.agents.Launches()
	require.Len(t, launches, 1, "a resume launches the agent exactly once")
	require.Equal(t, ports.PurposeResume, launches[0].Purpose)
	require.Equal(t, "ci-failing", launches[0].Trigger)
}

// TestProcessorPauseReleasesPod: pausing a running persistent agent lets
// its pod go before the move is written, and archiving an idle agent that
// holds a pod does too.
func TestProcessorPauseReleasesPod(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	running := createAgent(t, b.store, "p1", reconcile.AgentRunning, reconcile.AgentRun{TurnStartedAt: time.Now(),
		Reconcile: reconcile.Reconcile{Intent: reconcile.IntentPause}})
	_, err := b.store.RunObserve(ctx, ports.RunObserveParams{Ref: running, Pod: &reconcile.Pod{Name: "p", Phase: reconcile.PodRunning}})
	require.NoError(t, err)
	held := createAgent(t, b.store, "p2", reconcile.AgentIdle, reconcile.AgentRun{PodHeld: true,
		Reconcile: reconcile.Reconcile{Intent: reconcile.IntentArchive}})
	idle := createAgent(t, b.store, "p3", reconcile.AgentIdle, reconcile.AgentRun{
		Reconcile: reconcile.Reconcile{Intent: reconcile.IntentPause}})

	p := b.proc(reconcile.KindPersistentAgent)
	for _, ref := range []reconcile.RunRef{running, held, idle} {
		p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1})
	}
	for ref, want := range map[reconcile.RunRef]reconcile.State{running: reconcile.AgentPaused, held: reconcile.AgentArchived, idle: reconcile.AgentPaused} {
		row, err := b.store.RunGet(ctx, ref)
		require.NoError(t, err)
		require.Equal(t, want, row.State, "%s", ref)
		var body reconcile.AgentRun
		require.NoError(t, json.Unmarshal(row.Body, &body))
		require.False(t, body.PodHeld, "%s holds no pod after the release", ref)
	}
	require.ElementsMatch(t, []reconcile.RunRef{running, held}, b.agents.Releases(), "only agents with a pod are released")
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// run starts the engine until the test ends.
func run(t *testing.T, eng *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("engine did not stop")
		}
	})
}

// TestProcessorRecordsDecisions: every applied write records its decision
// (action, reason, move) in the run's history, newest first; a pass that
// writes nothing records nothing.
func TestProcessorRecordsDecisions(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	ref := createAgent(t, b.store, "a3", reconcile.AgentFailed, reconcile.AgentRun{ConsecutiveFailures: 3,
		Reconcile: reconcile.Reconcile{Intent: reconcile.IntentResume}})
	p := b.proc(reconcile.KindPersistentAgent)
	p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1}) // failed → idle (intent-resume)
	p.Process(ctx, engine.Item{Key: runs.Key(ref), Attempt: 1}) // idle, nothing pending: no write
	got, err := b.store.RunDecisions(ctx, ref, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "transition", got[0].Action)
	require.Equal(t, "intent-resume", got[0].Reason)
	require.Equal(t, reconcile.AgentFailed, got[0].From)
	require.Equal(t, reconcile.AgentIdle, got[0].To)
	row, err := b.store.RunGet(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, row.Version, got[0].Version, "stamped with the version its write produced")
}

// TestProcessorWakesDependentsWhenARunFinishes: the pass that moves a repo
// run into a terminal state enqueues the runs waiting on it (and only
// those), so they see it at once rather than at the next resync; with the
// engine running, the waiting run then fails as its dependency did.
func TestProcessorWakesDependentsWhenARunFinishes(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	mk := func(id string, st reconcile.State, run reconcile.RepoRun, deps ...string) reconcile.RunRef {
		body, err := json.Marshal(run)
		require.NoError(t, err)
		ref := reconcile.RunRef{Kind: reconcile.KindRepo, ID: id}
		_, err = b.store.RunCreate(ctx, ports.RunRow{Ref: ref, State: st, Body: body, DependsOn: deps})
		require.NoError(t, err)
		return ref
	}
	parent := mk("parent", reconcile.RepoQueued, reconcile.RepoRun{Reconcile: reconcile.Reconcile{Intent: reconcile.IntentCancel}})
	child := mk("child", reconcile.RepoWaitingOnDeps, reconcile.RepoRun{}, "parent")
	other := mk("other", reconcile.RepoWaitingOnDeps, reconcile.RepoRun{}, "someone-else")

	out := b.proc(reconcile.KindRepo).Process(ctx, engine.Item{Key: runs.Key(parent), Attempt: 1})
	require.Equal(t, "done", out.String())
	_, err := b.q.WorkGet(ctx, runs.Key(child))
	require.NoError(t, err, "the dependent is enqueued by the pass that finished its dependency")
	_, err = b.q.WorkGet(ctx, runs.Key(other))
	require.ErrorIs(t, err, ports.ErrNotFound, "a run waiting on something else is not woken")

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = b.eng.Run(runCtx) }()
	awaitState(t, b.store, child, reconcile.RepoFailed)
}
