package workflow

import (
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"
)

// planCache holds a template's compiled plan; Parse attaches one so the
// plan is built once per parsed template.
type planCache struct {
	once sync.Once
	p    *plan
	err  error
}

// plan is a validated template compiled for scheduling: tasks by index,
// dependency edges with pairing, compiled conditions and config trees.
type plan struct {
	tasks []planTask
	order []int // topological
}

// planTask is one task ready for the scheduler's hot path.
type planTask struct {
	name        string
	typ         TaskType
	deps        []depEdge
	ancestors   []int // the ancestors whose outputs the task reads (every ancestor when it reads tasks as a whole)
	matrixParam string
	maxParallel int
	failFast    bool
	retryLimit  int
	backoff     time.Duration
	factor      int
	backoffCap  time.Duration
	maxDuration time.Duration
	timeout     time.Duration
	wait        time.Duration
	when        *cond
	body        *tnode
	needsTasks  bool // body or when reads tasks.*
}

// depEdge is a dependency; paired when both tasks fan out over the same
// matrix parameter, so item i waits only for item i.
type depEdge struct {
	task   int
	paired bool
}

// planOf returns the template's compiled plan, building it once for parsed
// templates.
func (t *Template) planOf() (*plan, error) {
	if t.cache == nil {
		return newPlan(t)
	}
	t.cache.once.Do(func() { t.cache.p, t.cache.err = newPlan(t) })
	return t.cache.p, t.cache.err
}

func newPlan(t *Template) (*plan, error) {
	if ps := Validate(t); len(ps) > 0 {
		return nil, &InvalidError{Problems: ps}
	}
	g := buildGraph(t.Spec.Tasks)
	byName := make(map[string]int, len(t.Spec.Tasks))
	for i := range t.Spec.Tasks {
		if _, dup := byName[t.Spec.Tasks[i].Name]; !dup {
			byName[t.Spec.Tasks[i].Name] = i
		}
	}
	p := &plan{tasks: make([]planTask, len(t.Spec.Tasks)), order: g.order}
	for i := range t.Spec.Tasks {
		task := &t.Spec.Tasks[i]
		pt := &p.tasks[i]
		pt.name, pt.typ = task.Name, task.Type
		pt.matrixParam = task.MatrixParam()
		if s := task.MatrixStrategy; s != nil {
			pt.maxParallel, pt.failFast = s.MaxParallel, s.FailFast
		}
		if r := task.RetryStrategy; r != nil {
			pt.retryLimit, pt.factor = int(r.Limit), 1
			if b := r.Backoff; b != nil {
				if b.Duration != nil {
					pt.backoff = b.Duration.D()
				}
				if b.Factor != nil {
					pt.factor = int(*b.Factor)
				}
				if b.Cap != nil {
					pt.backoffCap = b.Cap.D()
				}
				if b.MaxDuration != nil {
					pt.maxDuration = b.MaxDuration.D()
				}
			}
		}
		if task.Timeout != nil {
			pt.timeout = task.Timeout.D()
		}
		if task.Wait != nil {
			pt.wait = task.Wait.Duration.D()
		}
		hasMatrix := pt.matrixParam != ""
		var err error
		// The ancestors the task reads (Validate proved each one is).
		read := map[int]bool{}
		whole := false
		readTasks := func(r *ref) {
			for _, c := range r.readChains() {
				if c[0] != RootTasks {
					continue
				}
				pt.needsTasks = true
				if len(c) < 2 {
					whole = true
				} else if j, ok := byName[c[1]]; ok {
					read[j] = true
				}
			}
		}
		if task.When != "" {
			if pt.when, err = compileWhen(task.When, hasMatrix); err != nil {
				return nil, err
			}
			readTasks(pt.when.ref)
		}
		if pt.body, err = compileTree(taskBody(task), hasMatrix); err != nil {
			return nil, err
		}
		pt.body.refs("", func(_ string, r *ref) { readTasks(r) })
		if whole {
			pt.ancestors = g.ancestorsOf(i)
		} else if len(read) > 0 {
			pt.ancestors = slices.Sorted(maps.Keys(read))
		}
	}
	for i := range p.tasks {
		for _, d := range g.deps[i] {
			paired := p.tasks[i].matrixParam != "" && p.tasks[i].matrixParam == p.tasks[d].matrixParam
			p.tasks[i].deps = append(p.tasks[i].deps, depEdge{task: d, paired: paired})
		}
	}
	return p, nil
}

// backoffFor returns the delay before retry number n (0-based).
func (pt *planTask) backoffFor(n int) time.Duration {
	d := pt.backoff
	for k := 0; k < n && pt.factor > 1; k++ {
		d *= time.Duration(pt.factor)
		if pt.backoffCap > 0 && d >= pt.backoffCap || d > 100*365*24*time.Hour {
			break
		}
	}
	if pt.backoffCap > 0 && d > pt.backoffCap {
		d = pt.backoffCap
	}
	return d
}

// taskBody is the part of a task that is resolved per TaskRun and stored as
// its config: the job agent, the config and the type's block, as plain
// JSON-like values.
func taskBody(t *Task) map[string]any {
	m := map[string]any{}
	if t.JobAgentRef != "" {
		m["jobAgentRef"] = t.JobAgentRef
	}
	if t.Config != nil {
		m["config"] = Normalize(t.Config)
	}
	for k, v := range map[string]any{"verification": t.Verification, "approval": t.Approval, "wait": t.Wait, "webhook": t.Webhook} {
		if plain := toPlain(v); plain != nil {
			m[k] = plain
		}
	}
	return m
}

// toPlain converts a typed block to JSON-like values (nil for a nil block).
func toPlain(v any) any {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return Normalize(out)
}
