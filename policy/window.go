package policy

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/teambition/rrule-go"
)

// Limits of deployment-window recurrences.
const (
	// maxWindowCount bounds COUNT, whose occurrences are precomputed.
	maxWindowCount = 10000
	// maxScanSteps bounds the occurrences visited by one evaluation.
	maxScanSteps = 1 << 20
	// cacheSlack is how many intervals a cached shifted rule may lag
	// behind the ideal start before it is rebuilt.
	cacheSlack = 32
	// windowCacheSize bounds the compiled recurrences kept (the oldest
	// dropped first; lookups take only a read lock): rules come from
	// stored policies, so their number is open-ended.
	windowCacheSize = 1024
)

// defaultDTStart anchors rules without DTSTART: Monday 2001-01-01 00:00:00
// in the window's time zone, so defaulted BYDAY/BYMONTHDAY/BYHOUR... are
// Monday, the 1st, January and midnight.
func defaultDTStart(loc *time.Location) time.Time { return time.Date(2001, 1, 1, 0, 0, 0, 0, loc) }

// window is a compiled recurrence. Occurrences are computed in the wall
// clock of loc. To keep evaluation cheap, it iterates from a recent period
// start (shifted by whole multiples of INTERVAL periods from DTSTART) rather
// than from DTSTART itself; the BYxxx values that rrule would default from
// DTSTART are filled in explicitly first, so the shifted rule yields exactly
// the same occurrences from its start on. COUNT rules cannot be shifted and
// are precomputed instead.
type window struct {
	loc      *time.Location
	opt      rrule.ROption // defaults filled, Dtstart = base
	base     time.Time
	interval int64
	fixed    []time.Time // COUNT rules: every occurrence, ascending
	cur      atomic.Pointer[shiftedRule]
}

type shiftedRule struct {
	k    int64 // periods after base's period
	rule rrule.RRule
}

type windowEntry struct {
	w   *window
	err error
}

// windowCache maps tz + "\n" + rrule to its compiled windowEntry.
var windowCache = mustLRU[string, windowEntry](windowCacheSize)

// mustLRU builds a bounded cache of a constant, positive size.
func mustLRU[K comparable, V any](size int) *lru.Cache[K, V] {
	c, err := lru.New[K, V](size)
	if err != nil {
		panic(err) // only for a size <= 0, a programming error
	}
	return c
}

// errField is a compile error naming the parameter at fault.
type errField struct {
	field string
	err   error
}

func (e *errField) Error() string { return e.err.Error() }

// compileWindow parses and caches a recurrence in time zone tz ("" = UTC).
func compileWindow(src, tz string) (*window, error) {
	key := tz + "\n" + src
	if ent, ok := windowCache.Peek(key); ok {
		return ent.w, ent.err
	}
	w, err := buildWindow(src, tz)
	windowCache.Add(key, windowEntry{w, err})
	return w, err
}

func buildWindow(src, tz string) (*window, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, &errField{"timezone", fmt.Errorf("unknown IANA time zone %q", tz)}
		}
		loc = l
	}
	s := strings.TrimSpace(src)
	if s == "" {
		return nil, &errField{"rrule", errors.New("is required")}
	}
	opt, err := rrule.StrToROptionInLocation(s, loc)
	if err != nil {
		return nil, &errField{"rrule", fmt.Errorf("invalid RRULE: %v", err)}
	}
	if opt.Count > maxWindowCount {
		return nil, &errField{"rrule", fmt.Errorf("COUNT above %d is not supported", maxWindowCount)}
	}
	if opt.Interval < 1 {
		opt.Interval = 1
	}
	base := opt.Dtstart
	if base.IsZero() {
		base = defaultDTStart(loc)
	}
	base = base.In(loc).Truncate(time.Second)
	opt.Dtstart = base
	fillDefaults(opt, base)
	if _, err := rrule.NewRRule(*opt); err != nil {
		return nil, &errField{"rrule", fmt.Errorf("invalid RRULE: %v", err)}
	}
	if !gridReachable(opt, base) {
		return nil, &errField{"rrule", errors.New("the RRULE never produces an occurrence: INTERVAL never lands on the BYHOUR/BYMINUTE/BYSECOND values")}
	}
	if !setPosReachable(opt) {
		return nil, &errField{"rrule", errors.New("the RRULE never produces an occurrence: no BYSETPOS position exists in a period of its frequency")}
	}
	w := &window{loc: loc, opt: *opt, base: base, interval: int64(opt.Interval)}
	if !w.possible() {
		if opt.Freq >= rrule.HOURLY {
			return nil, &errField{"rrule", fmt.Errorf("the RRULE produces no occurrence within %d years (an hourly, minutely or secondly rule must recur at least that often)", subDailyHorizonYears)}
		}
		return nil, &errField{"rrule", errors.New("the RRULE never produces an occurrence")}
	}
	if opt.Count > 0 {
		r, _ := rrule.NewRRule(*opt)
		w.fixed = r.All()
	}
	return w, nil
}

