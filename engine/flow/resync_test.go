package flow_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// TestResyncSourceListsUnfinishedWorkflows: the sweep lists every
// workflow that has not finished, over several pages, and none that has.
func TestResyncSourceListsUnfinishedWorkflows(t *testing.T) {
	t.Parallel()
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, _, clock := setupController(t, open)
			var want []ports.WorkKey
			phases := []workflow.WorkflowPhase{workflow.WorkflowPending, workflow.WorkflowRunning, workflow.WorkflowSucceeded,
				workflow.WorkflowFailed, workflow.WorkflowCancelled}
			for i := range 450 { // more than two pages
				w := ports.WorkflowRecord{ID: "w" + strconv.Itoa(i), Name: "t", TemplateName: "t",
					Template: []byte(`{}`), Phase: phases[i%len(phases)], CreatedAt: clock.Now()}
				require.NoError(t, c.Store.WorkflowCreate(ctx, w))
				if !w.Phase.Terminal() {
					want = append(want, flow.Key(w.ID))
				}
			}
			var got []ports.WorkKey
			require.NoError(t, c.ResyncSource()(ctx, func(k ports.WorkKey) error { got = append(got, k); return nil }))
			require.ElementsMatch(t, want, got)
		})
	}
}
