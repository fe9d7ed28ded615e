package workflow_test

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/workflow"
)

// largeTemplate generates a valid template of n tasks in the shapes that
// made validation super-linear: a long chain (each task depends on the one
// before and reads its outputs and the first task's), a wide fan-out of
// independent tasks (every one ready at once in the topological sort) and
// a fan-in task depending on all of them.
func largeTemplate(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: reconciler.dev/v1\nkind: WorkflowTemplate\nmetadata: {name: large}\nspec:\n  tasks:\n")
	b.WriteString("    - {name: t0, type: job, jobAgentRef: runner, config: {out: x}}\n")
	chain := n / 2
	for i := 1; i < chain; i++ {
		fmt.Fprintf(&b, "    - {name: t%d, type: job, jobAgentRef: runner, dependencies: [t%d], config: {a: \"{{tasks.t%d.outputs.x}}\", b: \"{{tasks.t0.outputs.x}}\"}}\n", i, i-1, i-1)
	}
	for i := chain; i < n-1; i++ {
		fmt.Fprintf(&b, "    - {name: t%d, type: wait, wait: {duration: 1s}}\n", i)
	}
	fmt.Fprintf(&b, "    - name: t%d\n      type: wait\n      wait: {duration: 1s}\n      dependencies:\n", n-1)
	for i := chain; i < n-1; i++ {
		fmt.Fprintf(&b, "        - t%d\n", i)
	}
	return []byte(b.String())
}

// cpuTime is the CPU time the process has used (user and system), which
// other processes competing for the cores do not inflate as they do the
// wall clock.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestValidateLargeTemplateIsLinear: templates of 4,000 and 32,000 tasks,
// as YAML and as JSON, load in bounded CPU time, and eight times the tasks
// take about eight times as long (a quadratic step would take 64).
func TestValidateLargeTemplateIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("times a large template")
	}
	timeLoad := func(n int, asJSON bool) time.Duration {
		src := largeTemplate(n)
		if asJSON {
			var err error
			src, err = yaml.YAMLToJSON(src)
			require.NoError(t, err)
		}
		runtime.GC()
		start := cpuTime(t)
		tpl, err := workflow.Load(src)
		d := cpuTime(t) - start
		require.NoError(t, err)
		require.Len(t, tpl.Spec.Tasks, n)
		return d
	}
	for _, asJSON := range []bool{false, true} {
		small, large := timeLoad(4_000, asJSON), timeLoad(32_000, asJSON)
		ratio := float64(large) / float64(small)
		t.Logf("JSON %v: 4,000 tasks: %v CPU; 32,000 tasks: %v CPU (ratio %.2f)", asJSON, small, large, ratio)
		require.Less(t, large, 20*time.Second, "32,000 tasks must load in bounded time")
		require.Less(t, ratio, 14.0, "validation grows faster than the template")
	}
}

// BenchmarkLoadLargeTemplate loads generated templates of growing size;
// ns/op per task stays flat when validation is linear:
//
//	go test -run '^$' -bench LoadLargeTemplate ./workflow/
func BenchmarkLoadLargeTemplate(b *testing.B) {
	for _, n := range []int{1_000, 4_000, 16_000, 64_000} {
		src := largeTemplate(n)
		b.Run(fmt.Sprintf("tasks=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := workflow.Load(src); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/task")
		})
	}
}
