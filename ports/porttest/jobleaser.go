package porttest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// LeasingAgent is a JobAgent that holds leases on its jobs.
type LeasingAgent interface {
	ports.JobAgent
	ports.JobLeaser
}

// JobLeaserOptions tells the JobLeaser suite how to drive one
// implementation.
type JobLeaserOptions struct {
	// Dispatch builds the dispatch of job id: a long job runs for at least
	// ten leases, a short one ends (reports its outcome) within one.
	Dispatch func(t *testing.T, jobID string, long bool) ports.JobDispatch
	// Timeout bounds every wait for a report; default 10s. It is a
	// deadline for failing, not a sleep.
	Timeout time.Duration
}

// awaitReports waits until cond holds over rec's reports, failing the
// test after timeout.
func awaitReports(t *testing.T, rec *recordingReporter, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	require.True(t, rec.await(t.Context(), timeout, func([]ports.JobReport) bool { return cond() }), "timed out waiting for %s", what)
}

// renewals counts the non-terminal reports of id that carry a lease.
func renewals(reps []ports.JobReport) int {
	n := 0
	for _, r := range reps {
		if !r.Status.IsTerminal() && r.Lease > 0 {
			n++
		}
	}
	return n
}

// JobLeaser is the conformance suite of ports.JobLeaser. newAgent is
// called once per subtest with the reporter the agent must report
// through, and should register the agent's shutdown with t.Cleanup;
// subtests run in parallel.
//
// It checks the port's contract: JobLease is positive and constant; while
// a job runs, the agent renews its lease by non-terminal reports naming
// the job with Lease equal to JobLease, never further apart than the
// lease itself (the contract asks every third of it; the suite leaves the
// rest as slack for a loaded machine); once the job's outcome is reported
// (or, for a JobCanceler, once it is cancelled) no renewal of it follows,
// which the suite observes while another job's renewals keep arriving.
func JobLeaser(t *testing.T, newAgent func(t *testing.T, r ports.JobReporter) LeasingAgent, opts JobLeaserOptions) {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	setup := func(t *testing.T) (LeasingAgent, *recordingReporter) {
		rec := newRecordingReporter()
		return newAgent(t, rec), rec
	}
	dispatch := func(t *testing.T, a LeasingAgent, id string, long bool) {
		t.Helper()
		res, err := a.Dispatch(t.Context(), opts.Dispatch(t, id, long))
		require.NoError(t, err)
		require.True(t, res.Status == release.JobPending || release.JobPending.CanBecome(res.Status), "dispatch status %s", res.Status)
	}
	t.Run("LeaseIsPositiveAndConstant", func(t *testing.T) {
		t.Parallel()
		a, _ := setup(t)
		lease := a.JobLease()
		require.Positive(t, lease)
		dispatch(t, a, "lease-const", true)
		require.Equal(t, lease, a.JobLease())
	})
	t.Run("RunningJobIsRenewedWithinItsLease", func(t *testing.T) {
		t.Parallel()
		a, rec := setup(t)
		lease := a.JobLease()
		start := time.Now()
		dispatch(t, a, "lease-long", true)
		awaitReports(t, rec, timeout, "four renewals", func() bool { reps, _ := rec.of("lease-long"); return renewals(reps) >= 4 })
		reps, at := rec.of("lease-long")
		last := start
		for i, r := range reps {
			require.False(t, r.Status.IsTerminal(), "a long job is still running: %+v", r)
			require.Equal(t, release.JobInProgress, r.Status)
			require.Equal(t, lease, r.Lease, "a renewal carries the agent's lease")
			require.LessOrEqual(t, at[i].Sub(last), lease, "renewal %d came %s after the previous one, past the lease", i, at[i].Sub(last))
			last = at[i]
		}
	})
	t.Run("NoRenewalAfterTheOutcome", func(t *testing.T) {
		t.Parallel()
		a, rec := setup(t)
		dispatch(t, a, "lease-other", true)
		dispatch(t, a, "lease-short", false)
		var end int
		awaitReports(t, rec, timeout, "the short job's outcome", func() bool {
			reps, _ := rec.of("lease-short")
			for i, r := range reps {
				if r.Status.IsTerminal() {
					end = i
					return true
				}
			}
			return false
		})
		before, _ := rec.of("lease-other")
		awaitReports(t, rec, timeout, "three more renewals of the other job", func() bool {
			reps, _ := rec.of("lease-other")
			return renewals(reps) >= renewals(before)+3
		})
		reps, _ := rec.of("lease-short")
		require.Len(t, reps, end+1, "nothing after the outcome: %+v", reps[end:])
	})
	t.Run("NoRenewalAfterACancel", func(t *testing.T) {
		t.Parallel()
		a, rec := setup(t)
		canceler, ok := a.(ports.JobCanceler)
		if !ok {
			t.Skip("not a JobCanceler")
		}
		dispatch(t, a, "lease-other", true)
		dispatch(t, a, "lease-cancel", true)
		awaitReports(t, rec, timeout, "a renewal of the job to cancel", func() bool { reps, _ := rec.of("lease-cancel"); return renewals(reps) >= 1 })
		d := opts.Dispatch(t, "lease-cancel", true)
		require.NoError(t, canceler.CancelJob(t.Context(), ports.JobCancel{JobID: "lease-cancel", Agent: d.Agent, Reason: "suite"}))
		var end int
		awaitReports(t, rec, timeout, "the cancelled outcome", func() bool {
			reps, _ := rec.of("lease-cancel")
			for i, r := range reps {
				if r.Status.IsTerminal() {
					end = i
					return true
				}
			}
			return false
		})
		before, _ := rec.of("lease-other")
		awaitReports(t, rec, timeout, "three more renewals of the other job", func() bool {
			reps, _ := rec.of("lease-other")
			return renewals(reps) >= renewals(before)+3
		})
		reps, _ := rec.of("lease-cancel")
		require.Equal(t, release.JobCancelled, reps[end].Status)
		require.Len(t, reps, end+1, "nothing after the cancel: %+v", reps[end:])
	})
}
