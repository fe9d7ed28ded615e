package policy

import (
	"fmt"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func relJob(id, rel string, s release.JobStatus, done time.Time) JobRecord {
	j := job(id, "v2", s, done)
	j.ReleaseID = rel
	return j
}

func TestMayCreateJob(t *testing.T) {
	t.Parallel()
	retry := &Retry{MaxRetries: 2, BackoffSeconds: 60}
	tests := []struct {
		name  string
		rule  *Retry
		jobs  []JobRecord
		now   time.Time
		want  Status
		until time.Time
	}{
		{"no job yet", nil, nil, t0, Allowed, time.Time{}},
		{"jobs of other releases do not count", nil, []JobRecord{relJob("j", "other", release.JobFailure, t0)}, t0, Allowed, time.Time{}},
		{"without a retry rule one job per release", nil, []JobRecord{relJob("j", "rel", release.JobFailure, t0)}, at(time.Hour), Denied, time.Time{}},
		{"active job waits", retry, []JobRecord{relJob("j", "rel", release.JobInProgress, t0)}, t0, Pending, time.Time{}},
		{"successful job is not retried", retry, []JobRecord{relJob("j", "rel", release.JobSuccessful, t0)}, at(time.Hour), Denied, time.Time{}},
		{"cancelled is not retried by default", retry, []JobRecord{relJob("j", "rel", release.JobCancelled, t0)}, at(time.Hour), Denied, time.Time{}},
		{"failure is retried after backoff", retry, []JobRecord{relJob("j", "rel", release.JobFailure, t0)}, at(time.Hour), Allowed, time.Time{}},
		{"invalidJobAgent is retried by default", retry, []JobRecord{relJob("j", "rel", release.JobInvalidJobAgent, t0)}, at(time.Hour), Allowed, time.Time{}},
		{"backoff pending until completion plus backoff", retry, []JobRecord{relJob("j", "rel", release.JobFailure, t0)}, at(30 * time.Second), Pending, at(time.Minute)},
		{"retries exhausted", retry, []JobRecord{
			relJob("j3", "rel", release.JobFailure, t0), relJob("j2", "rel", release.JobFailure, t0), relJob("j1", "rel", release.JobFailure, t0),
		}, at(time.Hour), Denied, time.Time{}},
		{"streak stops at a non-retryable job", retry, []JobRecord{
			relJob("j3", "rel", release.JobFailure, t0), relJob("j2", "rel", release.JobFailure, t0), relJob("j1", "rel", release.JobCancelled, t0),
		}, at(time.Hour), Allowed, time.Time{}},
		{"a job of another release ends the streak: wanted again, it gets a job", nil, []JobRecord{
			relJob("j2", "other", release.JobSuccessful, t0), relJob("j1", "rel", release.JobSuccessful, at(-time.Hour)),
		}, at(time.Hour), Allowed, time.Time{}},
		{"a flip back starts a fresh budget", retry, []JobRecord{
			relJob("j6", "rel", release.JobFailure, t0), relJob("j5", "rel", release.JobFailure, at(-time.Hour)),
			relJob("j4", "other", release.JobSuccessful, at(-2*time.Hour)),
			relJob("j3", "rel", release.JobFailure, at(-3*time.Hour)), relJob("j2", "rel", release.JobFailure, at(-4*time.Hour)), relJob("j1", "rel", release.JobFailure, at(-5*time.Hour)),
		}, at(time.Hour), Allowed, time.Time{}},
		{"a flip back counts only its own failures", retry, []JobRecord{
			relJob("j5", "rel", release.JobFailure, t0),
			relJob("j4", "other", release.JobSuccessful, at(-2*time.Hour)),
			relJob("j3", "rel", release.JobFailure, at(-3*time.Hour)), relJob("j2", "rel", release.JobFailure, at(-4*time.Hour)), relJob("j1", "rel", release.JobFailure, at(-5*time.Hour)),
		}, at(time.Hour), Allowed, time.Time{}},
		{"custom retry statuses", &Retry{MaxRetries: 1, RetryOnStatuses: []release.JobStatus{release.JobCancelled}},
			[]JobRecord{relJob("j", "rel", release.JobCancelled, t0)}, t0, Allowed, time.Time{}},
		{"custom statuses replace the defaults", &Retry{MaxRetries: 1, RetryOnStatuses: []release.JobStatus{release.JobCancelled}},
			[]JobRecord{relJob("j", "rel", release.JobFailure, t0)}, t0, Denied, time.Time{}},
		{"exponential backoff doubles per attempt", &Retry{MaxRetries: 5, BackoffSeconds: 60, BackoffStrategy: BackoffExponential},
			[]JobRecord{relJob("j3", "rel", release.JobFailure, t0), relJob("j2", "rel", release.JobFailure, at(-time.Hour)), relJob("j1", "rel", release.JobFailure, at(-2*time.Hour))},
			t0, Pending, at(4 * time.Minute)},
		{"exponential backoff is capped", &Retry{MaxRetries: 5, BackoffSeconds: 60, BackoffStrategy: BackoffExponential, MaxBackoffSeconds: 90},
			[]JobRecord{relJob("j3", "rel", release.JobFailure, t0), relJob("j2", "rel", release.JobFailure, at(-time.Hour)), relJob("j1", "rel", release.JobFailure, at(-2*time.Hour))},
			t0, Pending, at(90 * time.Second)},
		{"linear backoff is constant", &Retry{MaxRetries: 5, BackoffSeconds: 60, BackoffStrategy: BackoffLinear},
			[]JobRecord{relJob("j3", "rel", release.JobFailure, t0), relJob("j2", "rel", release.JobFailure, at(-time.Hour)), relJob("j1", "rel", release.JobFailure, at(-2*time.Hour))},
			t0, Pending, at(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			in.Now, in.ReleaseID, in.Jobs = tt.now, "rel", tt.jobs
			v := MayCreateJob(tt.rule, &in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.Equal(t, tt.until, v.Until, v.Message)
			if tt.rule != nil {
				require.Equal(t, v, tt.rule.Evaluate(&in), "Evaluate is MayCreateJob")
			}
		})
	}
}

func TestConcurrency(t *testing.T) {
	t.Parallel()
	active := func(n int) []JobRecord {
		var js []JobRecord
		for i := range n {
			js = append(js, job(fmt.Sprint("a", i), "v1", release.JobInProgress, t0))
		}
		return append(js, job("done", "v0", release.JobSuccessful, t0))
	}
	tests := []struct {
		name    string
		rule    Concurrency
		jobs    []JobRecord
		envJobs int
		want    Status
	}{
		{"default allows the first job", Concurrency{}, active(0), 0, Allowed},
		{"default is one active job per target", Concurrency{}, active(1), 0, Pending},
		{"queued counts as active", Concurrency{}, []JobRecord{job("q", "v1", release.JobQueued, t0)}, 0, Pending},
		{"actionRequired counts as active", Concurrency{}, []JobRecord{job("q", "v1", release.JobActionRequired, t0)}, 0, Pending},
		{"higher per-target cap", Concurrency{MaxActivePerTarget: 3}, active(2), 0, Allowed},
		{"at the per-target cap", Concurrency{MaxActivePerTarget: 3}, active(3), 0, Pending},
		{"per-environment cap", Concurrency{MaxActivePerEnvironment: 2}, active(0), 2, Pending},
		{"under the per-environment cap", Concurrency{MaxActivePerEnvironment: 2}, active(0), 1, Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := setup(t)
			in.Jobs, in.EnvironmentActiveJobs = tt.jobs, tt.envJobs
			v := tt.rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
		})
	}
}

func TestEvaluateJobDefaults(t *testing.T) {
	t.Parallel()
	in := setup(t)
	in.ReleaseID = "rel"
	require.Equal(t, Allowed, EvaluateJob(nil, in).Status, "first job of a release")
	in.Jobs = []JobRecord{relJob("j", "rel", release.JobInProgress, t0)}
	d := EvaluateJob(nil, in)
	require.Equal(t, Pending, d.Status)
	require.Equal(t, TypeConcurrency, d.Blocking.Type, "the default concurrency cap blocks first")
	in.Jobs = []JobRecord{relJob("j", "rel", release.JobFailure, t0)}
	d = EvaluateJob(nil, in)
	require.Equal(t, Denied, d.Status)
	require.Equal(t, TypeRetry, d.Blocking.Type, "no retry rule: one job per release")

	policies := []Policy{{ID: "p", Name: "p", Enabled: true, Rules: []Rule{{ID: "retry", Spec: Retry{MaxRetries: 1}}}}}
	require.Equal(t, Allowed, EvaluateJob(policies, in).Status)
}

// TestRetryProperty: creating jobs only when allowed never gives a run (a
// release's consecutive jobs) more than MaxRetries+1 jobs, and a release
// wanted again after another one ran gets a job.
func TestRetryProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		rule := Retry{
			MaxRetries:      rapid.IntRange(0, 5).Draw(t, "max"),
			BackoffSeconds:  rapid.Int64Range(0, 600).Draw(t, "backoff"),
			BackoffStrategy: rapid.SampledFrom([]BackoffStrategy{"", BackoffLinear, BackoffExponential}).Draw(t, "strategy"),
		}
		if rapid.Bool().Draw(t, "custom") {
			rule.RetryOnStatuses = rapid.SliceOfNDistinct(rapid.SampledFrom(release.JobStatuses[4:]), 1, 4, rapid.ID).Draw(t, "statuses")
		}
		policies := []Policy{{ID: "p", Name: "p", Enabled: true, Rules: []Rule{{ID: "retry", Spec: rule}}}}
		in := Input{Now: t0, ReleaseID: "rel"}
		created := 0
		for step := range 40 {
			if rapid.IntRange(0, 9).Draw(t, "flip") == 0 {
				in.ReleaseID = map[string]string{"rel": "other", "other": "rel"}[in.ReleaseID]
				if len(in.Jobs) > 0 && !in.Jobs[0].Status.IsActive() && in.Jobs[0].ReleaseID != in.ReleaseID {
					require.Equal(t, Allowed, EvaluateJob(policies, in).Status, "wanted again after another release ran")
				}
			}
			if len(in.Jobs) > 0 && in.Jobs[0].ReleaseID != in.ReleaseID {
				created = 0 // a new run
			}
			d := EvaluateJob(policies, in)
			switch d.Status {
			case Allowed:
				created++
				j := relJob(fmt.Sprint("j", step), in.ReleaseID, release.JobPending, in.Now)
				in.Jobs = append([]JobRecord{j}, in.Jobs...)
			case Pending:
				if !d.Until.IsZero() {
					in.Now = d.Until
				}
			}
			// The newest job finishes with a random status.
			if len(in.Jobs) > 0 && in.Jobs[0].Status.IsActive() && rapid.Bool().Draw(t, "finish") {
				in.Now = in.Now.Add(time.Duration(rapid.IntRange(1, 600).Draw(t, "took")) * time.Second)
				in.Jobs[0].Status = rapid.SampledFrom(release.JobStatuses[4:]).Draw(t, "status")
				in.Jobs[0].CompletedAt = in.Now
			}
			require.LessOrEqual(t, created, rule.MaxRetries+1)
		}
	})
}

