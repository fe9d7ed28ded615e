package reconcile

import (
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
				ResumeTrigger: rapid.SampledFrom([]string{"", "", "manual", "ci-failing", "conflicts", "changes-requested"}).Draw(t, "run.resume_trigger"),
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
// otherwise closed, merged or in a state the code host made up.
func repoHelperGenPR(t *rapid.T) *PullRequest {
	st := PROpen
	if rapid.IntRange(0, 4).Draw(t, "pr.closed") == 0 {
		st = rapid.SampledFrom([]PRState{PRClosed, PRMerged, "", "draft"}).Draw(t, "pr.state")
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

// repoHarness is the property harness of repo runs: no move leaves a
// terminal state without an intent.
func repoHarness() kindHarness {
	return kindHarness{
		kind: KindRepo, file: "decide_repo.go", decide: "DecideRepo",
		direct:           func(s Snapshot) Action { return DecideRepo(s.(*RepoSnapshot)) },
		gen:              propAsSnapshot(genRepoSnapshot()),
		clone:            func(s Snapshot) Snapshot { return repoClone(s.(*RepoSnapshot)) },
		mayLeaveTerminal: func(Snapshot, Edge) bool { return false },
		check:            func(t *rapid.T, s Snapshot, a Action) { repoCheck(t, s.(*RepoSnapshot), a) },
		draws:            6000,
	}
}

// repoCheck asserts the invariants of repo decisions: caps on auto-resumes
// and retries, launches only off-peak, auto-resume and auto-merge only when
// configured, and edge-triggered PR reactions.
func repoCheck(t *rapid.T, s *RepoSnapshot, a Action) {
	limit := s.Settings.MaxAutoResumes
	if limit <= 0 {
		limit = 10
	}
	p := propPatchOf(a)
	if p != nil && p.AutoResumes != nil {
		require.LessOrEqual(t, *p.AutoResumes, limit, "auto-resumes never pass the cap")
		require.GreaterOrEqual(t, *p.AutoResumes, 0)
	}
	if p != nil && p.RetryCount != nil && !p.ResetSession {
		require.LessOrEqual(t, *p.RetryCount, s.Run.MaxRetries, "a retry never passes MaxRetries")
	}
	switch x := a.(type) {
	case RequeueForAgent:
		require.True(t, s.Settings.OffPeak.Allows(s.Now), "no launch outside the off-peak window")
	case ResumeAgent:
		require.True(t, s.Settings.AutoResume, "auto-resume only when enabled")
		require.Equal(t, s.Run.AutoResumes+1, *x.Patch.AutoResumes, "each auto-resume is counted")
		require.NotNil(t, x.Patch.PR, "an auto-resume records the PR it reacted to")
	case AutoMergePR:
		require.True(t, s.Settings.AutoMerge && !s.Settings.Cautious, "auto-merge only when on and not cautious")
		require.Equal(t, ReviewApproved, s.PR.Review)
		require.Equal(t, ChecksPassing, s.PR.Checks)
		for _, st := range s.Subtasks {
			require.True(t, !st.Blocking || st.State == RepoCompleted, "blocking subtasks are done")
		}
	case LaunchReview:
		require.True(t, s.Settings.ReviewEnabled && !s.Run.ReviewRunning, "a review launches once, when enabled")
	}
	if mv, ok := a.(Moving); ok && mv.Move().To == RepoRunning {
		require.Contains(t, []PodPhase{PodRunning, PodReady}, s.Pod.Phase, "running only on a live pod")
	}
	// PR reactions are edge-triggered and drift converges: once the
	// patch is recorded, the same observation neither resumes, nor asks
	// for attention, nor patches again.
	if p != nil && p.PR != nil && s.Run.State == RepoPROpened && !p.ClearIntent {
		next := repoClone(s)
		next.Run.PR = *p.PR
		if p.AutoResumes != nil {
			next.Run.AutoResumes = *p.AutoResumes
		}
		b := DecideRepo(next)
		require.NotEqual(t, TypeResumeAgent, b.Type(), "resumed twice for one observation: %#v then %#v", a, b)
		require.NotEqual(t, TypePatchStatus, b.Type(), "patched twice for one observation: %#v then %#v", a, b)
		if mv, ok := b.(Moving); ok {
			require.NotEqual(t, RepoNeedsAttention, mv.Move().To, "asked for attention twice: %#v then %#v", a, b)
		}
	}
}
