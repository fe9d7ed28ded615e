package expr

import "testing"

// FuzzCompile: any CEL source compiles or is refused with an *Error that
// carries its position; a compiled program evaluates over JSON-like
// variables without a panic and within the cost limit. Seeded from the
// selectors of testdata/demo. Run with `make fuzz`.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`resource.kind == "KubernetesCluster"`,
		`environment.name == "prod"`,
		`resource.metadata["region"].startsWith("eu-")`,
		`[1, 2, 3].map(x, x * 2).size() > 2`,
		`result.value > 0.95 && result.count >= 3`,
		`"a".repeat(10)`,
	} {
		f.Add(s)
	}
	env := MustEnv("resource", "environment", "result")
	vars := map[string]any{
		"resource":    map[string]any{"kind": "KubernetesCluster", "name": "eu-1", "metadata": map[string]any{"region": "eu-west-1"}},
		"environment": map[string]any{"name": "prod"},
		"result":      map[string]any{"value": 0.97, "count": int64(3)},
	}
	f.Fuzz(func(t *testing.T, src string) {
		p, err := env.Compile(src)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Compile error is %T, not *Error: %v", err, err)
			}
			return
		}
		_, _ = p.Eval(vars)
	})
}
