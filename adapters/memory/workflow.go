package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// WorkflowStore is the in-memory ports.WorkflowStore. Records are kept as
// JSON, as Postgres keeps them, so reads are copies with the same shapes
// (numbers in free-form maps come back as float64).
type WorkflowStore struct {
	mu        sync.RWMutex
	workflows map[string][]byte
	// templates and matrices hold each workflow's pinned template and
	// matrix as JSON, apart from its record (ports.WorkflowStore); no
	// matrix for a workflow without one.
	templates map[string][]byte
	matrices  map[string][]byte
	versions  map[string]int64
	runs      map[string]map[string][]byte // workflow id → run id → record
	writes    map[string]int64             // workflow id → TaskRun writes (TaskRunWrites)
	inbox     map[string][]ports.TaskRunReport
	seq       int64
	// jobs holds the workflow jobs of pull agents (ports.WorkflowJobs)
	// by id, as JSON.
	jobs map[string][]byte
	// takers are woken when a workflow job is created (WorkflowJobNotify).
	takers wakeSet
	// changes receives workflow.status and taskrun.status changes
	// (SetChanges); nil: none.
	changes *Changes
}

// SetChanges makes the store publish workflow.status and taskrun.status
// changes to c. Call it before first use.
func (s *WorkflowStore) SetChanges(c *Changes) { s.changes = c }

// NewWorkflowStore returns an empty store.
func NewWorkflowStore() *WorkflowStore {
	return &WorkflowStore{workflows: map[string][]byte{}, templates: map[string][]byte{}, matrices: map[string][]byte{}, versions: map[string]int64{}, runs: map[string]map[string][]byte{},
		writes: map[string]int64{}, inbox: map[string][]ports.TaskRunReport{}, jobs: map[string][]byte{}}
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
	if err := ports.ValidateNewWorkflow(&w); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	w.Version = 1
	enc, err := ports.EncodeWorkflow(&w)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.workflows[w.ID]; ok {
		return fmt.Errorf("%s: %w", op, ports.ErrConflict)
	}
	s.workflows[w.ID], s.templates[w.ID], s.versions[w.ID] = enc.Doc, enc.Template, 1
	if enc.Matrix != nil {
		s.matrices[w.ID] = enc.Matrix
	}
	s.runs[w.ID] = map[string][]byte{}
	s.changes.publish(ports.PhaseChange(ports.ChangeWorkflowStatus, w.ID, "", string(w.Phase), time.Now(), nil)...)
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

// WorkflowTemplate reads a workflow's pinned template.
func (s *WorkflowStore) WorkflowTemplate(_ context.Context, id string) (json.RawMessage, error) {
	s.mu.RLock()
	b, ok := s.templates[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get template of workflow %s: %w", id, ports.ErrNotFound)
	}
	return slices.Clone(b), nil
}

// WorkflowMatrix reads a workflow's matrix.
func (s *WorkflowStore) WorkflowMatrix(_ context.Context, id string) (map[string][]any, error) {
	s.mu.RLock()
	_, ok := s.workflows[id]
	b := s.matrices[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get matrix of workflow %s: %w", id, ports.ErrNotFound)
	}
	if b == nil {
		return nil, nil
	}
	m, err := decodeJSON[map[string][]any](b)
	if err != nil {
		return nil, fmt.Errorf("get matrix of workflow %s: %w", id, err)
	}
	return m, nil
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
	w.CreatedAt, w.TemplateName, w.TemplateRevision = stored.CreatedAt, stored.TemplateName, stored.TemplateRevision
	w.Template, w.Matrix = nil, nil // kept apart, never changed
	w.Version = expected + 1
	b, err := release.EncodeText(&w)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	s.workflows[w.ID], s.versions[w.ID] = b, w.Version
	s.changes.publish(ports.PhaseChange(ports.ChangeWorkflowStatus, w.ID, string(stored.Phase), string(w.Phase), time.Now(), nil)...)
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
	var changes []ports.Change
	now := time.Now()
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
		var old string
		if exists {
			var v struct {
				Phase string `json:"phase"`
			}
			_ = json.Unmarshal(cur, &v) // it decoded above
			old = v.Phase
		}
		changes = append(changes, ports.PhaseChange(ports.ChangeTaskRunStatus, workflowID+"/"+r.ID, old, string(r.Phase), now, nil)...)
	}
	for i := range runs {
		stored[runs[i].ID] = docs[i]
	}
	s.writes[workflowID] += int64(len(runs))
	s.changes.publish(changes...)
	return nil
}

// TaskRunWrites counts the workflow's TaskRun writes.
func (s *WorkflowStore) TaskRunWrites(_ context.Context, workflowID string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.workflows[workflowID]; !ok {
		return 0, fmt.Errorf("count task run writes of %s: %w", workflowID, ports.ErrNotFound)
	}
	return s.writes[workflowID], nil
}

// ReportsAdd appends the reports whose TaskRun exists to their inboxes.
func (s *WorkflowStore) ReportsAdd(_ context.Context, reports []ports.TaskRunReport) ([]bool, error) {
	op := fmt.Sprintf("add %d reports", len(reports))
	docs := make([][]byte, len(reports))
	for i := range reports {
		if err := ports.ValidateTaskRunReport(&reports[i]); err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", op, i, err)
		}
		b, err := release.EncodeText(&reports[i])
		if err != nil {
			return nil, fmt.Errorf("%s: report %d: %w", op, i, err)
		}
		docs[i] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stored := make([]bool, len(reports))
	for i := range reports {
		r := &reports[i]
		if _, ok := s.runs[r.WorkflowID][r.TaskRunID]; !ok {
			continue
		}
		rep, err := decodeJSON[ports.TaskRunReport](docs[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		s.seq++
		rep.Seq = s.seq
		s.inbox[r.WorkflowID] = append(s.inbox[r.WorkflowID], rep)
		stored[i] = true
	}
	return stored, nil
}

// Reports lists a workflow's inbox in Seq order.
func (s *WorkflowStore) Reports(_ context.Context, workflowID string) ([]ports.TaskRunReport, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ports.TaskRunReport, len(s.inbox[workflowID]))
	for i, r := range s.inbox[workflowID] {
		out[i] = r
		if r.Outputs != nil {
			b, err := json.Marshal(r.Outputs)
			if err != nil {
				return nil, fmt.Errorf("list reports of %s: %w", workflowID, err)
			}
			if out[i].Outputs, err = decodeJSON[map[string]any](b); err != nil {
				return nil, fmt.Errorf("list reports of %s: %w", workflowID, err)
			}
		}
	}
	return out, nil
}

// ReportsDone removes the workflow's reports of the given Seqs.
func (s *WorkflowStore) ReportsDone(_ context.Context, workflowID string, seqs []int64) error {
	if len(seqs) == 0 {
		return nil
	}
	done := make(map[int64]bool, len(seqs))
	for _, q := range seqs {
		done[q] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.inbox[workflowID][:0]
	for _, r := range s.inbox[workflowID] {
		if !done[r.Seq] {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(s.inbox, workflowID)
		return nil
	}
	s.inbox[workflowID] = kept
	return nil
}
