package memory

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// progressionIndex keeps environment progression's aggregate
// (policy.ProgressionSummary) in each job's and target's write, as the
// PostgreSQL store's triggers do (migration 0027), so that a summary costs
// O(outcomes), not a walk of the environment's targets.
type progressionIndex struct {
	// rows is, per existing target and version, the outcome of the
	// target's newest terminal job of the version.
	rows map[progressionRow]progressionOutcome
	// outcomes count the rows per deployment, environment and version.
	outcomes map[progressionScope]map[outcomeKey]*finishes
}

// progressionRow is a target and a version.
type progressionRow struct {
	t       release.ReleaseTarget
	version string
}

// progressionScope is a deployment, environment and version.
type progressionScope struct{ deployment, environment, version string }

// outcomeKey is a job's status and verification.
type outcomeKey struct {
	status       release.JobStatus
	verification release.VerificationStatus
}

// progressionOutcome is a row's outcome and its job's finish time (Unix
// nanoseconds).
type progressionOutcome struct {
	key outcomeKey
	at  int64
}

// finishes are the finish times of one outcome's rows: how many rows have
// each, and a max-heap of them whose top is always live (a time no row has
// any more is popped when it reaches the top).
type finishes struct {
	n     int
	count map[int64]int
	top   maxHeap
}

func newProgressionIndex() progressionIndex {
	return progressionIndex{rows: map[progressionRow]progressionOutcome{}, outcomes: map[progressionScope]map[outcomeKey]*finishes{}}
}

// set makes the row of target t and version the outcome o (nil: none).
func (x *progressionIndex) set(t release.ReleaseTarget, version string, o *progressionOutcome) {
	r := progressionRow{t, version}
	old, had := x.rows[r]
	if had && o != nil && old == *o {
		return
	}
	scope := progressionScope{t.DeploymentID, t.EnvironmentID, version}
	if had {
		delete(x.rows, r)
		byKey := x.outcomes[scope]
		if f := byKey[old.key]; f != nil && f.remove(old.at) {
			delete(byKey, old.key)
			if len(byKey) == 0 {
				delete(x.outcomes, scope)
			}
		}
	}
	if o == nil {
		return
	}
	x.rows[r] = *o
	byKey := x.outcomes[scope]
	if byKey == nil {
		byKey = map[outcomeKey]*finishes{}
		x.outcomes[scope] = byKey
	}
	f := byKey[o.key]
	if f == nil {
		f = &finishes{count: map[int64]int{}}
		byKey[o.key] = f
	}
	f.add(o.at)
}

// add counts a row finished at.
func (f *finishes) add(at int64) {
	f.n++
	if f.count[at]++; f.count[at] == 1 {
		heap.Push(&f.top, at)
	}
}

// remove uncounts a row finished at; it reports whether none is left.
func (f *finishes) remove(at int64) bool {
	f.n--
	if f.count[at]--; f.count[at] == 0 {
		delete(f.count, at)
	}
	for len(f.top) > 0 && f.count[f.top[0]] == 0 {
		heap.Pop(&f.top)
	}
	return f.n == 0
}

// summary is the kept summary of a scope's version over targets targets.
func (x *progressionIndex) summary(deployment, environment, version string, targets int) policy.ProgressionSummary {
	sum := policy.ProgressionSummary{VersionID: version, Targets: targets}
	for k, f := range x.outcomes[progressionScope{deployment, environment, version}] {
		sum.Outcomes = append(sum.Outcomes, policy.ProgressionOutcome{Status: k.status, Verification: k.verification,
			Targets: f.n, LatestAt: time.Unix(0, f.top[0]).UTC()})
	}
	slices.SortFunc(sum.Outcomes, func(a, b policy.ProgressionOutcome) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), cmp.Compare(a.Verification, b.Verification))
	})
	return sum
}

// refreshProgression recomputes the progression rows of target t for the
// versions: each its newest terminal job of the version (by created_at,
// id) while t is stored, else none. The caller holds the lock.
func (s *ReleaseStore) refreshProgression(t release.ReleaseTarget, versions ...string) {
	_, stored := s.targets.byTarget[t]
	list := s.jobs.byTarget[t]
	for _, v := range versions {
		var o *progressionOutcome
		for i := len(list) - 1; stored && i >= 0; i-- {
			if j := list[i]; j.VersionID == v && j.Status.IsTerminal() {
				o = &progressionOutcome{key: outcomeKey{j.Status, j.Verification}, at: j.FinishedAt().UnixNano()}
				break
			}
		}
		s.progression.set(t, v, o)
	}
}

// refreshTargetProgression recomputes the rows of each target of recs
// for every version it has jobs of: after the targets were added or
// removed. The caller holds the lock.
func (s *ReleaseStore) refreshTargetProgression(recs ...[]*targetRec) {
	for _, rs := range recs {
		for _, r := range rs {
			var versions []string
			for _, j := range s.jobs.byTarget[r.t] {
				if !slices.Contains(versions, j.VersionID) {
					versions = append(versions, j.VersionID)
				}
			}
			s.refreshProgression(r.t, versions...)
		}
	}
}

// maxHeap is a max-heap of Unix nanoseconds (container/heap).
type maxHeap []int64

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
