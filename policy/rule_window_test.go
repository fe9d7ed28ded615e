package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/stretchr/testify/require"
	"github.com/teambition/rrule-go"
	"pgregory.net/rapid"
)

func TestDeploymentWindow(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	newYork, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	weekdays := "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9"
	allow := DeploymentWindow{RRule: weekdays, DurationMinutes: 480, Timezone: "Europe/Berlin"}
	deny := allow
	deny.AllowWindow = ptr(false)
	tests := []struct {
		name  string
		rule  DeploymentWindow
		now   time.Time
		first bool
		want  Status
		until time.Time
	}{
		{"allow: inside the window", allow, t0, false, Allowed, time.Time{}},
		{"allow: outside waits for the next window", allow, time.Date(2026, 3, 2, 21, 0, 0, 0, berlin), false, Pending, time.Date(2026, 3, 3, 9, 0, 0, 0, berlin)},
		{"allow: window end is exclusive", allow, time.Date(2026, 3, 2, 17, 0, 0, 0, berlin), false, Pending, time.Date(2026, 3, 3, 9, 0, 0, 0, berlin)},
		{"allow: window start is inclusive", allow, time.Date(2026, 3, 3, 9, 0, 0, 0, berlin), false, Allowed, time.Time{}},
		{"allow: friday evening waits for monday", allow, time.Date(2026, 3, 6, 18, 0, 0, 0, berlin), false, Pending, time.Date(2026, 3, 9, 9, 0, 0, 0, berlin)},
		{"allow: first deployment ignores windows", allow, time.Date(2026, 3, 7, 12, 0, 0, 0, berlin), true, Allowed, time.Time{}},
		{"deny: inside waits for the window end", deny, t0, false, Pending, time.Date(2026, 3, 2, 17, 0, 0, 0, berlin)},
		{"deny: outside is allowed", deny, time.Date(2026, 3, 7, 12, 0, 0, 0, berlin), false, Allowed, time.Time{}},
		{"deny: first deployment ignores windows", deny, t0, true, Allowed, time.Time{}},
		{"deny: overlapping windows merge", DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9,10", DurationMinutes: 90, AllowWindow: ptr(false)},
			time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC), false, Pending, time.Date(2026, 3, 2, 11, 30, 0, 0, time.UTC)},
		{"timezone empty means UTC", DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=12", DurationMinutes: 60},
			time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC), false, Pending, time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)},
		{"wall clock follows daylight saving time", DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9", DurationMinutes: 60, Timezone: "America/New_York"},
			time.Date(2026, 3, 9, 13, 30, 0, 0, time.UTC), false, Allowed, time.Time{}},
		{"wall clock before daylight saving time", DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=9", DurationMinutes: 60, Timezone: "America/New_York"},
			time.Date(2026, 3, 6, 13, 30, 0, 0, time.UTC), false, Pending, time.Date(2026, 3, 6, 9, 0, 0, 0, newYork)},
		{"DTSTART and INTERVAL keep the fortnightly grid", DeploymentWindow{RRule: "DTSTART:20260302T090000Z\nRRULE:FREQ=WEEKLY;INTERVAL=2", DurationMinutes: 60},
			time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC), false, Pending, time.Date(2026, 3, 16, 9, 0, 0, 0, time.UTC)},
		{"allow: no further occurrences is denied", DeploymentWindow{RRule: "FREQ=DAILY;UNTIL=20250101T000000Z", DurationMinutes: 60},
			t0, false, Denied, time.Time{}},
		{"COUNT: before the last occurrence", DeploymentWindow{RRule: "DTSTART:20260301T120000Z\nRRULE:FREQ=DAILY;COUNT=3", DurationMinutes: 60},
			t0, false, Pending, time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)},
		{"COUNT: inside an occurrence", DeploymentWindow{RRule: "DTSTART:20260301T120000Z\nRRULE:FREQ=DAILY;COUNT=3", DurationMinutes: 60},
			time.Date(2026, 3, 3, 12, 30, 0, 0, time.UTC), false, Allowed, time.Time{}},
		{"COUNT: exhausted", DeploymentWindow{RRule: "DTSTART:20260301T120000Z\nRRULE:FREQ=DAILY;COUNT=3", DurationMinutes: 60},
			time.Date(2026, 3, 4, 12, 30, 0, 0, time.UTC), false, Denied, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, Rule{ID: "w", Spec: tt.rule}.Validate())
			in := setup(t)
			in.Now = tt.now
			if !tt.first {
				in.Jobs = []JobRecord{job("j0", "v1", release.JobSuccessful, tt.now.Add(-48*time.Hour))}
			}
			v := tt.rule.Evaluate(&in)
			require.Equal(t, tt.want, v.Status, v.Message)
			require.True(t, tt.until.Equal(v.Until), "until %s, want %s (%s)", v.Until, tt.until, v.Message)
		})
	}
}

func TestDeploymentWindowValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		rule  DeploymentWindow
		field string
		msg   string
	}{
		{"empty rrule", DeploymentWindow{DurationMinutes: 60}, "rules[0].rrule", "required"},
		{"garbage rrule", DeploymentWindow{RRule: "every monday", DurationMinutes: 60}, "rules[0].rrule", "invalid RRULE"},
		{"unknown property", DeploymentWindow{RRule: "FREQ=DAILY;BYFOO=1", DurationMinutes: 60}, "rules[0].rrule", "invalid RRULE"},
		{"missing FREQ", DeploymentWindow{RRule: "BYHOUR=9", DurationMinutes: 60}, "rules[0].rrule", "invalid RRULE"},
		{"out of bounds", DeploymentWindow{RRule: "FREQ=DAILY;BYHOUR=25", DurationMinutes: 60}, "rules[0].rrule", "invalid RRULE"},
		{"never occurs", DeploymentWindow{RRule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", DurationMinutes: 60}, "rules[0].rrule", "never"},
		{"interval never meets BYHOUR", DeploymentWindow{RRule: "DTSTART:20250601T000000Z\nRRULE:FREQ=HOURLY;INTERVAL=4;BYHOUR=1", DurationMinutes: 60}, "rules[0].rrule", "never"},
		{"interval never meets BYMINUTE", DeploymentWindow{RRule: "FREQ=MINUTELY;INTERVAL=10;BYMINUTE=5,15", DurationMinutes: 60}, "rules[0].rrule", "never"},
		// Found by FuzzWindow: each took rrule minutes to years to search.
		{"BYSETPOS past a minute's set", DeploymentWindow{RRule: "FREQ=MINUTELY;BYSETPOS=-3", Timezone: "Europe/Berlin", DurationMinutes: 1}, "rules[0].rrule", "BYSETPOS"},
		{"BYSETPOS past a second's set", DeploymentWindow{RRule: "FREQ=SECONDLY;BYSETPOS=2", DurationMinutes: 1}, "rules[0].rrule", "BYSETPOS"},
		{"COUNT too large", DeploymentWindow{RRule: "FREQ=DAILY;COUNT=100000", DurationMinutes: 60}, "rules[0].rrule", "COUNT"},
		{"unknown time zone", DeploymentWindow{RRule: "FREQ=DAILY", DurationMinutes: 60, Timezone: "Mars/Olympus"}, "rules[0].timezone", "time zone"},
		{"zero duration", DeploymentWindow{RRule: "FREQ=DAILY", DurationMinutes: 0}, "rules[0].duration_minutes", "between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{ID: "p", WorkspaceID: "ws", Name: "p", Rules: []Rule{{ID: "w", Spec: tt.rule}}}
			err := p.Validate()
			require.ErrorIs(t, err, release.ErrInvalid)
			var fe *release.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, tt.field, fe.Field)
			require.Contains(t, err.Error(), tt.msg)
		})
	}
}

