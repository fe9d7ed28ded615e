package workflow

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	// The zone database is compiled in, so a timezone validates and
	// schedules the same on a minimal image without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// Cron is a parsed five-field cron schedule (minute hour day-of-month month
// day-of-week) in a time zone. Its fire times are the wall-clock times of
// the zone that match the fields, each mapped to an instant:
//
//   - a wall time that occurs twice (a clock set back) fires once, at its
//     first occurrence;
//   - a wall time that does not occur (a clock set forward) fires at the
//     end of the gap, the first instant after it; several skipped times
//     fire once there, and a time the schedule also names right after the
//     gap (03:00 after a 02:00-03:00 gap) is the same fire.
//
// As in cron(8), when both day-of-month and day-of-week are restricted
// (neither is *), a day matching either fires.
type Cron struct {
	minute, hour, dom, month, dow uint64 // bit i set: value i allowed
	domStar, dowStar              bool
	loc                           *time.Location
}

// cronField describes one field of a schedule.
type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
	dayNames   = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
	cronFields = [5]cronField{
		{name: "minute", min: 0, max: 59},
		{name: "hour", min: 0, max: 23},
		{name: "day of month", min: 1, max: 31},
		{name: "month", min: 1, max: 12, names: monthNames},
		{name: "day of week", min: 0, max: 7, names: dayNames},
	}
	cronMacros = map[string]string{
		"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
		"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
	}
	// daysIn is the most days each month can have (February in a leap year).
	daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
)

// MaxCronLen caps a schedule's length.
const MaxCronLen = 256

// LoadTimezone returns the named IANA zone (empty: UTC). "Local" is
// refused: a schedule must not depend on the machine it runs on.
func LoadTimezone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("timezone Local depends on the machine; name an IANA zone such as Europe/Paris")
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q; want an IANA zone such as Europe/Paris or UTC", name)
	}
	return loc, nil
}

// ParseCron parses a five-field schedule ("0 3 * * *": minute, hour,
// day of month, month, day of week; each field *, a value, a range a-b, a
// list, and a step /n; months and days may be named: jan, mon; day of week
// 0 and 7 are Sunday) or a macro (@yearly, @monthly, @weekly, @daily,
// @hourly) in loc (nil: UTC). A schedule no date can match (0 0 30 2 *) is
// refused. Errors name the field.
func ParseCron(spec string, loc *time.Location) (*Cron, error) {
	if len(spec) > MaxCronLen {
		return nil, fmt.Errorf("longer than %d bytes", MaxCronLen)
	}
	s := strings.TrimSpace(spec)
	if strings.HasPrefix(s, "@") {
		m, ok := cronMacros[s]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q; want @yearly, @monthly, @weekly, @daily or @hourly", s)
		}
		s = m
	}
	parts := strings.Fields(s)
	if len(parts) != 5 {
		return nil, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week), got %d", len(parts))
	}
	if loc == nil {
		loc = time.UTC
	}
	c := &Cron{loc: loc}
	dst := [5]*uint64{&c.minute, &c.hour, &c.dom, &c.month, &c.dow}
	for i, p := range parts {
		bits, err := parseCronField(p, cronFields[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cronFields[i].name, err)
		}
		*dst[i] = bits
	}
	if c.dow&(1<<7) != 0 {
		c.dow = c.dow&^(1<<7) | 1 // 7 is Sunday
	}
	// As in cron(8), a field starting with * counts as unrestricted.
	c.domStar, c.dowStar = strings.HasPrefix(parts[2], "*"), strings.HasPrefix(parts[4], "*")
	if c.domStar || !c.dowStar {
		return c, nil
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 && c.dom&(1<<(daysIn[m]+1)-1) != 0 {
			return c, nil
		}
	}
	return nil, fmt.Errorf("day of month: no month of the schedule has day %s", parts[2])
}

