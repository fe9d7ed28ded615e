package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/memory"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// racers is how many goroutines race in each round.
const racers = 6

// race runs fn in n goroutines released together and returns their errors.
func race(n int, fn func(i int) error) []error {
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

// oneWinner checks exactly one racer succeeded and every other got a
// conflict, and returns the winner.
func oneWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "racers %d and %d both won", winner, i)
			winner = i
			continue
		}
		require.True(t, errors.Is(err, revision.ErrConflict) && errors.Is(err, ports.ErrConflict), "racer %d: %v", i, err)
	}
	require.NotEqual(t, -1, winner, "nobody won")
	return winner
}

// storeFactories are the stores the concurrency tests run on; Postgres
// joins them in postgres_test.go.
var storeFactories = map[string]func(t *testing.T) ports.Catalog{
	"memory": func(*testing.T) ports.Catalog { return memory.NewCatalog(ports.SystemClock) },
}

// TestConcurrentChanges: of simultaneous changes to one object with the same
// expected version exactly one wins and the rest get a conflict; the stored
// result is the winner's, never a lost update.
func TestConcurrentChanges(t *testing.T) {
	t.Parallel()
	for name, newStore := range storeFactories {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			concurrentChanges(t, catalog.New(newStore(t), schemaOnly))
		})
	}
}

// concurrentChanges races edits, approvals and creates on s.
func concurrentChanges(t *testing.T, s *catalog.Service) {
	ctx := t.Context()
	for round := range 4 {
		obj := wt(fmt.Sprintf("race-%d", round))
		d := create(t, s, obj, 0)

		errs := race(racers, func(i int) error {
			_, err := s.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: d.Version, Content: doc(100 + i)})
			return err
		})
		w := oneWinner(t, errs)
		got, err := s.Get(ctx, d.Ref())
		require.NoError(t, err)
		require.Equal(t, string(doc(100+w)), string(got.Content), "the winner's edit is stored")
		require.Equal(t, d.Version+1, got.Version)

		p, err := s.Propose(ctx, at(got))
		require.NoError(t, err)
		errs = race(racers, func(i int) error {
			_, err := s.Approve(ctx, catalog.ApproveParams{Ref: p.Ref(), Version: p.Version, Approver: fmt.Sprintf("a%d", i)})
			return err
		})
		w = oneWinner(t, errs)
		pub, err := s.LatestPublished(ctx, obj)
		require.NoError(t, err)
		require.Equal(t, 1, pub.Revision)
		require.Equal(t, fmt.Sprintf("a%d", w), pub.ApprovedBy)

		errs = race(racers, func(i int) error {
			_, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(200 + i)})
			return err
		})
		oneWinner(t, errs)
		open, err := s.List(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name, Lifecycles: []revision.Lifecycle{revision.Draft, revision.Proposed}})
		require.NoError(t, err)
		require.Len(t, open, 1)
	}
}

// TestConcurrentObjectsIndependent: changes to different objects never
// conflict with each other.
func TestConcurrentObjectsIndependent(t *testing.T) {
	t.Parallel()
	for name, newStore := range storeFactories {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			concurrentObjects(t, catalog.New(newStore(t), schemaOnly))
		})
	}
}

// concurrentObjects has each racer publish its own object repeatedly.
func concurrentObjects(t *testing.T, s *catalog.Service) {
	ctx := context.Background()
	errs := race(racers, func(i int) error {
		obj := wt(fmt.Sprintf("own-%d", i))
		for n := range 20 {
			r, err := s.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: doc(n)})
			if err != nil {
				return err
			}
			if r, err = s.Propose(ctx, at(r)); err != nil {
				return err
			}
			if _, err = s.Approve(ctx, catalog.ApproveParams{Ref: r.Ref(), Version: r.Version, Approver: "ana"}); err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		require.NoError(t, err, "racer %d", i)
		latest, err := s.LatestPublished(ctx, wt(fmt.Sprintf("own-%d", i)))
		require.NoError(t, err)
		require.Equal(t, 20, latest.Revision)
	}
}
