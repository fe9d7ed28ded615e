package release_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestParsePullSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		cfg   map[string]any
		want  release.PullSettings
		field string
	}{
		{"defaults", nil, release.PullSettings{Lease: time.Minute, MaxHandOuts: 3}, ""},
		{"set", map[string]any{"lease": "45s", "max_hand_outs": float64(5), "report_secret": "env:X"}, release.PullSettings{Lease: 45 * time.Second, MaxHandOuts: 5}, ""},
		{"int", map[string]any{"max_hand_outs": 1}, release.PullSettings{Lease: time.Minute, MaxHandOuts: 1}, ""},
		{"lease not a string", map[string]any{"lease": float64(30)}, release.PullSettings{}, "job_agent_config.lease"},
		{"lease unparsable", map[string]any{"lease": "soon"}, release.PullSettings{}, "job_agent_config.lease"},
		{"lease too short", map[string]any{"lease": "500ms"}, release.PullSettings{}, "job_agent_config.lease"},
		{"lease too long", map[string]any{"lease": "2h"}, release.PullSettings{}, "job_agent_config.lease"},
		{"hand-outs fraction", map[string]any{"max_hand_outs": 1.5}, release.PullSettings{}, "job_agent_config.max_hand_outs"},
		{"hand-outs zero", map[string]any{"max_hand_outs": float64(0)}, release.PullSettings{}, "job_agent_config.max_hand_outs"},
		{"hand-outs too many", map[string]any{"max_hand_outs": float64(101)}, release.PullSettings{}, "job_agent_config.max_hand_outs"},
		{"hand-outs a string", map[string]any{"max_hand_outs": "3"}, release.PullSettings{}, "job_agent_config.max_hand_outs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := release.ParsePullSettings(c.cfg)
			if c.field == "" {
				require.NoError(t, err)
				require.Equal(t, c.want, got)
				return
			}
			var fe *release.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, c.field, fe.Field)
		})
	}
}

func TestJobTakeRules(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := release.PullSettings{Lease: time.Minute, MaxHandOuts: 2}
	pending := release.Job{ID: "j", Status: release.JobPending, CreatedAt: t0}
	require.True(t, pending.Takeable(t0), "a pending job never taken is takeable")
	reported := pending
	reported.Status = release.JobInProgress
	require.False(t, reported.Takeable(t0), "a job its agent reported without a take is not")
	require.Equal(t, "job j was never taken", reported.CheckHandOut(1))

	first := pending.Taken(t0, s, "a")
	require.Equal(t, release.JobInProgress, first.Status)
	require.Equal(t, t0, first.StartedAt)
	require.Equal(t, t0.Add(time.Minute), first.LeaseUntil)
	require.Equal(t, &release.JobTake{HandOut: 1, MaxHandOuts: 2, Taker: "a", TakenAt: t0}, first.Take)
	require.Empty(t, first.CheckHandOut(1))
	require.False(t, first.Takeable(t0.Add(time.Minute-1)), "not while the lease runs")
	require.Empty(t, first.LeaseLost(t0.Add(time.Minute)), "a job with hand-outs left is not lost at its lease's end")
	require.True(t, first.Takeable(t0.Add(time.Minute)), "it is handed out again")

	t1 := t0.Add(2 * time.Minute)
	second := first.Taken(t1, release.PullSettings{Lease: time.Second, MaxHandOuts: 9}, "b")
	require.Equal(t, &release.JobTake{HandOut: 2, MaxHandOuts: 2, Taker: "b", TakenAt: t1}, second.Take, "the bound of the first take stays")
	require.Equal(t, t0, second.StartedAt)
	require.Contains(t, second.CheckHandOut(1), "hand-out 1 is fenced")
	require.False(t, second.Takeable(t1.Add(time.Hour)), "no hand-out left")
	require.Contains(t, second.LeaseLost(t1.Add(time.Second)), "lost: handed out 2 times")
	require.Empty(t, second.LeaseLost(t1), "not before the lease ends")

	ended := second
	ended.Status = release.JobSuccessful
	require.Empty(t, ended.CheckHandOut(2), "its taker's repeated report is judged as any report")
	require.Empty(t, ended.LeaseLost(t1.Add(time.Hour)), "an ended job is never lost")

	leaser := release.Job{ID: "k", Status: release.JobInProgress, LeaseUntil: t0}
	require.Contains(t, leaser.LeaseLost(t0), "the process running it stopped", "an in-process agent's job is lost at its lease's end")
}
