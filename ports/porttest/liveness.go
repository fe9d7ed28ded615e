package porttest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Liveness is the conformance suite of ports.Liveness: a beat creates the
// row, later beats extend it and never move it back, owners are apart, an
// ended row reads zero, and a bad owner changes nothing.
func Liveness(t *testing.T, newLiveness func(t *testing.T) ports.Liveness) {
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	t.Run("BeatExtendsNeverBack", func(t *testing.T) {
		t.Parallel()
		l, ctx := newLiveness(t), t.Context()
		got, err := l.LivenessGet(ctx, "p1")
		require.NoError(t, err)
		require.True(t, got.IsZero(), "no row before the first beat")
		require.NoError(t, l.LivenessBeat(ctx, "p1", at))
		got, err = l.LivenessGet(ctx, "p1")
		require.NoError(t, err)
		require.True(t, at.Equal(got), "%s", got)
		require.NoError(t, l.LivenessBeat(ctx, "p1", at.Add(time.Minute)))
		require.NoError(t, l.LivenessBeat(ctx, "p1", at.Add(time.Second)), "a late beat is no error")
		got, err = l.LivenessGet(ctx, "p1")
		require.NoError(t, err)
		require.True(t, at.Add(time.Minute).Equal(got), "never moved back: %s", got)
	})
	t.Run("OwnersApartAndEnd", func(t *testing.T) {
		t.Parallel()
		l, ctx := newLiveness(t), t.Context()
		require.NoError(t, l.LivenessBeat(ctx, "p1", at))
		require.NoError(t, l.LivenessBeat(ctx, "p2", at.Add(time.Hour)))
		require.NoError(t, l.LivenessEnd(ctx, "p1"))
		require.NoError(t, l.LivenessEnd(ctx, "p1"), "ending twice is no error")
		got, err := l.LivenessGet(ctx, "p1")
		require.NoError(t, err)
		require.True(t, got.IsZero())
		got, err = l.LivenessGet(ctx, "p2")
		require.NoError(t, err)
		require.True(t, at.Add(time.Hour).Equal(got))
	})
	t.Run("BadOwner", func(t *testing.T) {
		t.Parallel()
		l, ctx := newLiveness(t), t.Context()
		for _, owner := range []string{"", strings.Repeat("x", 256)} {
			err := l.LivenessBeat(ctx, owner, at)
			require.ErrorIs(t, err, release.ErrInvalid)
			var fe *release.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "owner", fe.Field)
		}
	})
}
