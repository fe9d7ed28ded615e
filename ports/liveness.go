package ports

import (
	"context"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Liveness keeps one row per running process (its owner name, as the
// engine's Options.Owner): the process's own heartbeat, cheap and apart
// from the leases it holds on work items and jobs. Whether a process is
// alive is read from it, so a lease held by a live but slow process is
// told apart from one whose process is gone.
type Liveness interface {
	// LivenessBeat records that owner is alive until until (created on
	// its first beat; a beat never moves until back).
	LivenessBeat(ctx context.Context, owner string, until time.Time) error
	// LivenessGet is until when owner is known alive: zero when it has no
	// row (never beat, or ended).
	LivenessGet(ctx context.Context, owner string) (time.Time, error)
	// LivenessEnd removes owner's row: it stopped cleanly.
	LivenessEnd(ctx context.Context, owner string) error
}

// ValidateOwner checks a liveness owner name.
func ValidateOwner(owner string) error {
	if owner == "" {
		return release.Invalid("owner", "is required")
	}
	if len(owner) > 255 {
		return release.Invalid("owner", "is longer than 255 bytes")
	}
	return nil
}
