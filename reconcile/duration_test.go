package reconcile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile"
)

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want time.Duration
	}{
		{`"90s"`, 90 * time.Second},
		{`"1h30m"`, 90 * time.Minute},
		{`30`, 30 * time.Second},
		{`1.5`, 1500 * time.Millisecond},
		{`"30"`, 30 * time.Second},
		{`" 2m "`, 2 * time.Minute},
		{`0`, 0},
	}
	for _, c := range ok {
		var d reconcile.Duration
		require.NoError(t, json.Unmarshal([]byte(c.in), &d), c.in)
		require.Equal(t, c.want, d.D(), c.in)
		out, err := json.Marshal(d)
		require.NoError(t, err)
		require.JSONEq(t, `"`+c.want.String()+`"`, string(out), c.in)
	}
	bad := []struct{ in, want string }{
		{`"soon"`, `want seconds or a duration like "30s", got "soon"`},
		{`"-5m"`, `duration "-5m" is negative`},
		{`-1`, `duration "-1" is out of range`},
		{`"NaN"`, `duration "NaN" is out of range`},
		{`1e300`, `is out of range`},
		{`""`, `got an empty string`},
		{`true`, `want seconds or a duration like "30s", got true`},
		{`{}`, `want seconds or a duration like "30s", got {}`},
	}
	for _, c := range bad {
		d := reconcile.Duration(time.Minute)
		err := json.Unmarshal([]byte(c.in), &d)
		require.ErrorContains(t, err, c.want, c.in)
		require.Equal(t, time.Minute, d.D(), "a refused value leaves the duration unchanged: %s", c.in)
	}
	d := reconcile.Duration(time.Minute)
	require.NoError(t, json.Unmarshal([]byte(`null`), &d))
	require.Equal(t, time.Minute, d.D(), "null leaves the duration unchanged")
}

func TestDurationOr(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Hour, reconcile.Duration(0).Or(time.Hour))
	require.Equal(t, time.Hour, reconcile.Duration(-time.Second).Or(time.Hour))
	require.Equal(t, time.Second, reconcile.Duration(time.Second).Or(time.Hour))
}

// FuzzParseDuration: a duration is parsed or refused, never negative and
// never a panic, as text and as JSON. Run with `make fuzz`.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "1h", "90", "1.5", "-1s", "1e300", "", " 2m ", "9223372036854775807", `"90s"`, "null"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := reconcile.ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		var u reconcile.Duration
		if err := u.UnmarshalJSON([]byte(s)); err == nil && u < 0 {
			t.Fatalf("UnmarshalJSON(%q) = %v, negative", s, u)
		}
	})
}
