package flow

import (
	"maps"

	"github.com/reconcilerhq/reconciler/ports"
)

// changes is one pass's batch of TaskRun writes over the TaskRuns it read:
// every step of the pass (the inbox's reports, the scheduler's actions,
// the outside work's records) edits the run as the steps before it left
// it, and the batch is written once.
type changes struct {
	// runs are the TaskRuns as read (never modified: they may be the
	// controller's cached copy).
	runs []ports.TaskRunRecord
	byID map[string]int // index in runs
	// batch holds each run written, created ones at Version 0.
	batch []ports.TaskRunRecord
	at    map[string]int // index in batch
}

func newChanges(runs []ports.TaskRunRecord, byID map[string]int) *changes {
	if byID == nil {
		byID = indexRuns(runs)
	}
	return &changes{runs: runs, byID: byID, at: map[string]int{}}
}

// indexRuns maps each run's id to its index.
func indexRuns(runs []ports.TaskRunRecord) map[string]int {
	byID := make(map[string]int, len(runs))
	for i := range runs {
		byID[runs[i].ID] = i
	}
	return byID
}

// get returns the run as the pass has it so far.
func (ch *changes) get(id string) (ports.TaskRunRecord, bool) {
	if i, ok := ch.at[id]; ok {
		return ch.batch[i], true
	}
	if i, ok := ch.byID[id]; ok {
		return ch.runs[i], true
	}
	return ports.TaskRunRecord{}, false
}

// put records r as the run's new state.
func (ch *changes) put(r ports.TaskRunRecord) {
	if i, ok := ch.at[r.ID]; ok {
		ch.batch[i] = r
		return
	}
	ch.at[r.ID] = len(ch.batch)
	ch.batch = append(ch.batch, r)
}

// view is every run as the pass has it so far: runs with the batch laid
// over them, new runs after (runs itself when nothing changed).
func (ch *changes) view() []ports.TaskRunRecord {
	if len(ch.batch) == 0 {
		return ch.runs
	}
	out := make([]ports.TaskRunRecord, len(ch.runs), len(ch.runs)+len(ch.batch))
	copy(out, ch.runs)
	for _, r := range ch.batch {
		if i, ok := ch.byID[r.ID]; ok {
			out[i] = r
			continue
		}
		out = append(out, r)
	}
	return out
}

// written is every run as stored once the batch is (view with the
// batch's versions advanced), and its index.
func (ch *changes) written() ([]ports.TaskRunRecord, map[string]int) {
	if len(ch.batch) == 0 {
		return ch.runs, ch.byID
	}
	out := make([]ports.TaskRunRecord, len(ch.runs), len(ch.runs)+len(ch.batch))
	copy(out, ch.runs)
	byID, cloned := ch.byID, false
	for _, r := range ch.batch {
		r.Version++
		if i, ok := byID[r.ID]; ok {
			out[i] = r
			continue
		}
		if !cloned {
			byID, cloned = maps.Clone(ch.byID), true
		}
		byID[r.ID] = len(out)
		out = append(out, r)
	}
	return out, byID
}
