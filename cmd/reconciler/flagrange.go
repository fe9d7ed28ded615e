package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// durationFlag is a duration flag that refuses values outside [min, max]
// as it is set, so the error names the one flag (or RECONCILER_* variable)
// and its allowed range.
type durationFlag struct {
	p        *time.Duration
	min, max time.Duration
}

// durationRangeVar binds a duration flag whose values must lie in [min, max].
func durationRangeVar(fs *pflag.FlagSet, p *time.Duration, name string, def, min, max time.Duration, usage string) {
	*p = def
	fs.Var(&durationFlag{p: p, min: min, max: max}, name, fmt.Sprintf("%s (%s to %s)", usage, fmtDuration(min), fmtDuration(max)))
	fs.Lookup(name).DefValue = def.String()
}

// Set parses and range-checks a duration.
func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration: want a number with a unit, e.g. 30s or 5m")
	}
	if d < f.min || d > f.max {
		return fmt.Errorf("out of range: want %s to %s, got %s", fmtDuration(f.min), fmtDuration(f.max), s)
	}
	*f.p = d
	return nil
}

// String renders the current value.
func (f *durationFlag) String() string {
	if f.p == nil {
		return "0s"
	}
	return f.p.String()
}

// Type names the value in help texts.
func (f *durationFlag) Type() string { return "duration" }

// intFlag is an integer flag that refuses values outside [min, max] as it
// is set.
type intFlag struct {
	p        *int
	min, max int
}

// intRangeVar binds an int flag whose values must lie in [min, max].
func intRangeVar(fs *pflag.FlagSet, p *int, name string, def, min, max int, usage string) {
	*p = def
	fs.Var(&intFlag{p: p, min: min, max: max}, name, fmt.Sprintf("%s (%d to %d)", usage, min, max))
	fs.Lookup(name).DefValue = strconv.Itoa(def)
}

// Set parses and range-checks an integer.
func (f *intFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	if n < int64(f.min) || n > int64(f.max) {
		return fmt.Errorf("out of range: want %d to %d, got %s", f.min, f.max, s)
	}
	*f.p = int(n)
	return nil
}

// String renders the current value.
func (f *intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

// Type names the value in help texts.
func (f *intFlag) Type() string { return "int" }

// fmtDuration renders a bound without trailing zero units (24h, not
// 24h0m0s).
func fmtDuration(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}
