package porttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// TxWorld is what the Transactor suite runs on: a transactor and the
// release store and queue whose writes it makes all-or-nothing.
type TxWorld struct {
	Tx    ports.Transactor
	Store ports.ReleaseStore
	Queue ports.Queue
	// Audit, when set, is the audit log whose appends join the
	// transaction; the suite then checks that they do.
	Audit ports.AuditLog
}

// TxFactory returns an empty world whose store and queue stamp writes
// with clock; it is called once per subtest, and subtests run in parallel.
type TxFactory func(t *testing.T, clock ports.Clock) TxWorld

// Transactor is the conformance suite of ports.Transactor: every invariant
// of its doc comment, over writes of every part of the release store and
// queue enqueues.
func Transactor(t *testing.T, newWorld TxFactory) {
	t.Helper()
	setup := func(t *testing.T) (*testing.T, *txEnv) {
		t.Helper()
		t.Parallel()
		clock := NewFakeClock(relT0)
		w := newWorld(t, clock)
		e := &txEnv{TxWorld: w, rel: &relEnv{ctx: t.Context(), s: w.Store, clock: clock}}
		relWorld(t, e.rel)
		return t, e
	}
	t.Run("CommitsTogether", func(t *testing.T) { txCommits(setup(t)) })
	t.Run("ErrorWritesNothing", func(t *testing.T) { txErrorWritesNothing(setup(t)) })
	t.Run("ConflictAbortsEverything", func(t *testing.T) { txConflictAborts(setup(t)) })
	t.Run("PanicWritesNothing", func(t *testing.T) { txPanicWritesNothing(setup(t)) })
	t.Run("NestedJoins", func(t *testing.T) { txNested(setup(t)) })
	t.Run("NestedErrorUndoesItsOwn", func(t *testing.T) { txNestedError(setup(t)) })
	t.Run("AuditInTheWritesCommit", func(t *testing.T) {
		t, e := setup(t)
		if e.Audit == nil {
			t.Skip("no audit log in this world")
		}
		txAudit(t, e)
	})
	t.Run("OthersSeeAllOrNothing", func(t *testing.T) { txAtomicToOthers(setup(t)) })
	t.Run("ConcurrentConflict", func(t *testing.T) { txConcurrentConflict(setup(t)) })
}

// txEnv is one subtest's world, with the release fixtures (relWorld) stored.
type txEnv struct {
	TxWorld
	rel *relEnv
}

// txItem is the queue item the suite's transactions enqueue.
var txItem = ports.WorkKey{Kind: "tx-test", ScopeType: "deployment", ScopeID: "d-new"}

