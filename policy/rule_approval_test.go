package policy

import (
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
)

func TestAnyApproval(t *testing.T) {
	t.Parallel()
	appr := func(user, ver, env string, d time.Duration) release.Approval {
		return release.Approval{VersionID: ver, EnvironmentID: env, User: user, ApprovedAt: at(d)}
	}
	tests := []struct {
		name      string
		min       int
		approvals []release.Approval
		want      Status
		satisfied time.Time
	}{
		{"min 0 allows", 0, nil, Allowed, time.Time{}},
		{"negative min allows", -1, nil, Allowed, time.Time{}},
		{"no approvals pending", 1, nil, Pending, time.Time{}},
		{"enough approvals allowed at the Nth", 2, []release.Approval{
			appr("carol", "v2", "prod", 3*time.Minute), appr("alice", "v2", "prod", time.Minute), appr("bob", "v2", "prod", 2*time.Minute),
		}, Allowed, at(2 * time.Minute)},
		{"same user counts once", 2, []release.Approval{
			appr("alice", "v2", "prod", time.Minute), appr("alice", "v2", "prod", 2*time.Minute),
		}, Pending, time.Time{}},
		{"same user counts at their earliest approval", 2, []release.Approval{
			appr("alice", "v2", "prod", 5*time.Minute), appr("bob", "v2", "prod", 2*time.Minute), appr("alice", "v2", "prod", time.Minute),
		}, Allowed, at(2 * time.Minute)},
		{"approval for another version does not count", 1, []release.Approval{appr("alice", "v1", "prod", 0)}, Pending, time.Time{}},
		{"approval for another environment does not count", 1, []release.Approval{appr("alice", "v2", "staging", 0)}, Pending, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			in.Approvals = tt.approvals
			v := AnyApproval{MinApprovals: tt.min}.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.Equal(t, tt.satisfied, v.SatisfiedAt)
			require.NotEmpty(t, v.Message)
			if v.Status == Pending {
				require.True(t, v.Until.IsZero(), "only a new approval can change the verdict")
			}
		})
	}
}
