package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFlagRanges: every duration and number flag refuses a value outside
// its range, naming that one flag (or variable) and the range, with exit
// status 2, before anything starts.
func TestFlagRanges(t *testing.T) {
	tests := []struct {
		args []string
		env  [2]string
		want string
	}{
		{args: []string{"serve", "--lock", "1ns"}, want: `"--lock" flag: out of range: want 1s to 1h, got 1ns`},
		{args: []string{"serve"}, env: [2]string{"RECONCILER_LOCK", "1ns"}, want: `RECONCILER_LOCK="1ns": out of range: want 1s to 1h, got 1ns`},
		{args: []string{"serve", "--lock", "soon"}, want: `"--lock" flag: not a duration`},
		{args: []string{"serve", "--concurrency", "0"}, want: `"--concurrency" flag: out of range: want 1 to 1024, got 0`},
		{args: []string{"serve", "--concurrency", "99999999999999999999"}, want: `"--concurrency" flag: not an integer`},
		{args: []string{"serve"}, env: [2]string{"RECONCILER_CONCURRENCY", "-3"}, want: `RECONCILER_CONCURRENCY="-3": out of range`},
		{args: []string{"serve", "--resync-interval", "0s"}, want: `"--resync-interval" flag: out of range: want 1s to 24h`},
		{args: []string{"serve", "--stall-threshold", "-1s"}, want: `"--stall-threshold" flag: out of range`},
		{args: []string{"serve", "--max-auto-resumes", "0"}, want: `"--max-auto-resumes" flag: out of range: want 1 to 1000`},
		{args: []string{"serve", "--shutdown-timeout", "1ns"}, want: `"--shutdown-timeout" flag: out of range`},
		{args: []string{"serve", "--global-slots", "-1"}, want: `"--global-slots" flag: out of range: want 0 to 1000000`},
		{args: []string{"serve", "--repo-slots", "x"}, want: `"--repo-slots" flag: not an integer`},
		{args: []string{"bench", "queue", "--rate", "0"}, want: `"--rate" flag: out of range`},
		{args: []string{"bench", "queue", "--duration", "1ns"}, want: `"--duration" flag: out of range`},
		{args: []string{"bench", "release", "--targets", "0"}, want: `"--targets" flag: out of range`},
		{args: []string{"bench", "workflow", "--items", "-5"}, want: `"--items" flag: out of range`},
		{args: []string{"bench", "worker", "--lock", "1ms"}, want: `"--lock" flag: out of range`},
		{args: []string{"versions", "force-deploy", "v1", "--expires", "-1h"}, want: `"--expires" flag: out of range`},
		{args: []string{"explain", "a:b:c", "--limit", "-1"}, want: `"--limit" flag: out of range: want 0 to 10000`},
		{args: []string{"migrate", "down", "--steps", "-2"}, want: `"--steps" flag: out of range`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " ")+" "+tt.env[0], func(t *testing.T) {
			t.Setenv("RECONCILER_DSN", "")
			if tt.env[0] != "" {
				t.Setenv(tt.env[0], tt.env[1])
			}
			res := runCLI(t, "", tt.args...)
			require.Equal(t, 2, res.code, "%v", res.err)
			require.ErrorContains(t, res.err, tt.want)
			// One flag is named, not the list of every flag.
			require.Equal(t, 1, strings.Count(res.err.Error(), "--")+strings.Count(res.err.Error(), "RECONCILER_"), "%v", res.err)
		})
	}
}

// TestFlagRangeHelp: the help text shows each flag's range and its default.
func TestFlagRangeHelp(t *testing.T) {
	res := runCLI(t, "", "serve", "--help")
	require.Equal(t, 0, res.code)
	require.Contains(t, res.stdout, "--lock duration")
	require.Contains(t, res.stdout, "(1s to 1h) (default 30s)")
}