// txWriteAll writes, through ctx, to every part of the release store and
// the queue: new objects of every kind (a new system with a deployment and
// an environment, a resource, a job agent, a policy), an update of
// deployment d1, the delete of resource r3, targets of the new system, a
// version of d1 with an approval, a release of it with its desired state,
// a job, and an enqueue. It returns the first error.
func txWriteAll(ctx context.Context, w TxWorld) error {
	s := w.Store
	steps := []func() error{
		func() error {
			_, err := s.Systems().Put(ctx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "New"}, 0)
			return err
		},
		func() error {
			_, err := s.JobAgents().Put(ctx, release.JobAgent{ID: "agent-new", Name: "New agent", Type: "test"}, 0)
			return err
		},
		func() error {
			_, err := s.Deployments().Put(ctx, release.Deployment{ID: "d-new", SystemID: "sys-new", Name: "New", Slug: "d-new",
				JobAgentID: "agent-new", ResourceSelector: relSelectorAllMatched}, 0)
			return err
		},
		func() error {
			_, err := s.Environments().Put(ctx, release.Environment{ID: "e-new", SystemID: "sys-new", Name: "New",
				ResourceSelector: relSelectorAllMatched}, 0)
			return err
		},
		func() error {
			_, err := s.Resources().Put(ctx, release.Resource{ID: "r-new", WorkspaceID: relWS, Kind: "Cluster", Identifier: "id-r-new", Name: "New"}, 0)
			return err
		},
		func() error {
			d, err := s.Deployments().Get(ctx, relD1)
			if err != nil {
				return err
			}
			d.Value.Name = "Renamed in a transaction"
			_, err = s.Deployments().Put(ctx, d.Value, d.Version)
			return err
		},
		func() error {
			r, err := s.Resources().Get(ctx, relR3)
			if err != nil {
				return err
			}
			return s.Resources().Delete(ctx, relR3, r.Version)
		},
		func() error {
			_, err := s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: "sys-new"},
				Targets: []release.ReleaseTarget{tgt("d-new", "e-new", relR1), tgt("d-new", "e-new", "r-new")}})
			return err
		},
		func() error {
			_, err := s.TargetsReplace(ctx, ports.TargetsReplaceParams{Scope: ports.TargetScope{SystemID: relSys1},
				Targets: []release.ReleaseTarget{tgt(relD1, relE1, relR1)}})
			return err
		},
		func() error {
			return s.VersionCreate(ctx, release.DeploymentVersion{ID: "v-new", DeploymentID: relD1, Tag: "v-new",
				Status: release.VersionReady, CreatedAt: relAt(1)})
		},
		func() error { return s.VersionUpdateStatus(ctx, "v-new", release.VersionPaused) },
		func() error {
			_, err := s.ApprovalAdd(ctx, release.Approval{VersionID: "v-new", EnvironmentID: relE1, User: "ann", ApprovedAt: relAt(2)})
			return err
		},
		func() error {
			return s.PolicySkipPut(ctx, release.PolicySkip{ID: "skip-new", VersionID: "v-new", RuleID: release.ForceDeployRule,
				Reason: "tx", CreatedBy: "ann", EnvironmentID: relE1})
		},
		func() error {
			r := release.NewRelease(tgt(relD1, relE1, relR1), "v-new", nil, time.Time{})
			if _, _, err := s.ReleaseUpsert(ctx, r); err != nil {
				return err
			}
			if _, err := s.DesiredSet(ctx, ports.DesiredRelease{Target: r.Target, ReleaseID: r.ID}); err != nil {
				return err
			}
			_, _, err := s.JobCreate(ctx, ports.JobCreateParams{IdempotencyKey: ports.JobKey(r.ID, 1), Job: release.Job{
				ID: "job-new", ReleaseID: r.ID, TargetKey: r.Target.Key(), JobAgentID: relAgent,
				Status: release.JobPending, CreatedAt: relAt(3)}})
			if err != nil {
				return err
			}
			// A terminal job: the progression summary counts it.
			_, _, err = s.JobCreate(ctx, ports.JobCreateParams{IdempotencyKey: ports.JobKey(r.ID, 2), Job: release.Job{
				ID: "job-new-done", ReleaseID: r.ID, TargetKey: r.Target.Key(), JobAgentID: relAgent,
				Status: release.JobSuccessful, CreatedAt: relAt(4), CompletedAt: relAt(5)}})
			return err
		},
		func() error { return w.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: txItem}) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
	}
	return nil
}

// txState is everything txWriteAll can change, as JSON, read outside any
// transaction.
func txState(t *testing.T, e *txEnv) string {
	t.Helper()
	ctx, s := e.rel.ctx, e.Store
	out := map[string]any{}
	read := func(name string, v any, err error) {
		t.Helper()
		if errors.Is(err, ports.ErrNotFound) {
			out[name] = "not found"
			return
		}
		require.NoError(t, err, name)
		out[name] = v
	}
	all := func(name string, v any, err error) { t.Helper(); require.NoError(t, err, name); out[name] = v }
	txList(t, out, "workspaces", s.Workspaces())
	txList(t, out, "systems", s.Systems())
	txList(t, out, "deployments", s.Deployments())
	txList(t, out, "environments", s.Environments())
	txList(t, out, "resources", s.Resources())
	txList(t, out, "agents", s.JobAgents())
	ts, err := s.TargetList(ctx, ports.TargetListParams{})
	all("targets", ts, err)
	v, err := s.VersionGet(ctx, "v-new")
	read("version", v, err)
	aps, err := s.ApprovalList(ctx, "v-new", "")
	all("approvals", aps, err)
	sks, err := s.PolicySkipList(ctx, "v-new")
	all("skips", sks, err)
	d, err := s.DesiredGet(ctx, tgt(relD1, relE1, relR1))
	read("desired", d, err)
	j, err := s.JobGet(ctx, "job-new")
	read("job", j, err)
	jobs, err := s.JobsByTarget(ctx, tgt(relD1, relE1, relR1), 0)
	all("jobs of the target", jobs, err)
	counts, err := s.JobsActiveCount(ctx, tgt(relD1, relE1, relR1))
	all("active counts", counts, err)
	sum, err := s.ProgressionSummary(ctx, ports.ProgressionSummaryParams{DeploymentID: relD1, EnvironmentID: relE1, VersionID: "v-new"})
	all("progression", relNormSummary(sum), err)
	st, err := s.ScopeTargets(ctx, ports.ScopeTargetsParams{DeploymentID: relD1, EnvironmentID: relE1})
	all("scope targets", st.Targets, err) // not the generation: a rolled back write may use one up
	it, err := e.Queue.WorkGet(ctx, txItem)
	if err == nil {
		out["queue"] = it.Key // times are the store's, not the suite's
	} else {
		read("queue", nil, err)
	}
	b, err := json.MarshalIndent(out, "", " ")
	require.NoError(t, err)
	return string(b)
}

