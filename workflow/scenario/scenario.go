package scenario

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/reconcile"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Start is the simulated clock's starting time.
var Start = time.Date(2026, 1, 12, 10, 0, 0, 0, time.UTC)

// Scenario is one scripted workflow run: a template, its inputs, the
// outcome of every job, and the phases expected at the end.
type Scenario struct {
	// Name defaults to the file name without extension.
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	// TemplateFile names a template file relative to the scenario file;
	// Template inlines one. Exactly one is set.
	TemplateFile string          `json:"templateFile,omitempty"`
	Template     json.RawMessage `json:"template,omitempty"`
	// Parameters are the explicit parameter values.
	Parameters    map[string]any `json:"parameters,omitempty"`
	VersionConfig map[string]any `json:"versionConfig,omitempty"`
	// Variables are deployment variables; Secrets are deployment variables
	// marked sensitive (passed as workflow.SecretValue).
	Variables map[string]any    `json:"variables,omitempty"`
	Secrets   map[string]string `json:"secrets,omitempty"`
	Release   map[string]any    `json:"release,omitempty"`
	Inputs    struct {
		Resources      []map[string]any `json:"resources,omitempty"`
		Environments   []map[string]any `json:"environments,omitempty"`
		ReleaseTargets []map[string]any `json:"releaseTargets,omitempty"`
	} `json:"inputs,omitempty"`
	// JobDuration is how long each job attempt runs (default 10s).
	JobDuration *reconcile.Duration `json:"jobDuration,omitempty"`
	// CancelAfter requests cancellation this long after the start.
	CancelAfter *reconcile.Duration `json:"cancelAfter,omitempty"`
	// Outcomes script jobs by "task" (every item) or "task[i]" (one item):
	// attempts joined by "-then-", each succeed, fail or hang; the last one
	// repeats. Unlisted jobs succeed.
	Outcomes map[string]string `json:"outcomes,omitempty"`
	// Outputs are what successful jobs report, by "task" or "task[i]".
	Outputs map[string]map[string]any `json:"outputs,omitempty"`
	Expect  Expect                    `json:"expect"`

	template *workflow.Template
}

// Expect is the end state a scenario must reach.
type Expect struct {
	Phase workflow.WorkflowPhase `json:"phase"`
	// TaskRuns maps "task" or "task[i]" to the run's final phase; with
	// AllRuns, no other run may exist.
	TaskRuns map[string]workflow.TaskPhase `json:"taskRuns,omitempty"`
	AllRuns  bool                          `json:"allRuns,omitempty"`
	// Attempts maps a run to its final attempt number.
	Attempts map[string]int `json:"attempts,omitempty"`
	// Configs and DispatchConfigs hold fields the stored and the dispatch
	// copy of a run's resolved config must contain (a subset match).
	Configs         map[string]map[string]any `json:"configs,omitempty"`
	DispatchConfigs map[string]map[string]any `json:"dispatchConfigs,omitempty"`
	// Messages maps a run to a substring of its final message.
	Messages map[string]string `json:"messages,omitempty"`
}

// Load reads and checks one scenario file from fsys.
func Load(fsys fs.FS, name string) (*Scenario, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	var sc Scenario
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(path.Base(name), path.Ext(name))
	}
	tdata := []byte(sc.Template)
	switch {
	case sc.TemplateFile != "" && len(sc.Template) > 0:
		return nil, fmt.Errorf("scenario %s: set template or templateFile, not both", name)
	case sc.TemplateFile != "":
		if tdata, err = fs.ReadFile(fsys, path.Join(path.Dir(name), sc.TemplateFile)); err != nil {
			return nil, fmt.Errorf("scenario %s: templateFile: %w", name, err)
		}
	case len(sc.Template) == 0:
		return nil, fmt.Errorf("scenario %s: no template", name)
	}
	if sc.template, err = workflow.Load(tdata); err != nil {
		return nil, fmt.Errorf("scenario %s: template: %w", name, err)
	}
	for k, v := range sc.Outcomes {
		if _, err := parseOutcome(v); err != nil {
			return nil, fmt.Errorf("scenario %s: outcomes.%s: %w", name, k, err)
		}
	}
	return &sc, nil
}

// LoadAll loads every *.yaml scenario in dir of fsys, sorted by name.
func LoadAll(fsys fs.FS, dir string) ([]*Scenario, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*Scenario, 0, len(names))
	for _, n := range names {
		sc, err := Load(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// TemplateDoc returns the parsed template.
func (sc *Scenario) TemplateDoc() *workflow.Template { return sc.template }

// parseOutcome splits "fail-then-succeed" into attempt results.
func parseOutcome(s string) ([]Result, error) {
	var out []Result
	for _, part := range strings.Split(s, "-then-") {
		switch r := Result(strings.TrimSpace(part)); r {
		case Succeed, Fail, Hang:
			out = append(out, r)
		default:
			return nil, fmt.Errorf("unknown outcome %q in %q; want succeed, fail or hang joined by -then-", part, s)
		}
	}
	return out, nil
}

// RunKey names a run as scenarios do: "task" or "task[i]".
func RunKey(task string, index int) string {
	if index == workflow.NoMatrix {
		return task
	}
	return task + "[" + strconv.Itoa(index) + "]"
}

// lookup finds the entry for a run: "task[i]" first, then "task".
func lookup[V any](m map[string]V, task string, index int) (V, bool) {
	if v, ok := m[RunKey(task, index)]; ok {
		return v, true
	}
	v, ok := m[task]
	return v, ok
}

// Prepare resolves the scenario's parameters and matrix and returns a
// simulator positioned at Start, ready to Run.
func (sc *Scenario) Prepare() (*Sim, error) {
	t := sc.template
	vars := map[string]any{}
	for k, v := range sc.Variables {
		vars[k] = v
	}
	for k, v := range sc.Secrets {
		vars[k] = workflow.SecretValue{Value: v}
	}
	params, ps := workflow.ResolveParameters(t.Spec.Parameters, workflow.Sources{
		Explicit: sc.Parameters, VersionConfig: sc.VersionConfig, DeploymentVariables: vars,
	})
	if len(ps) > 0 {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, &workflow.InvalidError{Problems: ps})
	}
	in := workflow.Inputs{Resources: sc.Inputs.Resources, Environments: sc.Inputs.Environments, ReleaseTargets: sc.Inputs.ReleaseTargets}
	matrix := map[string][]any{}
	for i := range t.Spec.Parameters {
		p := &t.Spec.Parameters[i]
		if p.Type != workflow.TypeMatrix {
			continue
		}
		items, err := workflow.ExpandMatrix(p, in)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		matrix[p.Name] = items
	}
	sim := &Sim{
		In: workflow.ScheduleInput{
			Now:      Start,
			Workflow: workflow.WorkflowState{ID: "wf-" + sc.Name, Name: sc.Name, Phase: workflow.WorkflowPending, Parameters: params},
			Template: t, Matrix: matrix, Release: sc.Release, Variables: vars,
		},
		JobDuration: 10 * time.Second,
		Script: func(task string, index, attempt int) Result {
			s, ok := lookup(sc.Outcomes, task, index)
			if !ok {
				return Succeed
			}
			rs, _ := parseOutcome(s)
			return rs[min(attempt, len(rs)-1)]
		},
		Outputs: func(task string, index int) map[string]any {
			o, _ := lookup(sc.Outputs, task, index)
			return o
		},
	}
	if sc.JobDuration != nil {
		sim.JobDuration = sc.JobDuration.D()
	}
	if sc.CancelAfter != nil {
		sim.CancelAt = Start.Add(sc.CancelAfter.D())
	}
	return sim, nil
}
