package porttest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// catalogRacers is how many goroutines race in the concurrency subtests.
const catalogRacers = 8

// catalogRace runs fn in n goroutines released together and returns their
// errors by index.
func catalogRace(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// catalogOneWinner checks exactly one error is nil and every other is a
// conflict, and returns the winner's index.
func catalogOneWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two racers won: %d and %d", winner, i)
			winner = i
			continue
		}
		require.True(t, errorsIsConflict(err), "racer %d: %v is not a conflict", i, err)
	}
	require.NotEqual(t, -1, winner, "no racer won")
	return winner
}

// catalogConcurrentSameVersion: of simultaneous updates with the same
// expected version exactly one wins, the rest conflict, and the winner's
// write is what is stored.
func catalogConcurrentSameVersion(t *testing.T, ctx context.Context, s ports.Catalog) {
	for round := range 5 {
		r := catalogCreate(t, ctx, s, revision.KindWorkflowTemplate, fmt.Sprintf("race-%d", round))
		errs := catalogRace(catalogRacers, func(i int) error {
			_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
				Ref: r.Ref(), ExpectedVersion: r.Version,
				Content: json.RawMessage(fmt.Sprintf(`{"writer":%d}`, i)),
			})
			return err
		})
		winner := catalogOneWinner(t, errs)
		got, err := s.CatalogGet(ctx, r.Ref())
		require.NoError(t, err)
		require.Equal(t, r.Version+1, got.Version)
		require.Equal(t, fmt.Sprintf(`{"writer":%d}`, winner), string(got.Content))
	}
}

// catalogConcurrentIncrements: writers re-read and retry on conflict; no
// increment is lost.
func catalogConcurrentIncrements(t *testing.T, ctx context.Context, s ports.Catalog) {
	const writers, each = 4, 10
	r := catalogCreate(t, ctx, s, revision.KindPolicy, "counter")
	errs := catalogRace(writers, func(int) error {
		for range each {
			for {
				cur, err := s.CatalogGet(ctx, r.Ref())
				if err != nil {
					return err
				}
				n, _ := strconv.Atoi(cur.Annotations["n"])
				_, err = s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
					Ref: r.Ref(), ExpectedVersion: cur.Version,
					Annotations: map[string]string{"n": strconv.Itoa(n + 1)},
				})
				if err == nil {
					break
				}
				if !errorsIsConflict(err) {
					return err
				}
			}
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	got, err := s.CatalogGet(ctx, r.Ref())
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(writers*each), got.Annotations["n"])
	require.Equal(t, int64(1+writers*each), got.Version)
}

// catalogConcurrentCreates: of simultaneous drafts of one object exactly one
// is stored.
func catalogConcurrentCreates(t *testing.T, ctx context.Context, s ports.Catalog) {
	errs := catalogRace(catalogRacers, func(int) error {
		_, err := s.CatalogCreate(ctx, catalogDraft(revision.KindPolicy, "one-draft"))
		return err
	})
	catalogOneWinner(t, errs)
	all, err := s.CatalogList(ctx, ports.CatalogListParams{Kind: revision.KindPolicy, Name: "one-draft"})
	require.NoError(t, err)
	require.Len(t, all, 1)
}

// catalogConcurrentApproves: simultaneous approvals of one proposal publish
// it once, with one number.
func catalogConcurrentApproves(t *testing.T, ctx context.Context, s ports.Catalog) {
	r := catalogReach(t, ctx, s, "approve-race", revision.Proposed)
	errs := catalogRace(catalogRacers, func(i int) error {
		_, err := s.CatalogUpdate(ctx, ports.CatalogUpdateParams{
			Ref: r.Ref(), ExpectedVersion: r.Version, Lifecycle: revision.Published,
			ApprovedBy: fmt.Sprintf("approver-%d", i),
		})
		return err
	})
	winner := catalogOneWinner(t, errs)
	got, err := s.CatalogGet(ctx, r.Ref())
	require.NoError(t, err)
	require.Equal(t, 1, got.Revision)
	require.Equal(t, fmt.Sprintf("approver-%d", winner), got.ApprovedBy)

	next := catalogPublish(t, ctx, s, revision.KindWorkflowTemplate, "approve-race")
	require.Equal(t, 2, next.Revision, "the race consumed one number")
}

// catalogConcurrentTryLock: of simultaneous try-locks of one key exactly one
// succeeds while the winner holds it; after release the key is free.
func catalogConcurrentTryLock(t *testing.T, ctx context.Context, s ports.Catalog) {
	for round := range 5 {
		key := fmt.Sprintf("workflow-template/lock-race-%d", round)
		unlocks := make([]func(), catalogRacers)
		errs := catalogRace(catalogRacers, func(i int) error {
			u, err := s.CatalogTryLock(ctx, key)
			unlocks[i] = u
			return err
		})
		winner := catalogOneWinner(t, errs)
		unlocks[winner]()
		u, err := s.CatalogTryLock(ctx, key)
		require.NoError(t, err)
		u()
	}
}

func catalogTryLock(t *testing.T, ctx context.Context, s ports.Catalog) {
	unlock, err := s.CatalogTryLock(ctx, "policy/guard")
	require.NoError(t, err)

	_, err = s.CatalogTryLock(ctx, "policy/guard")
	requireCatalogConflict(t, err)
	require.Contains(t, err.Error(), "another change to policy/guard is in progress")

	other, err := s.CatalogTryLock(ctx, "policy/other")
	require.NoError(t, err, "keys lock independently")
	other()

	unlock()
	again, err := s.CatalogTryLock(ctx, "policy/guard")
	require.NoError(t, err, "unlock releases the key")

	unlock() // a second unlock of the old holder must not release the new one
	_, err = s.CatalogTryLock(ctx, "policy/guard")
	requireCatalogConflict(t, err)
	again()

	// Many distinct keys taken and released leave nothing behind that
	// blocks them again.
	for i := range 50 {
		key := fmt.Sprintf("k/%d", i)
		u, err := s.CatalogTryLock(ctx, key)
		require.NoError(t, err)
		u()
		u, err = s.CatalogTryLock(ctx, key)
		require.NoError(t, err)
		u()
	}
}
