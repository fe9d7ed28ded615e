package policy

import (
	"testing"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
)

func TestRollbackDecide(t *testing.T) {
	t.Parallel()
	onFailure := Rollback{OnJobStatuses: []release.JobStatus{release.JobFailure}}
	onVerify := Rollback{OnVerificationFailure: true}
	tests := []struct {
		name string
		rule Rollback
		jobs []JobRecord
		want bool
		to   string
	}{
		{"no jobs", onFailure, nil, false, ""},
		{"newest job active", onFailure, []JobRecord{job("j2", "v2", release.JobInProgress, t0), job("j1", "v1", release.JobSuccessful, t0)}, false, ""},
		{"newest job succeeded", onFailure, []JobRecord{job("j2", "v2", release.JobSuccessful, t0), job("j1", "v1", release.JobSuccessful, t0)}, false, ""},
		{"failure returns to the last successful version", onFailure, []JobRecord{
			job("j3", "v3", release.JobFailure, t0), job("j2", "v2", release.JobSuccessful, t0), job("j1", "v1", release.JobSuccessful, t0),
		}, true, "v2"},
		{"skips earlier jobs of the failed version", onFailure, []JobRecord{
			job("j3", "v3", release.JobFailure, t0), job("j2", "v3", release.JobSuccessful, t0), job("j1", "v1", release.JobSuccessful, t0),
		}, true, "v1"},
		{"skips successes whose verification failed", onFailure, []JobRecord{
			job("j3", "v3", release.JobFailure, t0), verified(job("j2", "v2", release.JobSuccessful, t0), release.VerificationFailed), job("j1", "v1", release.JobSuccessful, t0),
		}, true, "v1"},
		{"status not listed does not trigger", onFailure, []JobRecord{job("j2", "v2", release.JobCancelled, t0), job("j1", "v1", release.JobSuccessful, t0)}, false, ""},
		{"verification failure triggers", onVerify, []JobRecord{
			verified(job("j2", "v2", release.JobSuccessful, t0), release.VerificationFailed), job("j1", "v1", release.JobSuccessful, t0),
		}, true, "v1"},
		{"verification failure ignored unless configured", onFailure, []JobRecord{
			verified(job("j2", "v2", release.JobSuccessful, t0), release.VerificationFailed), job("j1", "v1", release.JobSuccessful, t0),
		}, false, ""},
		{"nothing to return to", onFailure, []JobRecord{job("j1", "v1", release.JobFailure, t0)}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := tt.rule.Decide(tt.jobs)
			require.Equal(t, tt.want, d.Rollback, d.Reason)
			require.Equal(t, tt.to, d.VersionID)
			require.NotEmpty(t, d.Reason)
		})
	}
}
