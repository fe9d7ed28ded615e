package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// RunStore is an in-memory ports.RunStore. It is goroutine-safe and keeps
// private deep copies of every row, so callers can never mutate stored state
// through a row they passed in or got back. Slot counts are maintained on
// every write, so RunCounts is O(1).
type RunStore struct {
	clock ports.Clock

	mu   sync.RWMutex
	runs map[reconcile.RunKind]*kindRuns
	// global and perRepo count runs holding an agent slot (ports.HoldsSlot).
	global  int
	perRepo map[string]int
	// decisions holds each run's newest decisions, oldest first.
	decisions map[reconcile.RunRef][]ports.RunDecision
	// changes receives run.status changes (SetChanges); nil: none.
	changes *Changes
}

// kindRuns holds the runs of one kind with their ids kept sorted for paging.
type kindRuns struct {
	byID map[string]*ports.RunRow
	ids  []string
}

var _ ports.RunStore = (*RunStore)(nil)

// NewRunStore returns an empty store that stamps rows with clock.
func NewRunStore(clock ports.Clock) *RunStore {
	s := &RunStore{clock: clock, runs: map[reconcile.RunKind]*kindRuns{}, perRepo: map[string]int{},
		decisions: map[reconcile.RunRef][]ports.RunDecision{}}
	for _, k := range reconcile.Kinds {
		s.runs[k] = &kindRuns{byID: map[string]*ports.RunRow{}}
	}
	return s
}

// now reads the clock at the precision every adapter keeps (microseconds,
// UTC), so rows compare equal across adapters.
func (s *RunStore) now() time.Time { return ports.StoredTime(s.clock.Now()) }