// fillDefaults sets the BYxxx values rrule derives from DTSTART, so the
// rule no longer depends on DTSTART beyond its period grid.
func fillDefaults(o *rrule.ROption, d time.Time) {
	if len(o.Byweekno) == 0 && len(o.Byyearday) == 0 && len(o.Bymonthday) == 0 &&
		len(o.Byweekday) == 0 && len(o.Byeaster) == 0 {
		switch o.Freq {
		case rrule.YEARLY:
			if len(o.Bymonth) == 0 {
				o.Bymonth = []int{int(d.Month())}
			}
			o.Bymonthday = []int{d.Day()}
		case rrule.MONTHLY:
			o.Bymonthday = []int{d.Day()}
		case rrule.WEEKLY:
			o.Byweekday = []rrule.Weekday{weekdays[pyWeekday(d)]}
		}
	}
	if len(o.Byhour) == 0 && o.Freq < rrule.HOURLY {
		o.Byhour = []int{d.Hour()}
	}
	if len(o.Byminute) == 0 && o.Freq < rrule.MINUTELY {
		o.Byminute = []int{d.Minute()}
	}
	if len(o.Bysecond) == 0 && o.Freq < rrule.SECONDLY {
		o.Bysecond = []int{d.Second()}
	}
}

var weekdays = []rrule.Weekday{rrule.MO, rrule.TU, rrule.WE, rrule.TH, rrule.FR, rrule.SA, rrule.SU}

// pyWeekday is Monday=0 ... Sunday=6.
func pyWeekday(t time.Time) int { return (int(t.Weekday()) + 6) % 7 }

// possible reports whether the unbounded pattern ever produces an
// occurrence. rrule iterates up to year 9999 looking for one, so the check
// starts a few decades before that year to stay bounded: 40 periods of
// INTERVAL years, months, weeks or days (rrule steps a period at a time, so
// about as many steps whatever INTERVAL is). A sub-daily rule skips a
// day whose BYxxx day filters fail a day at a time, so its search costs a
// step per day searched; it searches 40 years whatever INTERVAL is, and a
// sub-daily rule with no occurrence in 40 years is refused
// (subDailyHorizonYears).
func (w *window) possible() bool {
	probe := time.Date(rrule.MAXYEAR-int(w.searchYears()), 1, 1, 0, 0, 0, 0, w.loc)
	o := w.opt
	o.Count, o.Until = 0, time.Time{}
	if start, _, ok := w.shiftedStart(probe); ok {
		o.Dtstart = start
	}
	r, err := rrule.NewRRule(o)
	if err != nil {
		return false
	}
	return !r.After(o.Dtstart, true).IsZero()
}

// searchYears is how many years before rrule's last year possible
// searches for an occurrence.
func (w *window) searchYears() int64 {
	if w.opt.Freq >= rrule.HOURLY {
		return subDailyHorizonYears
	}
	return min(40*w.interval, 9000)
}

// subDailyHorizonYears is how far possible searches for an occurrence of
// an hourly, minutely or secondly rule.
const subDailyHorizonYears = 40

