package reconcile

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// prReviewHelperSHAs is a small pool of head SHAs, so a PR's head and the
// review's ReviewedSHA are equal often and differ often.
var prReviewHelperSHAs = []string{"", "a1b2c3", "d4e5f6", "0badc0de"}

// genPRReviewSnapshot generates valid PR review snapshots covering every
// field: all states and intents, nil, open, closed and merged PRs, heads
// that match or moved, nil and dead pods, read errors and backoff in the
// past or future. Generated values survive EncodeSnapshot/DecodeSnapshot
// unchanged.
func genPRReviewSnapshot() *rapid.Generator[*PRReviewSnapshot] {
	return rapid.Custom(func(t *rapid.T) *PRReviewSnapshot {
		w := agentHelperGenWorld(t)
		s := &PRReviewSnapshot{
			Run: PRReviewRun{
				ID:          agentHelperGenID(t, "run.id"),
				State:       rapid.SampledFrom(PRReviewMachine.States).Draw(t, "run.state"),
				Version:     rapid.Int64Range(0, 1<<40).Draw(t, "run.version"),
				PRURL:       "https://github.example/o/r/pull/" + agentHelperGenID(t, "run.pr_url"),
				ReviewedSHA: rapid.SampledFrom(prReviewHelperSHAs).Draw(t, "run.reviewed_sha"),
				Reruns:      rapid.IntRange(0, 12).Draw(t, "run.reruns"),
				ReviewDone:  rapid.Bool().Draw(t, "run.review_done"),
				Error:       agentHelperGenText(t, "run.error"),
				Reconcile:   agentHelperGenReconcile(t, w.Now),
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
// the time) with a head SHA from the shared pool.
func prReviewHelperGenPR(t *rapid.T) *PullRequest {
	st := PROpen
	if rapid.IntRange(0, 3).Draw(t, "pr.closed") == 0 {
		st = rapid.SampledFrom([]PRState{PRClosed, PRMerged}).Draw(t, "pr.state")
	}
	return &PullRequest{
		URL:       "https://github.example/o/r/pull/" + agentHelperGenID(t, "pr.url"),
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

// TestGenPRReviewSnapshotIsValid checks the generator's contract: every
// generated snapshot is valid and survives the recorded-snapshot format.
func TestGenPRReviewSnapshotIsValid(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genPRReviewSnapshot().Draw(t, "snapshot")
		enc, err := EncodeSnapshot(s)
		require.NoError(t, err)
		got, err := DecodeSnapshot(enc)
		require.NoError(t, err)
		require.Equal(t, Snapshot(s), got)
	})
}