// parseCronField parses one comma-separated field into a bit set.
func parseCronField(s string, f cronField) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		rng, step := part, 1
		if i := strings.IndexByte(part, '/'); i >= 0 {
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n <= 0 || n > f.max {
				return 0, fmt.Errorf("bad step %q in %q; want 1-%d", part[i+1:], part, f.max)
			}
			rng, step = part[:i], n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*":
			if f.max == 7 {
				hi = 6 // * in day of week is 0-6
			}
		case rng == "":
			return 0, fmt.Errorf("empty value in %q", s)
		default:
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = cronValue(a, f); err != nil {
				return 0, err
			}
			hi = lo
			if isRange {
				if hi, err = cronValue(b, f); err != nil {
					return 0, err
				}
				if hi < lo {
					return 0, fmt.Errorf("range %q runs backwards", rng)
				}
			} else if step > 1 {
				hi = f.max // a/n: from a to the end
			}
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

// cronValue reads one number or name of a field.
func cronValue(s string, f cronField) (int, error) {
	if n, ok := f.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", n, f.min, f.max)
	}
	return n, nil
}

// Location is the schedule's time zone.
func (c *Cron) Location() *time.Location { return c.loc }

// maxCronDays bounds the search for the next fire: a leap day (29 February)
// falling on a given weekday recurs within 28 years.
const maxCronDays = 366 * 29

// Next returns the first fire time strictly after after, or the zero time
// when there is none within maxCronDays (a schedule ParseCron accepts
// always has one). It is pure: the time is passed in.
func (c *Cron) Next(after time.Time) time.Time {
	local := after.In(c.loc)
	y, mo, d := local.Date()
	// Start from the wall-clock day of after: a fire of that day or the
	// next ones is the answer, except fires whose instant is not after it
	// (a wall time repeated by a clock set back, already passed).
	for i := 0; i < maxCronDays; i++ {
		day := time.Date(y, mo, d+i, 12, 0, 0, 0, time.UTC) // calendar arithmetic only
		if !c.dayMatches(day) {
			continue
		}
		for h := 0; h < 24; h++ {
			if c.hour&(1<<h) == 0 {
				continue
			}
			for m := 0; m < 60; m++ {
				if c.minute&(1<<m) == 0 {
					continue
				}
				if t := c.instant(day.Year(), day.Month(), day.Day(), h, m); t.After(after) {
					return t
				}
			}
		}
	}
	return time.Time{}
}

// Last returns the latest fire time at or before now and not before since,
// or the zero time when there is none. It searches backwards by doubling a
// window, so its cost grows with the log of the gap between fires.
func (c *Cron) Last(now, since time.Time) time.Time {
	for w := time.Minute; ; w *= 2 {
		from := now.Add(-w)
		if from.Before(since) {
			from = since.Add(-time.Nanosecond)
		}
		var last time.Time
		for t := c.Next(from); !t.IsZero() && !t.After(now); t = c.Next(t) {
			last = t
		}
		if !last.IsZero() || !from.After(since) || w > maxCronDays*24*time.Hour {
			return last
		}
	}
}

// dayMatches applies the day-of-month, month and day-of-week fields.
func (c *Cron) dayMatches(day time.Time) bool {
	if c.month&(1<<int(day.Month())) == 0 {
		return false
	}
	dom := c.dom&(1<<day.Day()) != 0
	dow := c.dow&(1<<int(day.Weekday())) != 0
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// instant maps a wall-clock time of the zone to the instant it fires: its
// first occurrence, or the end of the gap it falls in.
func (c *Cron) instant(y int, mo time.Month, d, h, m int) time.Time {
	t := time.Date(y, mo, d, h, m, 0, 0, c.loc)
	if t.Hour() != h || t.Minute() != m || t.Day() != d {
		// In a gap: time.Date used the offset of one side of it. Landing
		// after the wall time, the gap ended where t's zone began; landing
		// before it, the gap starts (and so ends) where t's zone ends.
		start, end := t.ZoneBounds()
		wall := time.Date(y, mo, d, h, m, 0, 0, time.UTC)
		got := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
		if got.Before(wall) {
			return end
		}
		return start
	}
	// A repeated wall time: the same wall clock an offset change earlier
	// is its first occurrence.
	start, _ := t.ZoneBounds()
	if !start.IsZero() {
		_, offNow := t.Zone()
		_, offBefore := start.Add(-time.Nanosecond).Zone()
		if shift := time.Duration(offBefore-offNow) * time.Second; shift > 0 {
			if first := t.Add(-shift); !first.Before(start.Add(-shift)) && first.Before(start) {
				return first
			}
		}
	}
	return t
}
