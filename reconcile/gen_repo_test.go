package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Pools the repo generator draws from. PR identity comes from small pools,
// so the observed PR and the fields stored on the run are equal often and
// differ often; passing and approved are drawn more often, so auto-merge is
// reached; pr_opened and running, the richest states, are drawn more often.
var (
	repoHelperURLs    = []string{"https://git.example.com/acme/api/pull/1", "https://git.example.com/acme/api/pull/2"}
	repoHelperSHAs    = []string{"a1b2c3", "d4e5f6"}
	repoHelperChecks  = []ChecksStatus{ChecksNone, ChecksPending, ChecksPassing, ChecksPassing, ChecksFailing, ChecksConflicts}
	repoHelperReviews = []ReviewStatus{ReviewNone, ReviewPending, ReviewApproved, ReviewApproved, ReviewChangesRequested, ReviewCommented}
	repoHelperStates  = append(append([]State(nil), RepoMachine.States...), RepoPROpened, RepoPROpened, RepoRunning)
)

// genRepoSnapshot generates valid repo snapshots covering every field: all
// states and intents (unsupported ones included), nil, open, closed and
// merged PRs with stored PR fields that are empty, equal to or drifted from
// the observed ones, dependencies and subtasks in every outcome, nil and dead
// pods, stale and fresh heartbeats, full and free capacity, read errors and
// backoff in the past or future. Generated values survive
// EncodeSnapshot/DecodeSnapshot unchanged.
func genRepoSnapshot() *rapid.Generator[*RepoSnapshot] {
	return rapid.Custom(func(t *rapid.T) *RepoSnapshot {
		w := propGenWorld(t)
		// Auto-resume on three times in four, so its paths are well covered.
		w.Settings.AutoResume = rapid.IntRange(0, 3).Draw(t, "settings.auto_resume.repo") > 0
		s := &RepoSnapshot{
			Run: RepoRun{
				ID:            propGenID(t, "run.id"),
				State:         rapid.SampledFrom(repoHelperStates).Draw(t, "run.state"),
				Version:       rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				Repo:          rapid.SampledFrom([]string{"", "acme/api", "acme/web"}).Draw(t, "run.repo"),
				RetryCount:    rapid.IntRange(0, 4).Draw(t, "run.retry_count"),
				MaxRetries:    rapid.IntRange(0, 4).Draw(t, "run.max_retries"),
				SessionID:     propGenText(t, "run.session_id"),
				AutoResumes:   rapid.SampledFrom([]int{0, 0, 1, 3, 9, 10, 11, 12}).Draw(t, "run.auto_resumes"),
				ReviewRunning: rapid.Bool().Draw(t, "run.review_running"),
				Error:         propGenText(t, "run.error"),
				Reconcile:     propGenReconcile(t, w.Now),
			},
			World: w,
		}
		if rapid.IntRange(0, 4).Draw(t, "has_pr") > 0 {
			s.PR = repoHelperGenPR(t)
		}
		s.Run.PR = repoHelperGenStoredPR(t, s.PR)
		for i, n := 0, rapid.IntRange(0, 3).Draw(t, "dependencies.len"); i < n; i++ {
			s.Dependencies = append(s.Dependencies, Dependency{
				ID:    propGenID(t, "dependency.id"),
				State: rapid.SampledFrom([]State{RepoCompleted, RepoCompleted, RepoCompleted, RepoRunning, RepoPending, RepoFailed, RepoCancelled}).Draw(t, "dependency.state"),
			})
		}
		for i, n := 0, rapid.IntRange(0, 2).Draw(t, "subtasks.len"); i < n; i++ {
			s.Subtasks = append(s.Subtasks, Subtask{
				ID:       propGenID(t, "subtask.id"),
				State:    rapid.SampledFrom([]State{RepoCompleted, RepoCompleted, RepoRunning, RepoFailed}).Draw(t, "subtask.state"),
				Blocking: rapid.Bool().Draw(t, "subtask.blocking"),
			})
		}
		return s
	})
}

// repoHelperGenPR generates an observed pull request: open most of the time,
// otherwise closed or merged.
func repoHelperGenPR(t *rapid.T) *PullRequest {
	st := PROpen
	if rapid.IntRange(0, 4).Draw(t, "pr.closed") == 0 {
		st = rapid.SampledFrom([]PRState{PRClosed, PRMerged}).Draw(t, "pr.state")
	}
	return &PullRequest{
		URL:       rapid.SampledFrom(repoHelperURLs).Draw(t, "pr.url"),
		Number:    rapid.IntRange(1, 2).Draw(t, "pr.number"),
		State:     st,
		Merged:    st == PRMerged,
		Mergeable: rapid.Bool().Draw(t, "pr.mergeable"),
		Checks:    rapid.SampledFrom(repoHelperChecks).Draw(t, "pr.checks"),
		Review:    rapid.SampledFrom(repoHelperReviews).Draw(t, "pr.review"),
		Comments:  rapid.IntRange(0, 5).Draw(t, "pr.comments"),
		HeadSHA:   rapid.SampledFrom(repoHelperSHAs).Draw(t, "pr.head_sha"),
	}
}

