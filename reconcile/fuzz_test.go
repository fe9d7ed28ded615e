package reconcile

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeSnapshot: any bytes either decode into a snapshot whose
// decision is taken and encoded without a panic, or are refused with an
// error; an accepted snapshot encodes and decodes again. Seeded from the
// recorded snapshots in testdata/snapshots. Run with `make fuzz`.
func FuzzDecodeSnapshot(f *testing.F) {
	files, _ := filepath.Glob("../testdata/snapshots/*.json")
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte(`{"kind":"repo"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSnapshot(data)
		if err != nil {
			return
		}
		a := Decide(s)
		if _, err := NewDecision(s.Ref(), a); err != nil {
			t.Fatalf("decision of an accepted snapshot does not encode: %v", err)
		}
		again, err := EncodeSnapshot(s)
		if err != nil {
			t.Fatalf("accepted snapshot does not encode: %v", err)
		}
		if _, err := DecodeSnapshot(again); err != nil {
			t.Fatalf("encoded snapshot is refused: %v\n%s", err, again)
		}
	})
}

// FuzzDuration: a duration field accepts a string or a number of seconds
// and refuses anything else, without a panic.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{`"15m"`, `90`, `"1h30m"`, `-1`, `1e300`, `"x"`, `null`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Duration
		_ = d.UnmarshalJSON(data)
		_, _ = d.MarshalJSON()
	})
}