// txList adds every object of objs to out under name.
func txList[T any](t *testing.T, out map[string]any, name string, objs ports.Objects[T]) {
	t.Helper()
	all, err := ports.ListAll(t.Context(), objs, "")
	require.NoError(t, err, name)
	out[name] = all
}

// txCommits: writes to every part commit together; inside fn they are read
// back through its context.
func txCommits(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	before := txState(t, e)
	err := e.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := txWriteAll(ctx, e.TxWorld); err != nil {
			return err
		}
		d, err := e.Store.Deployments().Get(ctx, "d-new")
		require.NoError(t, err, "fn reads its own write")
		require.Equal(t, "sys-new", d.Value.SystemID)
		_, err = e.Store.Resources().Get(ctx, relR3)
		require.ErrorIs(t, err, ports.ErrNotFound, "fn reads its own delete")
		ts, err := e.Store.TargetList(ctx, ports.TargetListParams{Scope: ports.TargetScope{SystemID: "sys-new"}})
		require.NoError(t, err)
		require.Len(t, ts, 2)
		return nil
	})
	require.NoError(t, err)
	after := txState(t, e)
	require.NotEqual(t, before, after)
	_, err = e.Store.Systems().Get(ctx, "sys-new")
	require.NoError(t, err)
	_, err = e.Store.Resources().Get(ctx, relR3)
	require.ErrorIs(t, err, ports.ErrNotFound)
	d, err := e.Store.Deployments().Get(ctx, relD1)
	require.NoError(t, err)
	require.Equal(t, "Renamed in a transaction", d.Value.Name)
	require.Equal(t, int64(2), d.Version)
	v, err := e.Store.VersionGet(ctx, "v-new")
	require.NoError(t, err)
	require.Equal(t, release.VersionPaused, v.Status)
	j, err := e.Store.JobGet(ctx, "job-new")
	require.NoError(t, err)
	require.Equal(t, release.JobPending, j.Status)
	sum, err := e.Store.ProgressionSummary(ctx, ports.ProgressionSummaryParams{DeploymentID: relD1, EnvironmentID: relE1, VersionID: "v-new"})
	require.NoError(t, err)
	require.Equal(t, []policy.ProgressionOutcome{{Status: release.JobSuccessful, Targets: 1, LatestAt: relNorm(relAt(5))}}, sum.Outcomes, "the terminal job counts")
	it, err := e.Queue.WorkGet(ctx, txItem)
	require.NoError(t, err, "the enqueue committed")
	require.Equal(t, ports.WorkPending, it.State)
}

// txErrorWritesNothing: fn's error is returned as it is and nothing of
// what fn wrote remains, in any part; the same writes then commit.
func txErrorWritesNothing(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	before := txState(t, e)
	boom := errors.New("boom")
	err := e.Tx.InTx(ctx, func(ctx context.Context) error {
		if err := txWriteAll(ctx, e.TxWorld); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, before, txState(t, e), "a failed transaction leaves everything as it was")
	// The store is usable and the same writes succeed afterwards.
	require.NoError(t, e.Tx.InTx(ctx, func(ctx context.Context) error { return txWriteAll(ctx, e.TxWorld) }))
	require.NotEqual(t, before, txState(t, e))
}

// txConflictAborts: a compare-and-swap conflict inside fn, returned, is
// InTx's error (errors.Is ErrConflict) and the writes before it are gone.
func txConflictAborts(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	before := txState(t, e)
	err := e.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := e.Store.Systems().Put(ctx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "New"}, 0); err != nil {
			return err
		}
		if err := e.Queue.WorkEnqueue(ctx, ports.EnqueueParams{Key: txItem}); err != nil {
			return err
		}
		_, err := e.Store.Workspaces().Put(ctx, release.Workspace{ID: relWS, Name: "stale"}, 7)
		return err
	})
	require.ErrorIs(t, err, ports.ErrConflict)
	require.Equal(t, before, txState(t, e))

	// A create of an existing id is a conflict too.
	err = e.Tx.InTx(ctx, func(ctx context.Context) error {
		if _, err := e.Store.Systems().Put(ctx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "New"}, 0); err != nil {
			return err
		}
		_, err := e.Store.Deployments().Put(ctx, release.Deployment{ID: relD1, SystemID: relSys1, Name: "dup", Slug: "dup"}, 0)
		return err
	})
	require.ErrorIs(t, err, ports.ErrConflict)
	require.Equal(t, before, txState(t, e))
}

