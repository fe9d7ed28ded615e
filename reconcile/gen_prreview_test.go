package reconcile

import (
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// prReviewHelperSHAs is a small pool of head SHAs, so a PR's head and the
// review's ReviewedSHA are equal often and differ often.
var prReviewHelperSHAs = []string{"", "a1b2c3", "d4e5f6", "0badc0de"}

// prReviewGenStates draws reviewing, the richest state, more often.
var prReviewGenStates = append(append([]State(nil), PRReviewMachine.States...), ReviewRunning, ReviewRunning)

// genPRReviewSnapshot generates valid PR review snapshots covering every
// field: all states and intents, nil, open, closed and merged PRs, heads
// that match or moved, nil and dead pods, read errors and backoff in the
// past or future. Generated values survive EncodeSnapshot/DecodeSnapshot
// unchanged.
func genPRReviewSnapshot() *rapid.Generator[*PRReviewSnapshot] {
	return rapid.Custom(func(t *rapid.T) *PRReviewSnapshot {
		w := propGenWorld(t)
		s := &PRReviewSnapshot{
			Run: PRReviewRun{
				ID:          propGenID(t, "run.id"),
				State:       rapid.SampledFrom(prReviewGenStates).Draw(t, "run.state"),
				Version:     rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				PRURL:       "https://github.example/o/r/pull/" + propGenID(t, "run.pr_url"),
				ReviewedSHA: rapid.SampledFrom(prReviewHelperSHAs).Draw(t, "run.reviewed_sha"),
				Reruns:      rapid.IntRange(0, 12).Draw(t, "run.reruns"),
				ReviewDone:  rapid.Bool().Draw(t, "run.review_done"),
				Error:       propGenText(t, "run.error"),
				Reconcile:   propGenReconcile(t, w.Now),
			},
			World: w,
		}
		if rapid.IntRange(0, 5).Draw(t, "has_pr") > 0 {
			s.PR = prReviewHelperGenPR(t)
		}
		return s
	})
}

// prReviewHelperGenPR generates a pull request in any state (open most of
// the time; closed, merged or unknown otherwise) with a head SHA from the
// shared pool.
func prReviewHelperGenPR(t *rapid.T) *PullRequest {
	st := PROpen
	if rapid.IntRange(0, 3).Draw(t, "pr.closed") == 0 {
		st = rapid.SampledFrom([]PRState{PRClosed, PRMerged, "", "draft"}).Draw(t, "pr.state")
	}
	return &PullRequest{
		URL:       "https://github.example/o/r/pull/" + propGenID(t, "pr.url"),
		Number:    rapid.IntRange(1, 9999).Draw(t, "pr.number"),
		State:     st,
		Merged:    st == PRMerged,
		Mergeable: rapid.Bool().Draw(t, "pr.mergeable"),
		Checks:    rapid.SampledFrom([]ChecksStatus{ChecksNone, ChecksPending, ChecksPassing, ChecksFailing, ChecksConflicts}).Draw(t, "pr.checks"),
		Review:    rapid.SampledFrom([]ReviewStatus{ReviewNone, ReviewPending, ReviewApproved, ReviewChangesRequested, ReviewCommented}).Draw(t, "pr.review"),
		Comments:  rapid.IntRange(0, 20).Draw(t, "pr.comments"),
		HeadSHA:   rapid.SampledFrom(prReviewHelperSHAs).Draw(t, "pr.head_sha"),
	}
}

// prReviewHarness is the property harness of PR reviews. The one move out
// of a terminal state without an intent: a push re-runs a submitted review
// of an open PR when configured and under the cap.
func prReviewHarness() kindHarness {
	return kindHarness{
		kind: KindPRReview, file: "decide_prreview.go", decide: "DecidePRReview",
		direct: func(s Snapshot) Action { return DecidePRReview(s.(*PRReviewSnapshot)) },
		gen:    propAsSnapshot(genPRReviewSnapshot()),
		clone:  func(s Snapshot) Snapshot { return prReviewClone(s.(*PRReviewSnapshot)) },
		mayLeaveTerminal: func(s Snapshot, e Edge) bool {
			r := s.(*PRReviewSnapshot)
			return e == Edge{ReviewSubmitted, ReviewQueued} && r.PR != nil && r.PR.HeadSHA != r.Run.ReviewedSHA &&
				r.PR.State == PROpen && r.Settings.RerunOnPush && r.Run.Reruns < prReviewRerunCap(r)
		},
		check: func(t *rapid.T, s Snapshot, a Action) { prReviewCheck(t, s.(*PRReviewSnapshot), a) },
		draws: 8000,
	}
}

// prReviewRerunCap is the effective cap on automatic re-runs.
func prReviewRerunCap(s *PRReviewSnapshot) int {
	if s.Settings.MaxReruns <= 0 {
		return 10
	}
	return s.Settings.MaxReruns
}

// prReviewCheck asserts the invariants of review decisions: re-runs counted
// and capped, a requeued review starts undone, launches and submissions at
// the PR head, stale only for a closed PR or a moved head.
func prReviewCheck(t *rapid.T, s *PRReviewSnapshot, a Action) {
	limit := s.Settings.MaxReruns
	if limit <= 0 {
		limit = 10
	}
	moved := s.PR != nil && s.PR.HeadSHA != s.Run.ReviewedSHA

	if p := propPatchOf(a); p != nil && p.Reruns != nil {
		require.LessOrEqual(t, *p.Reruns, limit, "reruns never pass the cap")
		if !p.ClearIntent {
			require.Equal(t, s.Run.Reruns+1, *p.Reruns, "an automatic re-run counts once")
		} else {
			require.Zero(t, *p.Reruns, "a manual rereview resets the count")
		}
	}
	switch a := a.(type) {
	case Transition:
		if a.To == ReviewQueued {
			require.NotNil(t, a.Patch.ReviewDone, "a requeued review starts undone")
			require.False(t, *a.Patch.ReviewDone)
		}
	case LaunchReviewRun:
		require.Equal(t, s.PR.HeadSHA, a.HeadSHA, "a review launches at the PR head")
	case SubmitReview:
		require.Equal(t, s.Run.ReviewedSHA, s.PR.HeadSHA, "only a review of the current head is submitted")
	case MarkStale:
		if a.Reason == "pr-closed" {
			require.NotEqual(t, PROpen, s.PR.State)
		} else {
			require.True(t, moved, "pr-moved-on needs a new head")
		}
	}
}

// prReviewClone deep-copies a review snapshot.
func prReviewClone(s *PRReviewSnapshot) *PRReviewSnapshot {
	c := *s
	if s.PR != nil {
		pr := *s.PR
		c.PR = &pr
	}
	c.World = propCloneWorld(s.World)
	return &c
}