// TestConcurrencyProperty: admitting jobs only when allowed never exceeds
// the per-target or per-environment cap.
func TestConcurrencyProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		rule := Concurrency{MaxActivePerTarget: rapid.IntRange(0, 4).Draw(t, "perTarget"), MaxActivePerEnvironment: rapid.IntRange(0, 4).Draw(t, "perEnv")}
		capTarget := max(rule.MaxActivePerTarget, 1)
		policies := []Policy{{ID: "p", Name: "p", Enabled: true, Rules: []Rule{{ID: "c", Spec: rule}}}}
		in := Input{Now: t0, EnvironmentActiveJobs: rapid.IntRange(0, 2).Draw(t, "others")}
		for step := range 30 {
			if rapid.Bool().Draw(t, "create") {
				in.ReleaseID = fmt.Sprint("rel", step) // a fresh release each time: only concurrency limits
				if EvaluateJob(policies, in).Status == Allowed {
					if rule.MaxActivePerEnvironment > 0 {
						require.Less(t, in.EnvironmentActiveJobs, rule.MaxActivePerEnvironment, "admitted over the environment cap")
					}
					in.Jobs = append([]JobRecord{relJob(fmt.Sprint("j", step), in.ReleaseID, release.JobPending, in.Now)}, in.Jobs...)
					in.EnvironmentActiveJobs++
				}
			} else if len(in.Jobs) > 0 {
				i := rapid.IntRange(0, len(in.Jobs)-1).Draw(t, "finish")
				if in.Jobs[i].Status.IsActive() {
					in.Jobs[i].Status = release.JobSuccessful
					in.EnvironmentActiveJobs--
				}
			}
			active := 0
			for _, j := range in.Jobs {
				if j.Status.IsActive() {
					active++
				}
			}
			require.LessOrEqual(t, active, capTarget)
		}
	})
}