// txPanicWritesNothing: a panic in fn goes on, and nothing fn wrote
// remains; the store stays usable.
func txPanicWritesNothing(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	before := txState(t, e)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		_ = e.Tx.InTx(ctx, func(ctx context.Context) error {
			require.NoError(t, txWriteAll(ctx, e.TxWorld))
			panic("boom")
		})
	}()
	require.Equal(t, before, txState(t, e))
	_, err := e.Store.Systems().Put(ctx, release.System{ID: "sys-after", WorkspaceID: relWS, Name: "After"}, 0)
	require.NoError(t, err, "the store is usable after the panic")
}

// txNested: an InTx inside a transaction joins it: its writes go with the
// outer transaction's outcome.
func txNested(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	before := txState(t, e)
	boom := errors.New("outer fails")
	err := e.Tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, e.Tx.InTx(ctx, func(ctx context.Context) error { return txWriteAll(ctx, e.TxWorld) }))
		_, err := e.Store.Systems().Get(ctx, "sys-new")
		require.NoError(t, err, "the inner write is seen by the outer transaction")
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, before, txState(t, e), "the inner transaction did not commit on its own")

	require.NoError(t, e.Tx.InTx(ctx, func(ctx context.Context) error {
		return e.Tx.InTx(ctx, func(ctx context.Context) error { return txWriteAll(ctx, e.TxWorld) })
	}))
	_, err = e.Store.Systems().Get(ctx, "sys-new")
	require.NoError(t, err)
	_, err = e.Queue.WorkGet(ctx, txItem)
	require.NoError(t, err)
}