// RunCreate inserts row at version 1, stamped with the store's clock.
func (s *RunStore) RunCreate(_ context.Context, row ports.RunRow) (ports.RunRow, error) {
	if err := ports.ValidateRunWrite(row.Ref, row.State, row.Body); err != nil {
		return ports.RunRow{}, fmt.Errorf("create run: %w", err)
	}
	stored := copyRow(&row)
	stored.Version = 1
	stored.Heartbeat = ports.StoredTime(stored.Heartbeat)
	if len(stored.Body) == 0 {
		stored.Body = json.RawMessage(`{}`)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	kr := s.runs[row.Ref.Kind]
	if _, ok := kr.byID[row.Ref.ID]; ok {
		return ports.RunRow{}, fmt.Errorf("create run %s: already exists: %w", row.Ref, ports.ErrConflict)
	}
	now := s.now()
	stored.CreatedAt, stored.UpdatedAt = now, now
	kr.byID[row.Ref.ID] = &stored
	i, _ := slices.BinarySearch(kr.ids, row.Ref.ID)
	kr.ids = slices.Insert(kr.ids, i, row.Ref.ID)
	s.countSlot(&stored, 1)
	s.changes.publish(runChange(row.Ref, "", string(stored.State), now)...)
	return copyRow(&stored), nil
}

// RunGet returns a copy of the stored run, or ErrNotFound.
func (s *RunStore) RunGet(_ context.Context, ref reconcile.RunRef) (ports.RunRow, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, err := s.lookup(ref)
	if err != nil {
		return ports.RunRow{}, fmt.Errorf("get run: %w", err)
	}
	return copyRow(r), nil
}

// RunUpdate writes state and body if ExpectedVersion is the stored version.
func (s *RunStore) RunUpdate(_ context.Context, p ports.RunUpdateParams) (int64, error) {
	if err := ports.ValidateRunWrite(p.Ref, p.State, p.Body); err != nil {
		return 0, fmt.Errorf("update run: %w", err)
	}
	body := slices.Clone(p.Body)
	if len(body) == 0 {
		body = json.RawMessage(`{}`)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(p.Ref)
	if err != nil {
		return 0, fmt.Errorf("update run: %w", err)
	}
	if r.Version != p.ExpectedVersion {
		return 0, fmt.Errorf("update run %s: expected version %d, stored %d: %w", p.Ref, p.ExpectedVersion, r.Version, ports.ErrConflict)
	}
	s.countSlot(r, -1)
	old := r.State
	r.State, r.Body = p.State, body
	if p.ResetPod {
		r.Pod = nil
	}
	if p.Subtasks != nil {
		r.Subtasks = nil
		if len(*p.Subtasks) > 0 {
			r.Subtasks = slices.Clone(*p.Subtasks)
		}
	}
	s.countSlot(r, 1)
	r.Version++
	r.UpdatedAt = s.now()
	if p.Decision != nil {
		d := *p.Decision
		d.Version, d.At = r.Version, r.UpdatedAt
		h := append(s.decisions[p.Ref], d)
		if len(h) > ports.RunDecisionsKept {
			h = slices.Clone(h[len(h)-ports.RunDecisionsKept:])
		}
		s.decisions[p.Ref] = h
	}
	s.changes.publish(runChange(p.Ref, string(old), string(r.State), r.UpdatedAt)...)
	return r.Version, nil
}

// RunDecisions returns up to limit of the run's decisions, newest first.
func (s *RunStore) RunDecisions(_ context.Context, ref reconcile.RunRef, limit int) ([]ports.RunDecision, error) {
	if limit <= 0 || limit > ports.RunDecisionsKept {
		limit = ports.RunDecisionsKept
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, err := s.lookup(ref); err != nil {
		return nil, fmt.Errorf("run decisions: %w", err)
	}
	h := s.decisions[ref]
	out := make([]ports.RunDecision, 0, min(limit, len(h)))
	for i := len(h) - 1; i >= 0 && len(out) < limit; i-- {
		out = append(out, h[i])
	}
	return out, nil
}

// RunObserve records the non-nil observations, merges Patch into the body's
// top-level keys and bumps the version.
func (s *RunStore) RunObserve(_ context.Context, p ports.RunObserveParams) (int64, error) {
	if err := ports.ValidateRunRef(p.Ref); err != nil {
		return 0, fmt.Errorf("observe run: %w", err)
	}
	patch, err := encodePatch(p.Patch)
	if err != nil {
		return 0, fmt.Errorf("observe run %s: %w", p.Ref, err)
	}
	pod, pr := copyPod(p.Pod), copyPR(p.PR)

	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.lookup(p.Ref)
	if err != nil {
		return 0, fmt.Errorf("observe run: %w", err)
	}
	if len(patch) > 0 {
		body, err := mergeBody(r.Body, patch)
		if err != nil {
			return 0, fmt.Errorf("observe run %s: %w", p.Ref, err)
		}
		r.Body = body
	}
	if pod != nil {
		r.Pod = pod
	}
	if pr != nil {
		r.PR = pr
	}
	if !p.Heartbeat.IsZero() {
		r.Heartbeat = ports.StoredTime(p.Heartbeat)
	}
	r.Version++
	r.UpdatedAt = s.now()
	return r.Version, nil
}

// RunList returns up to Limit runs of Kind with ids after AfterID, in id
// order, optionally only those in a non-terminal state.
func (s *RunStore) RunList(_ context.Context, p ports.RunListParams) ([]ports.RunRow, error) {
	m := reconcile.MachineFor(p.Kind)
	if m == nil {
		return nil, fmt.Errorf("list runs: %w: kind %q is not a run kind", ports.ErrInvalidRun, p.Kind)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = ports.DefaultRunListLimit
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	kr := s.runs[p.Kind]
	start := sort.SearchStrings(kr.ids, p.AfterID)
	if start < len(kr.ids) && kr.ids[start] == p.AfterID {
		start++
	}
	var out []ports.RunRow
	for _, id := range kr.ids[start:] {
		if len(out) == limit {
			break
		}
		r := kr.byID[id]
		if p.NonTerminal && m.IsTerminal(r.State) || p.State != "" && r.State != p.State {
			continue
		}
		out = append(out, copyRow(r))
	}
	return out, nil
}

// RunStates returns the states of the named runs of kind that exist.
func (s *RunStore) RunStates(_ context.Context, kind reconcile.RunKind, ids []string) (map[string]reconcile.State, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("run states: %w: kind %q is not a run kind", ports.ErrInvalidRun, kind)
	}
	out := make(map[string]reconcile.State, len(ids))
	s.mu.RLock()
	defer s.mu.RUnlock()
	kr := s.runs[kind]
	for _, id := range ids {
		if r, ok := kr.byID[id]; ok {
			out[id] = r.State
		}
	}
	return out, nil
}

// RunDependents returns the non-terminal runs of kind that depend on id
// or have it as a subtask, in id order (a scan of the kind's runs).
func (s *RunStore) RunDependents(_ context.Context, kind reconcile.RunKind, id string) ([]string, error) {
	if !kind.Valid() {
		return nil, fmt.Errorf("run dependents: %w: kind %q is not a run kind", ports.ErrInvalidRun, kind)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	m := reconcile.MachineFor(kind)
	var out []string
	for rid, r := range s.runs[kind].byID {
		sub := slices.ContainsFunc(r.Subtasks, func(st reconcile.Subtask) bool { return st.ID == id })
		if !m.IsTerminal(r.State) && (sub || slices.Contains(r.DependsOn, id)) {
			out = append(out, rid)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RunCounts returns the slot counts, globally and for repo.
func (s *RunStore) RunCounts(_ context.Context, repo string) (ports.RunCounts, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c := ports.RunCounts{GlobalActive: s.global}
	if repo != "" {
		c.RepoActive = s.perRepo[repo]
	}
	return c, nil
}

// lookup finds the stored run; the caller holds the lock.
func (s *RunStore) lookup(ref reconcile.RunRef) (*ports.RunRow, error) {
	kr := s.runs[ref.Kind]
	if kr == nil {
		return nil, fmt.Errorf("run %s: %w", ref, ports.ErrNotFound)
	}
	r, ok := kr.byID[ref.ID]
	if !ok {
		return nil, fmt.Errorf("run %s: %w", ref, ports.ErrNotFound)
	}
	return r, nil
}

// countSlot adds delta to the slot counters if r holds a slot; the caller
// holds the write lock.
func (s *RunStore) countSlot(r *ports.RunRow, delta int) {
	if !ports.HoldsSlot(r.Ref.Kind, r.State) {
		return
	}
	s.global += delta
	if r.Repo == "" {
		return
	}
	s.perRepo[r.Repo] += delta
	if s.perRepo[r.Repo] == 0 {
		delete(s.perRepo, r.Repo)
	}
}

// encodePatch encodes each patch value, naming the key that fails.
func encodePatch(patch map[string]any) (map[string]json.RawMessage, error) {
	if len(patch) == 0 {
		return nil, nil
	}
	out := make(map[string]json.RawMessage, len(patch))
	for k, v := range patch {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("patch key %q: %w", k, err)
		}
		out[k] = b
	}
	return out, nil
}

// mergeBody sets the patch's keys on the body object.
func mergeBody(body json.RawMessage, patch map[string]json.RawMessage) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("patch: stored body: %w", err)
	}
	for k, v := range patch {
		obj[k] = v
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("patch: %w", err)
	}
	return b, nil
}

// copyRow deep-copies r; empty slices become nil.
func copyRow(r *ports.RunRow) ports.RunRow {
	c := *r
	c.Body = slices.Clone(r.Body)
	c.Pod = copyPod(r.Pod)
	c.PR = copyPR(r.PR)
	c.DependsOn = nil
	if len(r.DependsOn) > 0 {
		c.DependsOn = slices.Clone(r.DependsOn)
	}
	c.Subtasks = nil
	if len(r.Subtasks) > 0 {
		c.Subtasks = slices.Clone(r.Subtasks)
	}
	return c
}

// copyPod deep-copies a pod observation.
func copyPod(p *reconcile.Pod) *reconcile.Pod {
	if p == nil {
		return nil
	}
	c := *p
	if p.ExitCode != nil {
		code := *p.ExitCode
		c.ExitCode = &code
	}
	return &c
}

// copyPR copies a pull-request observation.
func copyPR(p *reconcile.PullRequest) *reconcile.PullRequest {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// SetChanges makes the store publish run.status changes to c. Call it
// before first use.
func (s *RunStore) SetChanges(c *Changes) { s.changes = c }

// runChange is the run.status change of a run's state moving.
func runChange(ref reconcile.RunRef, old, next string, at time.Time) []ports.Change {
	return ports.PhaseChange(ports.ChangeRunStatus, string(ref.Kind)+"/"+ref.ID, old, next, at, map[string]any{"kind": ref.Kind})
}
