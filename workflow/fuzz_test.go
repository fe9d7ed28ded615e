package workflow

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// fuzzSeeds adds every template under testdata to f.
func fuzzSeeds(f *testing.F) {
	for _, pattern := range []string{"../testdata/workflows/*.yaml", "../testdata/workflows/scenarios/*.yaml", "../testdata/demo/rollout.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
}

// FuzzLoadTemplate: any bytes either load into a valid template (which
// compiles into a plan and schedules a first pass) or are refused with
// problems that each have a message; never a panic or a hang. Seeded from
// the templates in testdata. Run with `make fuzz`.
func FuzzLoadTemplate(f *testing.F) {
	fuzzSeeds(f)
	f.Add([]byte(`{"apiVersion":"reconciler.dev/v1","kind":"WorkflowTemplate","metadata":{"name":"x"},"spec":{"tasks":[{"name":"a","type":"wait","wait":{"duration":"1s"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tpl, err := Load(data)
		if err != nil {
			inv, ok := err.(*InvalidError)
			if !ok {
				t.Fatalf("Load error is %T, not *InvalidError: %v", err, err)
			}
			for _, p := range inv.Problems {
				if p.Message == "" {
					t.Fatalf("problem without a message at %q", p.Path)
				}
			}
			return
		}
		if _, err := tpl.planOf(); err != nil {
			t.Fatalf("a loaded template does not compile: %v", err)
		}
		doc, err := json.Marshal(tpl)
		if err != nil {
			t.Fatalf("a loaded template does not encode: %v", err)
		}
		_, _ = Load(doc)
	})
}
