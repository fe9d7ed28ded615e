package reconcile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration is the one duration type of the domain (run settings, policy
// rules, workflow templates). It is written as a Go duration string ("90s",
// "15m", "1h30m") or a number of seconds, as a JSON number (30, 1.5) or a
// string of one ("30", as Argo accepts), and encodes as a Go duration string.
// Negative durations are refused.
type Duration time.Duration

// D converts to time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Or returns d, or def when d is zero or negative.
func (d Duration) Or(def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return time.Duration(d)
}

// ParseDuration reads a duration: a number of seconds ("30", "1.5") or a Go
// duration string ("90s", "1h30m"). Empty, negative and out-of-range values
// are refused; the error quotes the input.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("want seconds or a duration like \"30s\", got an empty string")
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if f < 0 || math.IsNaN(f) || f > float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("duration %q is out of range (want 0 or more seconds)", s)
		}
		return Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("want seconds or a duration like \"30s\", got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return Duration(d), nil
}

// MarshalJSON encodes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts a JSON number of seconds or a string ParseDuration
// reads; null leaves d unchanged.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	var s string
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("want seconds or a duration like \"30s\": %w", err)
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("want seconds or a duration like \"30s\", got %s", b)
		}
		s = n.String()
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}
