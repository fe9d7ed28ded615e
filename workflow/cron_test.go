package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/reconcilerhq/reconciler/workflow"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := workflow.LoadTimezone(name)
	require.NoError(t, err)
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestCronNext is the table of the documented rules: fields, lists,
// ranges, steps, names, macros, the day-of-month/day-of-week OR, and the
// two daylight-saving transitions (a skipped wall time fires once at the
// end of the gap; a repeated one fires once, at its first occurrence).
func TestCronNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, spec, zone, after string
		want                    []string // the next fires, in order
	}{
		{"daily at 3", "0 3 * * *", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z"}},
		{"strictly after", "0 3 * * *", "UTC", "2026-01-01T03:00:00Z", []string{"2026-01-02T03:00:00Z"}},
		{"every 15 minutes", "*/15 * * * *", "UTC", "2026-01-01T00:07:00Z", []string{"2026-01-01T00:15:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:00:00Z"}},
		{"list and range", "0 9-10,17 * * *", "UTC", "2026-01-01T09:30:00Z", []string{"2026-01-01T10:00:00Z", "2026-01-01T17:00:00Z", "2026-01-02T09:00:00Z"}},
		{"range with step", "0 0-12/6 * * *", "UTC", "2026-01-01T01:00:00Z", []string{"2026-01-01T06:00:00Z", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z"}},
		{"value with step runs to the end", "50/5 * * * *", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:50:00Z", "2026-01-01T00:55:00Z", "2026-01-01T01:50:00Z"}},
		{"weekday names", "0 8 * * mon-fri", "UTC", "2026-01-02T09:00:00Z", []string{"2026-01-05T08:00:00Z", "2026-01-06T08:00:00Z"}}, // Fri 2 Jan
		{"sunday as 7", "0 0 * * 7", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{"month names", "0 0 1 jan,jul *", "UTC", "2026-02-01T00:00:00Z", []string{"2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"day of month or day of week", "0 0 13 * mon", "UTC", "2026-02-01T00:00:00Z", []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-16T00:00:00Z"}},
		{"31st skips short months", "0 0 31 * *", "UTC", "2026-01-31T12:00:00Z", []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"}},
		{"leap day", "0 0 29 2 *", "UTC", "2026-01-01T00:00:00Z", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"@daily", "@daily", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-02T00:00:00Z"}},
		{"@hourly", "@hourly", "UTC", "2026-01-01T00:30:00Z", []string{"2026-01-01T01:00:00Z"}},
		{"in a zone", "0 3 * * *", "Europe/Paris", "2026-01-01T00:00:00Z", []string{"2026-01-01T02:00:00Z", "2026-01-02T02:00:00Z"}},
		{"summer offset", "0 3 * * *", "Europe/Paris", "2026-07-01T00:00:00Z", []string{"2026-07-01T01:00:00Z"}},

		// Paris, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00Z).
		{"skipped time fires at the end of the gap", "30 2 * * *", "Europe/Paris", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"skipped and following time are one fire", "0,30 2-3 * * *", "Europe/Paris", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:00:00Z"}},
		{"times around the gap keep their offset", "0 1,3 * * *", "Europe/Paris", "2026-03-28T23:00:00Z",
			[]string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T23:00:00Z"}},
		// Paris, 25 October 2026: 03:00 CEST goes back to 02:00 CET (01:00Z).
		{"repeated time fires once, first occurrence", "30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"after the first occurrence the second is skipped", "30 2 * * *", "Europe/Paris", "2026-10-25T00:30:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"hourly through the repeated hour", "0 * * * *", "Europe/Paris", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}}, // 02:00 CEST (00:00Z), 03:00 CET (02:00Z)
		// New York, 8 March 2026: 02:00 EST jumps to 03:00 EDT (07:00Z).
		{"new york gap", "15 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:15:00Z"}},
		// New York, 1 November 2026: 02:00 EDT goes back to 01:00 EST (06:00Z).
		{"new york repeat", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := workflow.ParseCron(tc.spec, mustZone(t, tc.zone))
			require.NoError(t, err)
			at := utc(tc.after)
			for i, w := range tc.want {
				at = c.Next(at)
				require.Equal(t, utc(w), at.UTC(), "fire %d", i)
			}
		})
	}
}

func TestCronLast(t *testing.T) {
	t.Parallel()
	c, err := workflow.ParseCron("0 3 * * *", mustZone(t, "Europe/Paris"))
	require.NoError(t, err)
	now := utc("2026-01-10T12:00:00Z")
	require.Equal(t, utc("2026-01-10T02:00:00Z"), c.Last(now, time.Time{}).UTC(), "the latest fire at or before now")
	require.Equal(t, utc("2026-01-10T02:00:00Z"), c.Last(utc("2026-01-10T02:00:00Z"), time.Time{}).UTC(), "at now counts")
	require.True(t, c.Last(now, utc("2026-01-10T02:00:01Z")).IsZero(), "none since")
	require.Equal(t, utc("2026-01-10T02:00:00Z"), c.Last(now, utc("2026-01-10T02:00:00Z")).UTC(), "since is inclusive")
	yearly, err := workflow.ParseCron("@yearly", nil)
	require.NoError(t, err)
	require.Equal(t, utc("2026-01-01T00:00:00Z"), yearly.Last(now, time.Time{}).UTC())
}

// TestCronNextProperty: every fire matches its wall-clock fields or ends
// a gap, fires strictly increase, and Last(Next(t)) is Next(t).
func TestCronNextProperty(t *testing.T) {
	t.Parallel()
	specs := []string{"*/7 * * * *", "0 2 * * *", "30 1-3 * * sun", "0 0 1 * *", "15 */5 10-20 * mon,wed"}
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"}
	rapid.Check(t, func(t *rapid.T) {
		loc, err := workflow.LoadTimezone(rapid.SampledFrom(zones).Draw(t, "zone"))
		require.NoError(t, err)
		c, err := workflow.ParseCron(rapid.SampledFrom(specs).Draw(t, "spec"), loc)
		require.NoError(t, err)
		at := time.Unix(rapid.Int64Range(1.7e9, 1.9e9).Draw(t, "at"), 0)
		prev := at
		for range 5 {
			next := c.Next(prev)
			require.True(t, next.After(prev), "fires strictly increase")
			require.Equal(t, next, c.Last(next, time.Time{}), "Last finds the fire itself")
			require.Equal(t, next, c.Next(next.Add(-time.Nanosecond)), "Next is exact")
			prev = next
		}
	})
}

func TestParseCronRefusesNamingTheField(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"0 3 * *":        "want 5 fields",
		"61 3 * * *":     "minute: 61 is out of range 0-59",
		"0 24 * * *":     "hour: 24 is out of range 0-23",
		"0 3 0 * *":      "day of month: 0 is out of range 1-31",
		"0 3 * 13 *":     "month: 13 is out of range 1-12",
		"0 3 * * 8":      "day of week: 8 is out of range 0-7",
		"0 3 * * funday": `day of week: "funday" is not a number`,
		"*/0 * * * *":    "minute: bad step",
		"0 5-3 * * *":    "hour: range \"5-3\" runs backwards",
		"0 0 30 2 *":     "day of month: no month of the schedule has day 30",
		"@every 5m":      "unknown macro",
		"0 3 ,1 * *":     "day of month: empty value",
	} {
		_, err := workflow.ParseCron(spec, nil)
		require.ErrorContains(t, err, want, spec)
	}
	_, err := workflow.LoadTimezone("Mars/Olympus")
	require.ErrorContains(t, err, `unknown timezone "Mars/Olympus"`)
	_, err = workflow.LoadTimezone("Local")
	require.ErrorContains(t, err, "depends on the machine")
}
