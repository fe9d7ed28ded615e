package release

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJobDeadline(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	started := created.Add(time.Minute)
	for _, tc := range []struct {
		name  string
		job   Job
		limit time.Duration
		want  time.Time
	}{
		{"from the start", Job{Status: JobInProgress, CreatedAt: created, StartedAt: started}, time.Hour, started.Add(time.Hour)},
		{"from the creation when never started", Job{Status: JobPending, CreatedAt: created}, time.Hour, created.Add(time.Hour)},
		{"no limit", Job{Status: JobInProgress, CreatedAt: created}, 0, time.Time{}},
		{"ended jobs have none", Job{Status: JobSuccessful, CreatedAt: created, StartedAt: started}, time.Hour, time.Time{}},
	} {
		require.Equal(t, tc.want, tc.job.Deadline(tc.limit), tc.name)
	}
}