// txNestedError: a nested InTx whose fn fails undoes its own writes, even
// after a statement that failed, and the enclosing transaction goes on and
// commits the rest.
func txNestedError(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	boom := errors.New("inner fails")
	require.NoError(t, e.Tx.InTx(ctx, func(ctx context.Context) error {
		err := e.Tx.InTx(ctx, func(ctx context.Context) error {
			if _, err := e.Store.Systems().Put(ctx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "New"}, 0); err != nil {
				return err
			}
			if _, err := e.Store.Systems().Put(ctx, release.System{ID: relSys1, WorkspaceID: relWS, Name: "Again"}, 0); err == nil {
				return errors.New("a second create of an existing system succeeded")
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		_, err = e.Store.Systems().Get(ctx, "sys-new")
		require.ErrorIs(t, err, ports.ErrNotFound, "the failed nested transaction's write is undone at once")
		_, err = e.Store.Systems().Put(ctx, release.System{ID: "sys-two", WorkspaceID: relWS, Name: "Two"}, 0)
		return err
	}))
	_, err := e.Store.Systems().Get(ctx, "sys-new")
	require.ErrorIs(t, err, ports.ErrNotFound)
	_, err = e.Store.Systems().Get(ctx, "sys-two")
	require.NoError(t, err, "the enclosing transaction committed the rest")
}

// txAudit: an audit entry appended inside a transaction commits with its
// write and only then becomes visible; a transaction that fails after the
// append (the write's failure) leaves neither the write nor the entry.
func txAudit(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	entry := func(id string) ports.AuditEntry {
		return ports.AuditEntry{At: relAt(3), Actor: "ann", Action: "putSystem", Method: "PUT", Path: "/systems/" + id,
			Kind: "systems", ID: id, Summary: "created system " + id, Status: 201}
	}
	entries := func(id string) []ports.AuditEntry {
		t.Helper()
		list, err := e.Audit.AuditList(ctx, ports.AuditListParams{Kind: "systems", ID: id})
		require.NoError(t, err)
		return list
	}
	boom := errors.New("the write fails after the audit insert")
	err := e.Tx.InTx(ctx, func(txCtx context.Context) error {
		if _, err := e.Store.Systems().Put(txCtx, release.System{ID: "sys-failed", WorkspaceID: relWS, Name: "Failed"}, 0); err != nil {
			return err
		}
		if _, err := e.Audit.AuditAppend(txCtx, entry("sys-failed")); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, entries("sys-failed"), "a failed write leaves no audit entry")
	_, err = e.Store.Systems().Get(ctx, "sys-failed")
	require.ErrorIs(t, err, ports.ErrNotFound)

	require.NoError(t, e.Tx.InTx(ctx, func(txCtx context.Context) error {
		if _, err := e.Store.Systems().Put(txCtx, release.System{ID: "sys-new", WorkspaceID: relWS, Name: "New"}, 0); err != nil {
			return err
		}
		if _, err := e.Audit.AuditAppend(txCtx, entry("sys-new")); err != nil {
			return err
		}
		require.Empty(t, entries("sys-new"), "others see the entry only with the commit")
		return nil
	}))
	got := entries("sys-new")
	require.Len(t, got, 1, "a write that succeeds leaves exactly one entry")
	require.Equal(t, "created system sys-new", got[0].Summary)
	require.Positive(t, got[0].Seq)
	_, err = e.Store.Systems().Get(ctx, "sys-new")
	require.NoError(t, err)
}

// txAtomicToOthers: a reader outside the transactions never sees part of
// one: each transaction creates two workspaces, and every listing (one
// read) holds an odd number of them never.
func txAtomicToOthers(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	const txs = 20
	var wg sync.WaitGroup
	done := make(chan struct{})
	var seen []int
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			page, err := e.Store.Workspaces().List(ctx, ports.ListParams{Limit: ports.MaxListLimit})
			if err != nil {
				readErr = err
				return
			}
			seen = append(seen, len(page.Items)-1) // the fixture's ws1 is always there
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for i := range txs {
		require.NoError(t, e.Tx.InTx(ctx, func(ctx context.Context) error {
			for _, id := range []string{fmt.Sprintf("a%02d", i), fmt.Sprintf("b%02d", i)} {
				if _, err := e.Store.Workspaces().Put(ctx, release.Workspace{ID: id, Name: id}, 0); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	close(done)
	wg.Wait()
	require.NoError(t, readErr)
	require.NotEmpty(t, seen)
	for _, n := range seen {
		require.Zero(t, n%2, "a reader saw %d of a transaction's workspaces: %v", n, seen)
	}
	page, err := e.Store.Workspaces().List(ctx, ports.ListParams{Limit: ports.MaxListLimit})
	require.NoError(t, err)
	require.Len(t, page.Items, 1+2*txs)
}

// txConcurrentConflict: two transactions update one object from the same
// read; one commits, the other's compare-and-swap fails and takes its
// other writes with it.
func txConcurrentConflict(t *testing.T, e *txEnv) {
	ctx := e.rel.ctx
	ws, err := e.Store.Workspaces().Get(ctx, relWS)
	require.NoError(t, err)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Tx.InTx(ctx, func(ctx context.Context) error {
				sys := fmt.Sprintf("sys-racer-%d", i)
				if _, err := e.Store.Systems().Put(ctx, release.System{ID: sys, WorkspaceID: relWS, Name: sys}, 0); err != nil {
					return err
				}
				next := ws.Value
				next.Name = sys
				_, err := e.Store.Workspaces().Put(ctx, next, ws.Version)
				return err
			})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "both transactions committed")
			winner = i
			continue
		}
		require.ErrorIs(t, err, ports.ErrConflict)
	}
	require.NotEqual(t, -1, winner, "neither transaction committed: %v", errs)
	loser := 1 - winner
	got, err := e.Store.Workspaces().Get(ctx, relWS)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("sys-racer-%d", winner), got.Value.Name)
	_, err = e.Store.Systems().Get(ctx, fmt.Sprintf("sys-racer-%d", winner))
	require.NoError(t, err)
	_, err = e.Store.Systems().Get(ctx, fmt.Sprintf("sys-racer-%d", loser))
	require.ErrorIs(t, err, ports.ErrNotFound, "the loser's other write is gone")
}