// TestSubDailyWindowValidationIsBounded: a sub-daily rule whose day filters
// select no day is refused after a search that does not grow with INTERVAL
// (counted in hours, minutes or seconds, not in years). Found by FuzzWindow:
// before, INTERVAL=1000 made validation search 9,000 years day by day, about
// a second per rule on an idle machine. The cost is counted in the years
// searched, not timed.
func TestSubDailyWindowValidationIsBounded(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		"FREQ=SECONDLY;INTERVAL=1000;BYMONTH=2;BYMONTHDAY=30",
		"FREQ=SECONDLY;INTERVAL=86399;BYYEARDAY=366;BYMONTH=1",
		"FREQ=MINUTELY;INTERVAL=5000;BYMONTH=4;BYMONTHDAY=31",
		"FREQ=HOURLY;INTERVAL=100000;BYMONTH=2;BYMONTHDAY=30",
	} {
		for _, tz := range []string{"", "Europe/Berlin"} {
			err := DeploymentWindow{RRule: src, Timezone: tz, DurationMinutes: 60}.validate("rules[0]")
			require.ErrorContains(t, err, "no occurrence within 40 years", "%s in %q", src, tz)
			opt, err := rrule.StrToROption(src)
			require.NoError(t, err)
			w := &window{opt: *opt, interval: int64(opt.Interval)}
			require.Equal(t, int64(subDailyHorizonYears), w.searchYears(), "%s: the search does not grow with INTERVAL", src)
		}
	}
	// A sub-daily rule with day filters that does recur is kept.
	require.NoError(t, DeploymentWindow{RRule: "FREQ=SECONDLY;INTERVAL=1000;BYMONTH=2;BYMONTHDAY=29", DurationMinutes: 1}.validate("rules[0]"))
	require.NoError(t, DeploymentWindow{RRule: "FREQ=MINUTELY;INTERVAL=7;BYDAY=SA;BYHOUR=3", Timezone: "Europe/Berlin", DurationMinutes: 1}.validate("rules[0]"))
}

// TestDenseWindowEvaluationIsBounded: a window whose occurrences are much
// denser than its duration is evaluated from the occurrences just before
// now, not by walking every occurrence of the last duration. Found by
// FuzzWindow: FREQ=SECONDLY for a year walked 2^20 occurrences. The cost is
// counted in occurrences visited, not timed: at most the periods a cached
// shifted rule may lag (cacheSlack), the windows merged into the one
// containing now (maxMerge), and a few more.
func TestDenseWindowEvaluationIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 8, 0, 30, 0, time.UTC)
	in := &Input{Now: now, SuccessfulVersion: &release.DeploymentVersion{ID: "v1"}}
	const bound = maxMerge + 4*cacheSlack + 8
	for _, src := range []string{"FREQ=SECONDLY", "FREQ=MINUTELY", "FREQ=SECONDLY;INTERVAL=3"} {
		for _, allow := range []bool{true, false} {
			r := DeploymentWindow{RRule: src, DurationMinutes: maxWindowMinutes, AllowWindow: &allow}
			v := r.Evaluate(in)
			if allow {
				require.Equal(t, Allowed, v.Status, "%s: %s", src, v.Message)
			} else {
				require.Equal(t, Pending, v.Status, "%s: %s", src, v.Message)
			}
			w, err := compileWindow(src, "")
			require.NoError(t, err)
			_, visited := w.atCounting(now, time.Duration(maxWindowMinutes)*time.Minute)
			require.LessOrEqual(t, visited, bound, "%s allow=%t", src, allow)
		}
	}
}

// TestWindowSetPosWithinPeriod: a BYSETPOS inside the period's set is kept.
func TestWindowSetPosWithinPeriod(t *testing.T) {
	t.Parallel()
	p := Policy{ID: "p", WorkspaceID: "ws", Name: "p", Rules: []Rule{{ID: "w", Spec: DeploymentWindow{RRule: "FREQ=HOURLY;BYMINUTE=0,30;BYSETPOS=-1", DurationMinutes: 10}}}}
	require.NoError(t, p.Validate())
}

