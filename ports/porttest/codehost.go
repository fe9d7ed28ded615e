package porttest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// CodeHostFixture is one ports.CodeHost under test and what the suite can
// see of its effects.
type CodeHostFixture struct {
	Host ports.CodeHost
	// OpenPR returns a pull request open on the host: its URL and head.
	OpenPR func(t *testing.T) (url, headSHA string)
	// Merged returns how many times the host merged url; Submitted how
	// many reviews it posted on url.
	Merged, Submitted func(url string) int
}

// CodeHost is the conformance suite of ports.CodeHost. newHost is called
// once per subtest; subtests run in parallel.
//
// It checks the port's contract: merging an open pull request at its head
// and submitting a review succeed; both are idempotent by key,
// sequentially and under concurrent calls (run it with -race); a new key
// (a review re-run after a push) is a new submission.
func CodeHost(t *testing.T, newHost func(t *testing.T) CodeHostFixture) {
	t.Run("MergeIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		f := newHost(t)
		url, head := f.OpenPR(t)
		p := ports.PRMergeParams{URL: url, HeadSHA: head, IdempotencyKey: "repo/suite/4/merge"}
		requireConcurrentOK(t, 8, func() error { return f.Host.PRMerge(t.Context(), p) })
		require.NoError(t, f.Host.PRMerge(t.Context(), p))
		require.Equal(t, 1, f.Merged(url), "a retried merge merges once")
		require.Zero(t, f.Submitted(url), "merging submits no review")
	})
	t.Run("SubmitReviewIsIdempotentByKey", func(t *testing.T) {
		t.Parallel()
		f := newHost(t)
		url, _ := f.OpenPR(t)
		ref := reconcile.RunRef{Kind: reconcile.KindPRReview, ID: "suite-review"}
		p := ports.PRSubmitParams{Ref: ref, URL: url, IdempotencyKey: ref.String() + "/5/submit"}
		requireConcurrentOK(t, 8, func() error { return f.Host.PRSubmitReview(t.Context(), p) })
		require.NoError(t, f.Host.PRSubmitReview(t.Context(), p))
		require.Equal(t, 1, f.Submitted(url), "a retried submission posts once")
		p.IdempotencyKey = ref.String() + "/9/submit"
		require.NoError(t, f.Host.PRSubmitReview(t.Context(), p))
		require.Equal(t, 2, f.Submitted(url), "a review re-run is a new submission")
		require.Zero(t, f.Merged(url), "a review merges nothing")
	})
	t.Run("EachPullRequestKeepsItsOwnEffects", func(t *testing.T) {
		t.Parallel()
		f := newHost(t)
		a, headA := f.OpenPR(t)
		b, _ := f.OpenPR(t)
		require.NotEqual(t, a, b)
		require.NoError(t, f.Host.PRMerge(t.Context(), ports.PRMergeParams{URL: a, HeadSHA: headA, IdempotencyKey: "repo/a/1/merge"}))
		require.Equal(t, 1, f.Merged(a))
		require.Zero(t, f.Merged(b))
	})
}
