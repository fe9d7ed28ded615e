package expr

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompileAndEval(t *testing.T) {
	t.Parallel()
	env := MustEnv("resource", "version")
	cases := []struct {
		src  string
		vars map[string]any
		want bool
	}{
		{`resource.kind == "Kubernetes"`, map[string]any{"resource": map[string]any{"kind": "Kubernetes"}}, true},
		{`resource.kind == "Kubernetes"`, map[string]any{"resource": map[string]any{"kind": "VM"}}, false},
		{`version.tag.startsWith("v2")`, map[string]any{"version": map[string]any{"tag": "v2.1"}}, true},
		{`"prod" in resource.metadata.tiers`, map[string]any{"resource": map[string]any{"metadata": map[string]any{"tiers": []any{"prod"}}}}, true},
	}
	for _, c := range cases {
		p, err := env.Compile(c.src)
		require.NoError(t, err, c.src)
		got, err := p.EvalBool(c.vars)
		require.NoError(t, err, c.src)
		require.Equal(t, c.want, got, c.src)
	}
}

func TestCompileErrorHasPosition(t *testing.T) {
	t.Parallel()
	env := MustEnv("resource")
	_, err := env.Compile("resource.kind ==\n  == 3")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 2, e.Line)
	require.Positive(t, e.Column)
	require.Contains(t, err.Error(), "line 2")

	_, err = env.Compile("nosuchvar.x")
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Message, "nosuchvar")

	_, err = env.Compile("")
	require.Error(t, err)
}

func TestEvalBoolRejectsNonBool(t *testing.T) {
	t.Parallel()
	p, err := MustEnv("x").Compile("x + 1")
	require.NoError(t, err)
	_, err = p.EvalBool(map[string]any{"x": 1})
	require.ErrorContains(t, err, "want bool")
	// A missing key is an evaluation error, not a panic.
	p, err = MustEnv("x").Compile("x.missing == 1")
	require.NoError(t, err)
	_, err = p.EvalBool(map[string]any{"x": map[string]any{}})
	require.True(t, IsError(err))
}

func TestEvalNative(t *testing.T) {
	t.Parallel()
	p, err := MustEnv("r").Compile(`{"a": r.v * 2.0, "b": [1, "x"]}`)
	require.NoError(t, err)
	out, err := p.Eval(map[string]any{"r": map[string]any{"v": 2.5}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"a": 5.0, "b": []any{int64(1), "x"}}, out)
}

func TestCompileIsCached(t *testing.T) {
	t.Parallel()
	env := MustEnv("x")
	a, err := env.Compile("x > 1")
	require.NoError(t, err)
	b, err := env.Compile("x > 1")
	require.NoError(t, err)
	require.Same(t, a, b)
}

func BenchmarkEvalBool(b *testing.B) {
	env := MustEnv("resource")
	p, err := env.Compile(`resource.kind == "Kubernetes" && resource.metadata.region == "us-east-1"`)
	require.NoError(b, err)
	vars := map[string]any{"resource": map[string]any{"kind": "Kubernetes", "metadata": map[string]any{"region": "us-east-1"}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.EvalBool(vars); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCompileCacheIsBounded(t *testing.T) {
	t.Parallel()
	env := MustEnv("x")
	first, err := env.Compile("x == 0")
	require.NoError(t, err)
	for i := 1; i <= CacheSize+10; i++ {
		_, err := env.Compile(fmt.Sprintf("x == %d", i))
		require.NoError(t, err)
		require.LessOrEqual(t, env.cache.Len(), CacheSize)
	}
	require.Equal(t, CacheSize, env.cache.Len())
	// The oldest program was dropped: compiling it again
	// gives a new, equally working program.
	again, err := env.Compile("x == 0")
	require.NoError(t, err)
	require.NotSame(t, first, again)
	ok, err := again.EvalBool(map[string]any{"x": 0})
	require.NoError(t, err)
	require.True(t, ok)
}

// BenchmarkCompileCached is the selector hot path: every Match compiles
// its selector, which is a cache hit after the first.
func BenchmarkCompileCached(b *testing.B) {
	env := MustEnv("resource")
	src := `resource.kind == "Kubernetes"`
	_, err := env.Compile(src)
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := env.Compile(src); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestCompileBoolRefusesNonBooleans(t *testing.T) {
	t.Parallel()
	env := MustEnv("event")
	for src, ok := range map[string]bool{
		`event.job.status == "failure"`:                 true,
		`event.environment.name in ["prod", "staging"]`: true,
		`!(event.deployment.name == "web")`:             true,
		`event.job.status`:                              false, // dyn
		`1 + 2`:                                         false,
		`"x"`:                                           false,
	} {
		_, err := env.CompileBool(src)
		if ok {
			require.NoError(t, err, src)
			continue
		}
		var ee *Error
		require.ErrorAs(t, err, &ee, src)
		require.Contains(t, ee.Message, "want bool", src)
		require.Equal(t, 1, ee.Line, src)
	}
}

// TestProgramReads: an expression reads the variables it names, through
// fields, macros and functions, and no other.
func TestProgramReads(t *testing.T) {
	env := MustEnv("deployment", "environment", "resource", "version")
	cases := []struct {
		src   string
		reads []string
	}{
		{`environment.name == "staging"`, []string{"environment"}},
		{`true`, nil},
		{`resource.kind == "cluster" && deployment.name.startsWith("api")`, []string{"resource", "deployment"}},
		{`has(resource.metadata.region)`, []string{"resource"}},
		{`version.tag.matches("^v1") || [1, 2].exists(x, x == size(environment.name))`, []string{"version", "environment"}},
		{`resource`, []string{"resource"}},
	}
	for _, c := range cases {
		p, err := env.Compile(c.src)
		require.NoError(t, err, c.src)
		for _, v := range env.Vars() {
			require.Equal(t, slices.Contains(c.reads, v), p.Reads(v), "%s reads %s", c.src, v)
		}
	}
}
