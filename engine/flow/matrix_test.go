package flow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// TestPassesLeaveTheMatrixOut: a workflow fanned out over 1,000 resources
// runs to Succeeded while no pass reads or writes a workflow record that
// grows with its items (the matrix and the template are stored apart from
// it), the matrix is read from the store once for all the passes (the
// controller keeps it), and Status still shows every item and the
// template.
func TestPassesLeaveTheMatrixOut(t *testing.T) {
	t.Parallel()
	const items = 1000
	resources := make([]map[string]any, items)
	for i := range resources {
		resources[i] = map[string]any{"id": fmt.Sprintf("r%04d", i), "name": fmt.Sprintf("cluster-%04d", i), "kind": "Kubernetes",
			"config": map[string]any{"namespace": "a-namespace-long-enough-to-weigh", "replicas": i % 7}}
	}
	tmpl := `{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"fan"},"spec":{
		"parameters":[{"name":"clusters","type":"matrix","source":{"kind":"resource","selector":"true"}}],
		"tasks":[{"name":"run","type":"job","jobAgentRef":"a","config":{"name":"{{matrix.resource.name}}","replicas":"{{matrix.resource.config.replicas}}"},
			"matrix":"{{workflow.parameters.clusters}}","matrixStrategy":{"maxParallel":250}}]}}`
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c, eng, _ := setupController(t, open)
			spy := &recordSpy{WorkflowStore: c.Store}
			c.Store = spy
			useAgent(t, c, "a", instantAgent{c})
			_, err := c.Start(ctx, flow.StartParams{ID: "w", Template: []byte(tmpl), Inputs: workflow.Inputs{Resources: resources}})
			require.NoError(t, err)
			_, err = eng.Drain(ctx)
			require.NoError(t, err)

			st, err := c.Status(ctx, "w")
			require.NoError(t, err)
			require.Equal(t, workflow.WorkflowSucceeded, st.Workflow.Phase, st.Workflow.Message)
			require.Len(t, st.TaskRuns, items)
			require.Len(t, st.Workflow.Matrix["clusters"], items, "Status shows the matrix")
			require.JSONEq(t, tmpl, string(st.Workflow.Template), "and the template")
			r, err := c.Store.TaskRunGet(ctx, "w", "run.999")
			require.NoError(t, err)
			require.Equal(t, map[string]any{"name": "cluster-0999", "replicas": float64(999 % 7)}, r.Config["config"])

			matrix, _ := json.Marshal(st.Workflow.Matrix)
			require.Greater(t, len(matrix), 50_000, "the matrix weighs")
			spy.mu.Lock()
			defer spy.mu.Unlock()
			require.Positive(t, spy.gets)
			require.Positive(t, spy.updates)
			require.Less(t, spy.largestGet, 4096, "a pass's read of the workflow does not grow with its items")
			require.Less(t, spy.largestUpdate, 4096, "a pass's write of the workflow does not grow with its items")
			require.Equal(t, 2, spy.matrixReads, "one read for all the passes, one for Status")
		})
	}
}

// recordSpy measures the workflow records read and written (as JSON) and
// counts matrix reads.
type recordSpy struct {
	ports.WorkflowStore

	mu                        sync.Mutex
	gets, updates             int
	largestGet, largestUpdate int
	matrixReads               int
}

func (s *recordSpy) WorkflowGet(ctx context.Context, id string) (ports.WorkflowRecord, error) {
	w, err := s.WorkflowStore.WorkflowGet(ctx, id)
	b, _ := json.Marshal(w)
	s.mu.Lock()
	s.gets++
	s.largestGet = max(s.largestGet, len(b))
	s.mu.Unlock()
	return w, err
}

func (s *recordSpy) WorkflowUpdate(ctx context.Context, w ports.WorkflowRecord, expected int64) (int64, error) {
	b, _ := json.Marshal(w)
	s.mu.Lock()
	s.updates++
	s.largestUpdate = max(s.largestUpdate, len(b))
	s.mu.Unlock()
	return s.WorkflowStore.WorkflowUpdate(ctx, w, expected)
}

func (s *recordSpy) WorkflowMatrix(ctx context.Context, id string) (map[string][]any, error) {
	s.mu.Lock()
	s.matrixReads++
	s.mu.Unlock()
	return s.WorkflowStore.WorkflowMatrix(ctx, id)
}

// InTx keeps the wrapped store's transactions (ports.Transactor).
func (s *recordSpy) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if tx, ok := s.WorkflowStore.(ports.Transactor); ok {
		return tx.InTx(ctx, fn)
	}
	return fn(ctx)
}