// TestWindowShiftMatchesDTSTART: iterating from a recent period start gives
// the same window state as iterating the rule from its DTSTART.
func TestWindowShiftMatchesDTSTART(t *testing.T) {
	t.Parallel()
	zones := []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"}
	days := []string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}
	rapid.Check(t, func(t *rapid.T) {
		freq := rapid.SampledFrom([]string{"YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"}).Draw(t, "freq")
		parts := []string{"FREQ=" + freq}
		if iv := rapid.IntRange(1, 5).Draw(t, "interval"); iv > 1 {
			parts = append(parts, fmt.Sprint("INTERVAL=", iv))
		}
		if rapid.Bool().Draw(t, "byday") {
			n := rapid.IntRange(1, 3).Draw(t, "ndays")
			var ds []string
			for i := range n {
				ds = append(ds, days[(rapid.IntRange(0, 6).Draw(t, "day")+i)%7])
			}
			parts = append(parts, "BYDAY="+strings.Join(ds, ","))
		}
		if freq != "MINUTELY" && rapid.Bool().Draw(t, "byhour") {
			parts = append(parts, fmt.Sprint("BYHOUR=", rapid.IntRange(0, 23).Draw(t, "hour")))
		}
		if rapid.Bool().Draw(t, "wkst") {
			parts = append(parts, "WKST="+rapid.SampledFrom(days).Draw(t, "wkstday"))
		}
		src := strings.Join(parts, ";")
		subDaily := freq == "HOURLY" || freq == "MINUTELY"
		if subDaily || rapid.Bool().Draw(t, "dtstart") {
			// Sub-daily rules start recently so the unshifted oracle stays cheap.
			ds := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 300*24*3600).Draw(t, "ds")) * time.Second)
			src = "DTSTART:" + ds.Format("20060102T150405") + "\nRRULE:" + src
		}
		tz := rapid.SampledFrom(zones).Draw(t, "tz")
		w, err := compileWindow(src, tz)
		if err != nil {
			t.Skip("rule never occurs")
		}
		dur := time.Duration(rapid.IntRange(1, 3*24*60).Draw(t, "minutes")) * time.Minute
		base, err := rrule.NewRRule(w.opt)
		require.NoError(t, err)
		for range 3 {
			now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 90*24*3600).Draw(t, "now")) * time.Second)
			got := w.at(now, dur)
			want, _ := scan(base.Iterator(), now, dur)
			require.Equal(t, want.inside, got.inside, "%s in %q at %s", src, tz, now)
			require.True(t, want.next.Equal(got.next), "next %s want %s: %s in %q at %s", got.next, want.next, src, tz, now)
			require.True(t, want.opened.Equal(got.opened), "%s at %s", src, now)
			require.True(t, want.closes.Equal(got.closes), "%s at %s", src, now)
		}
	})
}

func TestWindowCacheIsBounded(t *testing.T) {
	t.Parallel()
	rule := func(i int) string { return fmt.Sprintf("FREQ=DAILY;BYHOUR=%d;BYMINUTE=%d", i/60%24, i%60) }
	first, err := compileWindow(rule(0), "Europe/Berlin")
	require.NoError(t, err)
	for i := 1; i <= windowCacheSize+10; i++ {
		_, err := compileWindow(rule(i), "Europe/Berlin")
		require.NoError(t, err)
		require.LessOrEqual(t, windowCache.Len(), windowCacheSize)
	}
	// The first rule was dropped; compiled again it answers the same.
	again, err := compileWindow(rule(0), "Europe/Berlin")
	require.NoError(t, err)
	require.NotSame(t, first, again)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, first.at(now, time.Hour), again.at(now, time.Hour))
}
