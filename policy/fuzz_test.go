package policy

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// FuzzDecodePolicy: any bytes either decode into a valid policy (its CEL
// selectors and RRULE windows compiled) or are refused with an error;
// never a panic. Seeded from the policies of testdata/demo/release.yaml.
// Run with `make fuzz`.
func FuzzDecodePolicy(f *testing.F) {
	if src, err := os.ReadFile("../testdata/demo/release.yaml"); err == nil {
		var demo struct {
			Policies []json.RawMessage `json:"policies"`
		}
		if j, err := yaml.YAMLToJSON(src); err == nil && json.Unmarshal(j, &demo) == nil {
			for _, p := range demo.Policies {
				f.Add([]byte(p))
			}
		}
	}
	f.Add([]byte(`{"id":"w","workspace_id":"ws","name":"w","priority":1,"enabled":true,"rules":[{"id":"r","type":"deploymentWindow","rrule":"FREQ=WEEKLY;BYDAY=MO","duration_minutes":60}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("a decoded policy does not validate again: %v", err)
		}
	})
}

// FuzzWindow: an RRULE window in any time zone compiles or is refused,
// and a compiled one, as an allow and as a deny window, evaluates at any
// instant in bounded time (the target has a successful deployment, so
// the windows apply); a pending verdict names a later time.
func FuzzWindow(f *testing.F) {
	for _, s := range []string{
		"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH;BYHOUR=9",
		"DTSTART:20240101T090000Z\nRRULE:FREQ=DAILY;COUNT=10",
		"FREQ=MONTHLY;BYMONTHDAY=31",
		"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
		"FREQ=SECONDLY;INTERVAL=7",
		"FREQ=MINUTELY;BYSETPOS=-1",
	} {
		f.Add(s, "", 60, int64(1_700_000_000))
		f.Add(s, "Europe/Berlin", 1, int64(0))
	}
	f.Fuzz(func(t *testing.T, rrule, tz string, minutes int, unix int64) {
		r := DeploymentWindow{RRule: rrule, Timezone: tz, DurationMinutes: minutes}
		if r.validate("rules[0]") != nil {
			return
		}
		in := &Input{Now: time.Unix(unix%(1<<34), 0).UTC(), SuccessfulVersion: &release.DeploymentVersion{ID: "v1"}}
		for _, allow := range []bool{true, false} {
			r.AllowWindow = &allow
			v := r.Evaluate(in)
			if v.Status == Pending && !v.Until.After(in.Now) {
				t.Fatalf("%q in %q at %s (allow %t): pending until %s, not after now", rrule, tz, in.Now, allow, v.Until)
			}
		}
	})
}
