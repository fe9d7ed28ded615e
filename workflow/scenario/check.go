package scenario

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/reconcilerhq/reconciler/workflow"
)

// Run prepares the scenario and drives it to completion with the pure
// scheduler and the simulated executor.
func (sc *Scenario) Run() (*Sim, error) {
	sim, err := sc.Prepare()
	if err != nil {
		return nil, err
	}
	if err := sim.Run(10_000); err != nil {
		return sim, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	return sim, nil
}

// Check compares a finished run with the scenario's expectations and
// returns one line per mismatch (none when it passed).
func (sc *Scenario) Check(sim *Sim) []string {
	var bad []string
	e := sc.Expect
	if sim.In.Workflow.Phase != e.Phase {
		bad = append(bad, fmt.Sprintf("workflow phase %s, want %s", sim.In.Workflow.Phase, e.Phase))
	}
	runs := map[string]*workflow.TaskRun{}
	for i := range sim.In.TaskRuns {
		tr := &sim.In.TaskRuns[i]
		runs[RunKey(tr.Task, tr.MatrixIndex)] = tr
	}
	for _, k := range sortedKeys(e.TaskRuns) {
		tr, ok := runs[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: no TaskRun, want %s", k, e.TaskRuns[k]))
		case tr.Phase != e.TaskRuns[k]:
			bad = append(bad, fmt.Sprintf("%s: phase %s, want %s (%s)", k, tr.Phase, e.TaskRuns[k], tr.Message))
		}
	}
	if e.AllRuns {
		for _, k := range sortedKeys(runs) {
			if _, ok := e.TaskRuns[k]; !ok {
				bad = append(bad, fmt.Sprintf("%s: unexpected TaskRun in phase %s", k, runs[k].Phase))
			}
		}
	}
	for _, k := range sortedKeys(e.Attempts) {
		if tr, ok := runs[k]; !ok || tr.Attempt != e.Attempts[k] {
			bad = append(bad, fmt.Sprintf("%s: attempt %d, want %d", k, attempt(tr), e.Attempts[k]))
		}
	}
	for _, k := range sortedKeys(e.Messages) {
		if tr, ok := runs[k]; !ok || !strings.Contains(tr.Message, e.Messages[k]) {
			bad = append(bad, fmt.Sprintf("%s: message %q, want it to contain %q", k, message(tr), e.Messages[k]))
		}
	}
	created := func(k string) (workflow.CreateTaskRun, bool) {
		tr, ok := runs[k]
		if !ok {
			return workflow.CreateTaskRun{}, false
		}
		c, ok := sim.Created[tr.ID]
		return c, ok
	}
	for _, k := range sortedKeys(e.Configs) {
		c, _ := created(k)
		if msg := subset(workflow.Normalize(e.Configs[k]), c.Config, "config"); msg != "" {
			bad = append(bad, k+": stored "+msg)
		}
	}
	for _, k := range sortedKeys(e.DispatchConfigs) {
		c, _ := created(k)
		if msg := subset(workflow.Normalize(e.DispatchConfigs[k]), c.DispatchConfig, "config"); msg != "" {
			bad = append(bad, k+": dispatch "+msg)
		}
	}
	return bad
}

func attempt(tr *workflow.TaskRun) int {
	if tr == nil {
		return -1
	}
	return tr.Attempt
}

func message(tr *workflow.TaskRun) string {
	if tr == nil {
		return "<no run>"
	}
	return tr.Message
}

// subset reports where got lacks something want has.
func subset(want, got any, path string) string {
	wm, ok := want.(map[string]any)
	if !ok {
		if !reflect.DeepEqual(want, workflow.Normalize(got)) {
			return fmt.Sprintf("%s is %v, want %v", path, got, want)
		}
		return ""
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return fmt.Sprintf("%s is %T, want an object", path, got)
	}
	for _, k := range sortedKeys(wm) {
		if msg := subset(wm[k], gm[k], path+"."+k); msg != "" {
			return msg
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