// repoHelperGenStoredPR generates the PR fields stored on the run: none yet,
// exactly the observed ones, or the observed ones with some fields drifted.
func repoHelperGenStoredPR(t *rapid.T, pr *PullRequest) PRFields {
	kind := rapid.IntRange(0, 3).Draw(t, "run.pr.kind")
	if kind == 0 {
		return PRFields{}
	}
	var f PRFields
	if pr != nil {
		f = prFieldsOf(pr)
	}
	if kind == 1 && pr != nil {
		return f
	}
	drift := func(label string) bool { return pr == nil || rapid.Bool().Draw(t, label) }
	if drift("run.pr.url.drift") {
		f.URL = rapid.SampledFrom(repoHelperURLs).Draw(t, "run.pr.url")
	}
	if drift("run.pr.number.drift") {
		f.Number = rapid.IntRange(1, 2).Draw(t, "run.pr.number")
	}
	if drift("run.pr.state.drift") {
		f.State = rapid.SampledFrom([]PRState{PROpen, PRClosed, PRMerged}).Draw(t, "run.pr.state")
	}
	if drift("run.pr.checks.drift") {
		f.Checks = rapid.SampledFrom(repoHelperChecks).Draw(t, "run.pr.checks")
	}
	if drift("run.pr.review.drift") {
		f.Review = rapid.SampledFrom(repoHelperReviews).Draw(t, "run.pr.review")
	}
	if drift("run.pr.head_sha.drift") {
		f.HeadSHA = rapid.SampledFrom(repoHelperSHAs).Draw(t, "run.pr.head_sha")
	}
	return f
}

// repoClone deep-copies a repo snapshot.
func repoClone(s *RepoSnapshot) *RepoSnapshot {
	c := *s
	c.World = propCloneWorld(s.World)
	if s.PR != nil {
		pr := *s.PR
		c.PR = &pr
	}
	if s.Dependencies != nil {
		c.Dependencies = append([]Dependency(nil), s.Dependencies...)
	}
	if s.Subtasks != nil {
		c.Subtasks = append([]Subtask(nil), s.Subtasks...)
	}
	return &c
}

// TestGenRepoSnapshotIsValid checks the generator's contract: every
// generated snapshot is valid and survives the recorded-snapshot format.
func TestGenRepoSnapshotIsValid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genRepoSnapshot().Draw(t, "snapshot")
		enc, err := EncodeSnapshot(s)
		require.NoError(t, err)
		got, err := DecodeSnapshot(enc)
		require.NoError(t, err)
		require.Equal(t, Snapshot(s), got)
	})
}

// TestGenRepoSnapshotReachesEveryRule checks that the generator exercises
// every documented rule of DecideRepo, so the property tests cover them all.
func TestGenRepoSnapshotReachesEveryRule(t *testing.T) {
	t.Parallel()
	seen := propReasonsReached(genRepoSnapshot(), DecideRepo, 6000)
	for _, reason := range []string{
		"backoff-active", "read-failed",
		"intent-cancel", "cancel-not-applicable", "intent-retry", "retries-exhausted", "retry-not-applicable",
		"intent-resume", "resume-not-applicable", "intent-restart", "restart-not-applicable", "intent-unsupported",
		"dependency-failed", "no-dependencies", "dependencies-completed", "waiting-on-deps",
		"capacity-full", "off-peak", "capacity-available",
		"awaiting-pod", "pod-pending", "pod-ready", "pod-dead",
		"pr-detected", "agent-finished", "finished-without-pr", "pod-missing", "stalled", "agent-running",
		"pr-not-observed", "pr-merged", "pr-closed",
		"conflicts-auto-resume", "conflicts-needs-attention", "ci-failing-auto-resume", "ci-failing-needs-attention",
		"changes-requested-auto-resume", "changes-requested-needs-attention",
		"auto-merge-ready", "launch-review", "pr-drift", "pr-steady",
		"awaiting-intent", "terminal-state",
	} {
		require.Positive(t, seen[reason], "no generated snapshot reached %q (seen: %v)", reason, seen)
	}
}
