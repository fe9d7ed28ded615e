package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowStore is the in-memory ports.WorkflowStore. Records are kept as
// JSON, as Postgres keeps them, so reads are copies with the same shapes
// (numbers in free-form maps come back as float64).
type WorkflowStore struct {
	mu        sync.RWMutex
	workflows map[string][]byte
	versions  map[string]int64
	runs      map[string]map[string][]byte // workflow id → run id → record
}

// NewWorkflowStore returns an empty store.
func NewWorkflowStore() *WorkflowStore {
	return &WorkflowStore{workflows: map[string][]byte{}, versions: map[string]int64{}, runs: map[string]map[string][]byte{}}
}

var _ ports.WorkflowStore = (*WorkflowStore)(nil)

func decodeJSON[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}

// WorkflowCreate stores w at version 1.
func (s *WorkflowStore) WorkflowCreate(_ context.Context, w ports.WorkflowRecord) error {
	op := "create workflow " + w.ID
	if err := ports.ValidateWorkflow(&w); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.Version = 1
	b, err := release.EncodeText(&w)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.workflows[w.ID]; ok {
		return fmt.Errorf("%s: %w", op, ports.ErrConflict)
	}
	s.workflows[w.ID], s.versions[w.ID] = b, 1
	s.runs[w.ID] = map[string][]byte{}
	return nil
}

// WorkflowGet reads one workflow.
func (s *WorkflowStore) WorkflowGet(_ context.Context, id string) (ports.WorkflowRecord, error) {
	s.mu.RLock()
	b, ok := s.workflows[id]
	s.mu.RUnlock()
	if !ok {
		return ports.WorkflowRecord{}, fmt.Errorf("get workflow %s: %w", id, ports.ErrNotFound)
	}
	return decodeJSON[ports.WorkflowRecord](b)
}

// WorkflowUpdate writes w at the expected version.
func (s *WorkflowStore) WorkflowUpdate(_ context.Context, w ports.WorkflowRecord, expected int64) (int64, error) {
	op := "update workflow " + w.ID
	if err := ports.ValidateWorkflow(&w); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.workflows[w.ID]
	if !ok {
		return 0, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	if s.versions[w.ID] != expected {
		return 0, fmt.Errorf("%s: expected version %d, stored %d: %w", op, expected, s.versions[w.ID], ports.ErrConflict)
	}
	stored, err := decodeJSON[ports.WorkflowRecord](cur)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	w.Template, w.CreatedAt, w.TemplateName, w.TemplateRevision = stored.Template, stored.CreatedAt, stored.TemplateName, stored.TemplateRevision
	w.Version = expected + 1
	b, err := release.EncodeText(&w)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	s.workflows[w.ID], s.versions[w.ID] = b, w.Version
	return w.Version, nil
}

// WorkflowList lists workflows by id.
func (s *WorkflowStore) WorkflowList(_ context.Context, afterID string, limit int) ([]ports.WorkflowRecord, error) {
	s.mu.RLock()
	ids := make([]string, 0, len(s.workflows))
	for id := range s.workflows {
		if id > afterID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	docs := make([][]byte, len(ids))
	for i, id := range ids {
		docs[i] = s.workflows[id]
	}
	s.mu.RUnlock()
	out := make([]ports.WorkflowRecord, len(docs))
	for i, b := range docs {
		w, err := decodeJSON[ports.WorkflowRecord](b)
		if err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		out[i] = w
	}
	return out, nil
}

// WorkflowsUnfinished lists the unfinished workflows of a trigger by id.
func (s *WorkflowStore) WorkflowsUnfinished(ctx context.Context, triggerKey string) ([]ports.WorkflowRecord, error) {
	all, err := s.WorkflowList(ctx, "", 0)
	if err != nil {
		return nil, err
	}
	out := []ports.WorkflowRecord{}
	for _, w := range all {
		if w.Trigger != nil && w.Trigger.Key == triggerKey && !w.Phase.Terminal() {
			out = append(out, w)
		}
	}
	return out, nil
}

// TaskRunsList lists a workflow's TaskRuns by id.
func (s *WorkflowStore) TaskRunsList(_ context.Context, workflowID string) ([]ports.TaskRunRecord, error) {
	s.mu.RLock()
	runs, ok := s.runs[workflowID]
	docs := make([][]byte, 0, len(runs))
	for _, b := range runs {
		docs = append(docs, b)
	}
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("list task runs of %s: %w", workflowID, ports.ErrNotFound)
	}
	out := make([]ports.TaskRunRecord, len(docs))
	for i, b := range docs {
		r, err := decodeJSON[ports.TaskRunRecord](b)
		if err != nil {
			return nil, fmt.Errorf("list task runs of %s: %w", workflowID, err)
		}
		out[i] = r
	}
	slices.SortFunc(out, func(a, b ports.TaskRunRecord) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// TaskRunGet reads one TaskRun.
func (s *WorkflowStore) TaskRunGet(_ context.Context, workflowID, id string) (ports.TaskRunRecord, error) {
	s.mu.RLock()
	b, ok := s.runs[workflowID][id]
	s.mu.RUnlock()
	if !ok {
		return ports.TaskRunRecord{}, fmt.Errorf("get task run %s/%s: %w", workflowID, id, ports.ErrNotFound)
	}
	return decodeJSON[ports.TaskRunRecord](b)
}

// TaskRunsSave writes the batch atomically.
func (s *WorkflowStore) TaskRunsSave(_ context.Context, workflowID string, runs []ports.TaskRunRecord) error {
	op := fmt.Sprintf("save %d task runs of %s", len(runs), workflowID)
	docs := make([][]byte, len(runs))
	for i := range runs {
		r := runs[i]
		if err := ports.ValidateTaskRun(workflowID, &r); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		r.Version++
		b, err := release.EncodeText(&r)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		docs[i] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.runs[workflowID]
	if !ok {
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	seen := make(map[string]bool, len(runs))
	for i := range runs {
		r := &runs[i]
		if seen[r.ID] {
			return fmt.Errorf("%s: task run %s twice in one batch: %w", op, r.ID, ports.ErrConflict)
		}
		seen[r.ID] = true
		cur, exists := stored[r.ID]
		switch {
		case r.Version == 0 && exists:
			return fmt.Errorf("%s: task run %s exists: %w", op, r.ID, ports.ErrConflict)
		case r.Version > 0 && !exists:
			return fmt.Errorf("%s: task run %s: %w", op, r.ID, ports.ErrNotFound)
		case r.Version > 0:
			var v struct {
				Version int64 `json:"version"`
			}
			if err := json.Unmarshal(cur, &v); err != nil {
				return fmt.Errorf("%s: %w", op, err)
			}
			if v.Version != r.Version {
				return fmt.Errorf("%s: task run %s at version %d, stored %d: %w", op, r.ID, r.Version, v.Version, ports.ErrConflict)
			}
		}
	}
	for i := range runs {
		stored[runs[i].ID] = docs[i]
	}
	return nil
}