// gridReachable reports whether a sub-daily rule's time grid (DTSTART's
// time of day plus multiples of INTERVAL) ever meets its BYHOUR, BYMINUTE
// and BYSECOND values. rrule loops forever on such rules, so they must be
// refused before iterating.
func gridReachable(o *rrule.ROption, base time.Time) bool {
	var unit int
	switch o.Freq {
	case rrule.HOURLY:
		unit = 3600
	case rrule.MINUTELY:
		unit = 60
	case rrule.SECONDLY:
		unit = 1
	default:
		return true
	}
	hours, minutes, seconds := o.Byhour, o.Byminute, []int{0}
	if o.Freq == rrule.SECONDLY {
		seconds = o.Bysecond
	}
	if o.Freq == rrule.HOURLY {
		minutes = []int{0}
	}
	if len(hours) == 0 && len(minutes) == 0 && len(seconds) == 0 {
		return true
	}
	all := func(vals []int, n int) []int {
		if len(vals) > 0 {
			return vals
		}
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	// Work in units of the frequency: hours, minutes or seconds of the day.
	perDay := 86400 / unit
	g := gcd(o.Interval, perDay)
	h0, m0, s0 := base.Clock()
	start := (h0*3600 + m0*60 + s0) / unit
	for _, h := range all(hours, 24) {
		for _, m := range all(minutes, 60) {
			for _, sec := range all(seconds, 60) {
				if ((h*3600+m*60+sec)/unit)%g == start%g {
					return true
				}
			}
		}
	}
	return false
}

// setPosReachable reports whether a sub-daily rule's BYSETPOS can select
// anything: each period (an hour, a minute, a second) holds one occurrence
// per combination of its finer BYxxx values, and a position beyond that
// count selects none, in every period. rrule would look for one period by
// period until year 9999 (a minutely rule: millions of periods), so such
// rules are refused before iterating. Daily and longer periods are few
// enough to iterate.
func setPosReachable(o *rrule.ROption) bool {
	if len(o.Bysetpos) == 0 {
		return true
	}
	size := 1
	switch o.Freq {
	case rrule.HOURLY:
		size = max(len(o.Byminute), 1) * max(len(o.Bysecond), 1)
	case rrule.MINUTELY:
		size = max(len(o.Bysecond), 1)
	case rrule.SECONDLY:
	default:
		return true
	}
	for _, p := range o.Bysetpos {
		if (p > 0 && p <= size) || (p < 0 && -p <= size) {
			return true
		}
	}
	return false
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// windowState is where now falls relative to the windows.
type windowState struct {
	inside bool
	// opened is the start of the window containing now (inside).
	opened time.Time
	// closes is when the (merged, if windows overlap) window containing now
	// ends (inside).
	closes time.Time
	// next is the first window start after now; zero when none.
	next time.Time
}

// at computes the window state at now for windows lasting dur.
func (w *window) at(now time.Time, dur time.Duration) windowState {
	st, _ := w.atCounting(now, dur)
	return st
}

// atCounting is at, also counting the occurrences it visited: the cost of
// an evaluation, which tests bound instead of timing it.
func (w *window) atCounting(now time.Time, dur time.Duration) (windowState, int) {
	visited := 0
	counted := func(next func() (time.Time, bool)) func() (time.Time, bool) {
		return func() (time.Time, bool) {
			visited++
			return next()
		}
	}
	if w.fixed != nil {
		i := sort.Search(len(w.fixed), func(i int) bool { return w.fixed[i].After(now) })
		start := max(i-1, 0)
		next := func() (time.Time, bool) {
			if start >= len(w.fixed) {
				return time.Time{}, false
			}
			start++
			return w.fixed[start-1], true
		}
		st, _ := scan(counted(next), now, dur)
		return st, visited
	}
	// The latest occurrence at or before now decides; start from the
	// periods just before now, and go back as far as the duration only
	// when they hold none (a sparse rule), so a rule far denser than its
	// duration is not walked occurrence by occurrence.
	if st, found := scan(counted(w.ruleFor(now).Iterator()), now, dur); found {
		return st, visited
	}
	st, _ := scan(counted(w.ruleFor(now.Add(-dur)).Iterator()), now, dur)
	return st, visited
}

// maxMerge bounds how many overlapping windows are merged into one.
const maxMerge = 1000

// scan walks occurrences (ascending) to find where now falls; found
// reports whether it met an occurrence at or before now.
func scan(next func() (time.Time, bool), now time.Time, dur time.Duration) (st windowState, found bool) {
	var prev time.Time
	for steps := 0; steps < maxScanSteps; steps++ {
		t, ok := next()
		if !ok {
			break
		}
		if t.After(now) {
			st.next = t
			break
		}
		prev = t
	}
	found = !prev.IsZero()
	if !found || !now.Before(prev.Add(dur)) {
		return st, found
	}
	st.inside, st.opened, st.closes = true, prev, prev.Add(dur)
	for merged := 0; !st.next.IsZero() && !st.next.After(st.closes) && merged < maxMerge; merged++ {
		st.closes = later(st.closes, st.next.Add(dur))
		t, ok := next()
		if !ok {
			st.next = time.Time{}
			break
		}
		st.next = t
	}
	return st, true
}

// ruleFor returns a private copy of a rule whose DTSTART is a period start
// at or before target, at most cacheSlack intervals earlier than needed.
func (w *window) ruleFor(target time.Time) *rrule.RRule {
	start, k, ok := w.shiftedStart(target)
	if !ok {
		k = 0
	}
	if c := w.cur.Load(); c != nil && c.k <= k && k-c.k <= cacheSlack*w.interval {
		r := c.rule
		return &r
	}
	o := w.opt
	if k > 0 {
		o.Dtstart = start
	}
	r, err := rrule.NewRRule(o)
	if err != nil { // cannot happen: the options were validated
		r, _ = rrule.NewRRule(w.opt)
		k = 0
	}
	w.cur.Store(&shiftedRule{k: k, rule: *r})
	cp := *r
	return &cp
}

// shiftedStart is the start of the latest period that begins at least one
// interval before target's period and lies a whole number of intervals
// after base's period, with k its period offset. ok is false when no such
// period follows base (use base itself).
func (w *window) shiftedStart(target time.Time) (time.Time, int64, bool) {
	e := w.periodsUntil(target.In(w.loc))
	n := w.interval
	k := floorDiv(e, n)*n - n
	for tries := 0; k > 0 && tries < 4; tries++ {
		if t, ok := w.periodStart(k); ok {
			return t, k, true
		}
		k -= n
	}
	return time.Time{}, 0, false
}

// periodsUntil counts whole periods from base's period to t's period, on
// the wall clock.
func (w *window) periodsUntil(t time.Time) int64 {
	b := w.base
	switch w.opt.Freq {
	case rrule.YEARLY:
		return int64(t.Year() - b.Year())
	case rrule.MONTHLY:
		return int64(t.Year()-b.Year())*12 + int64(t.Month()-b.Month())
	case rrule.WEEKLY:
		return floorDiv(civilDay(t)-w.weekStart(), 7)
	case rrule.DAILY:
		return civilDay(t) - civilDay(b)
	}
	unit := w.unitSeconds()
	return floorDiv(wallSeconds(t)-floorDiv(wallSeconds(b), unit)*unit, unit)
}

// periodStart is the start of the period k periods after base's. ok is
// false when that wall-clock time does not exist (a DST gap) for sub-daily
// frequencies, whose iteration starts from the DTSTART clock.
func (w *window) periodStart(k int64) (time.Time, bool) {
	b := w.base
	switch w.opt.Freq {
	case rrule.YEARLY:
		return time.Date(b.Year()+int(k), 1, 1, 0, 0, 0, 0, w.loc), true
	case rrule.MONTHLY:
		return time.Date(b.Year(), b.Month()+time.Month(k), 1, 0, 0, 0, 0, w.loc), true
	case rrule.WEEKLY:
		return dayStart(w.weekStart()+7*k, w.loc), true
	case rrule.DAILY:
		return dayStart(civilDay(b)+k, w.loc), true
	}
	unit := w.unitSeconds()
	ws := floorDiv(wallSeconds(b), unit)*unit + k*unit
	day, sec := floorDiv(ws, 86400), ws-floorDiv(ws, 86400)*86400
	h, m, s := int(sec/3600), int(sec%3600/60), int(sec%60)
	d := dayStart(day, time.UTC)
	t := time.Date(d.Year(), d.Month(), d.Day(), h, m, s, 0, w.loc)
	return t, t.Hour() == h && t.Minute() == m && t.Second() == s
}

func (w *window) unitSeconds() int64 {
	switch w.opt.Freq {
	case rrule.HOURLY:
		return 3600
	case rrule.MINUTELY:
		return 60
	}
	return 1
}

// weekStart is the civil day of the WKST day starting base's week.
func (w *window) weekStart() int64 {
	wkst := w.opt.Wkst.Day()
	return civilDay(w.base) - int64((pyWeekday(w.base)-wkst+7)%7)
}

// civilDay numbers t's wall-clock date (days since 1970-01-01).
func civilDay(t time.Time) int64 {
	y, m, d := t.Date()
	return floorDiv(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix(), 86400)
}

// wallSeconds numbers t's wall-clock second.
func wallSeconds(t time.Time) int64 {
	h, m, s := t.Clock()
	return civilDay(t)*86400 + int64(h*3600+m*60+s)
}

// dayStart is midnight of civil day n in loc.
func dayStart(n int64, loc *time.Location) time.Time {
	d := time.Unix(n*86400, 0).UTC()
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, loc)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
