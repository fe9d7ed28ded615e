package runs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine"
	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// noRuntime is an agent runtime that cannot launch anything.
type noRuntime struct{ ports.AgentRuntime }

func (noRuntime) AgentLaunch(context.Context, ports.AgentLaunchParams) error {
	return errors.New("no agent runtime configured")
}

// TestWaitingReasonIsRecorded: a run whose launch fails records why in its
// decision history, once however often it is retried (issue 29: the cause
// was only in ERROR log lines).
func TestWaitingReasonIsRecorded(t *testing.T) {
	t.Parallel()
	b := setupRuns(t)
	ctx := context.Background()
	c := &runs.Control{Store: b.store, Queue: b.q, Clock: ports.SystemClock}
	row, err := c.Create(ctx, runs.CreateParams{Kind: reconcile.KindStandalone, ID: "s1", Workflow: "nightly"})
	require.NoError(t, err)
	p := b.proc(reconcile.KindStandalone)
	p.Agents = noRuntime{b.agents}
	it := engine.Item{Key: runs.Key(row.Ref)}
	for range 3 {
		p.Process(ctx, it)
	}
	ds, err := b.store.RunDecisions(ctx, row.Ref, 10)
	require.NoError(t, err)
	var waiting []ports.RunDecision
	for _, d := range ds {
		if d.Action == runs.DecisionWaiting {
			waiting = append(waiting, d)
		}
	}
	require.Len(t, waiting, 1, "%+v", ds)
	require.Contains(t, waiting[0].Reason, "no agent runtime configured")
	got, err := b.store.RunGet(ctx, row.Ref)
	require.NoError(t, err)
	require.Equal(t, row.State, got.State, "the run still waits")
}
