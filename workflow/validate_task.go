package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// task checks one task. names maps task names to their index.
func (v *validator) task(i int, names map[string]int) {
	t := &v.t.Spec.Tasks[i]
	path := indexPath("spec.tasks", i)
	switch t.Type {
	case TaskJob:
		if t.JobAgentRef == "" {
			v.ps.add(joinPath(path, "jobAgentRef"), "a job task needs a jobAgentRef")
		}
	case TaskVerification, TaskApproval, TaskWait, TaskWebhook:
		if t.JobAgentRef != "" {
			v.ps.add(joinPath(path, "jobAgentRef"), "only a job task has a jobAgentRef")
		}
	case "":
		v.ps.add(joinPath(path, "type"), "required; want job, verification, approval, wait or webhook")
	default:
		v.ps.add(joinPath(path, "type"), "unknown task type %q; want job, verification, approval, wait or webhook", t.Type)
	}
	v.blocks(t, path)
	var listed map[string]bool
	if len(t.Dependencies) > 1 {
		listed = make(map[string]bool, len(t.Dependencies))
	}
	for k, d := range t.Dependencies {
		dpath := indexPath(joinPath(path, "dependencies"), k)
		switch j, ok := names[d]; {
		case !ok:
			v.ps.add(dpath, "unknown dependency %q", d)
		case j == i:
			v.ps.add(dpath, "task %q depends on itself", d)
		case listed[d]:
			v.ps.add(dpath, "duplicate dependency %q", d)
		}
		if listed != nil {
			listed[d] = true
		}
	}
	hasMatrix := t.Matrix != ""
	rc := refChecker{v: v, index: i, names: names, matrix: v.taskMatrix(t, path)}
	if t.When != "" {
		if c, err := compileWhen(t.When, hasMatrix); err != nil {
			v.refProblem(joinPath(path, "when"), err)
		} else {
			rc.check(joinPath(path, "when"), c.ref)
		}
	}
	if t.RetryStrategy != nil && t.RetryStrategy.Backoff != nil {
		b := t.RetryStrategy.Backoff
		bpath := joinPath(joinPath(path, "retryStrategy"), "backoff")
		if b.Duration == nil || *b.Duration == 0 {
			v.ps.add(joinPath(bpath, "duration"), "a backoff needs a duration greater than zero")
		}
		if b.Factor != nil && *b.Factor < 1 {
			v.ps.add(joinPath(bpath, "factor"), "factor must be at least 1")
		}
	}
	if t.Timeout != nil && *t.Timeout <= 0 {
		v.ps.add(joinPath(path, "timeout"), "timeout must be greater than zero")
	}
	walkStrings(taskBody(t), path, func(p, s string) {
		ts, err := parseString(s, hasMatrix)
		if err != nil {
			v.refProblem(p, err)
			return
		}
		if ts != nil {
			for _, seg := range ts.segs {
				if seg.ref != nil {
					rc.check(p, seg.ref)
				}
			}
		}
	})
}

// walkStrings calls f for every string in a JSON-like tree, in key order.
func walkStrings(v any, path string, f func(path, s string)) {
	switch x := v.(type) {
	case string:
		f(path, x)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			walkStrings(x[k], joinPath(path, k), f)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, indexPath(path, i), f)
		}
	}
}

// blocks checks that a task has exactly its type's block.
func (v *validator) blocks(t *Task, path string) {
	has := map[TaskType]bool{
		TaskVerification: t.Verification != nil,
		TaskApproval:     t.Approval != nil,
		TaskWait:         t.Wait != nil,
		TaskWebhook:      t.Webhook != nil,
	}
	for _, typ := range []TaskType{TaskVerification, TaskApproval, TaskWait, TaskWebhook} {
		if has[typ] && t.Type != typ && t.Type != "" {
			v.ps.add(joinPath(path, string(typ)), "only a %s task has a %s block", typ, typ)
		}
	}
	switch t.Type {
	case TaskVerification:
		if t.Verification == nil {
			v.ps.add(joinPath(path, "verification"), "a verification task needs a verification block")
			return
		}
		v.metrics(t.Verification, joinPath(path, "verification"))
	case TaskWait:
		if t.Wait == nil || t.Wait.Duration <= 0 {
			v.ps.add(joinPath(path, "wait.duration"), "a wait task needs a duration greater than zero")
		}
	case TaskWebhook:
		if t.Webhook == nil || t.Webhook.URL == "" {
			v.ps.add(joinPath(path, "webhook.url"), "a webhook task needs a url")
			return
		}
		switch strings.ToUpper(t.Webhook.Method) {
		case "", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD":
		default:
			v.ps.add(joinPath(path, "webhook.method"), "unknown HTTP method %q", t.Webhook.Method)
		}
	}
}

func (v *validator) metrics(ver *Verification, path string) {
	if len(ver.Metrics) == 0 {
		v.ps.add(joinPath(path, "metrics"), "a verification needs at least one metric")
	}
	seen := map[string]bool{}
	for i, m := range ver.Metrics {
		mpath := indexPath(joinPath(path, "metrics"), i)
		switch {
		case m.Name == "":
			v.ps.add(joinPath(mpath, "name"), "required")
		case seen[m.Name]:
			v.ps.add(joinPath(mpath, "name"), "duplicate metric %q", m.Name)
		}
		seen[m.Name] = true
		if m.Provider.Type == "" {
			v.ps.add(joinPath(mpath, "provider.type"), "required")
		}
		if m.SuccessCondition == "" {
			v.ps.add(joinPath(mpath, "successCondition"), "required")
		}
		for field, src := range map[string]string{"successCondition": m.SuccessCondition, "failureCondition": m.FailureCondition} {
			if src == "" || strings.Contains(src, "{{") {
				continue // {{ }} references are checked with the task's config
			}
			if _, err := resultEnv.Compile(src); err != nil {
				v.ps.add(joinPath(mpath, field), "%s", exprMessage(err))
			}
		}
	}
}

// taskMatrix checks the task's matrix reference and strategy and returns
// the source of its matrix parameter (nil when none or unknown).
func (v *validator) taskMatrix(t *Task, path string) *MatrixSource {
	if t.Matrix == "" {
		if t.MatrixStrategy != nil {
			v.ps.add(joinPath(path, "matrixStrategy"), "only a task with a matrix has a matrixStrategy")
		}
		return nil
	}
	if t.MatrixStrategy != nil && t.MatrixStrategy.MaxParallel < 0 {
		v.ps.add(joinPath(path, "matrixStrategy.maxParallel"), "must not be negative")
	}
	mpath := joinPath(path, "matrix")
	m := matrixRefRe.FindStringSubmatch(t.Matrix)
	if m == nil {
		v.ps.add(mpath, "want a matrix parameter reference like \"{{workflow.parameters.targets}}\", got %q", t.Matrix)
		return nil
	}
	p := v.param(m[1])
	switch {
	case p == nil:
		v.ps.add(mpath, "unknown parameter %q", m[1])
	case p.Type != TypeMatrix:
		v.ps.add(mpath, "parameter %q is of type %s, not matrix", m[1], p.Type)
	case p.Source != nil:
		return p.Source
	}
	return nil
}

// refProblem records a compile error of a reference or condition.
func (v *validator) refProblem(path string, err error) {
	var re *RefError
	if errors.As(err, &re) {
		re = re.at(path)
		v.ps.add(re.Path, "{{%s}}: %s", re.Ref, re.Msg)
		return
	}
	v.ps.add(path, "%s", exprMessage(err))
}

// refChecker checks what a compiled reference reads against the template.
type refChecker struct {
	v      *validator
	index  int // the task's index
	names  map[string]int
	matrix *MatrixSource // the source of the task's matrix parameter, if known
}

// check validates the roots and the first fields a reference reads (a plain
// path into a list source's items is checked against every item).
func (rc refChecker) check(path string, r *ref) {
	for _, c := range r.readChains() {
		if msg := rc.chain(path, r, c); msg != "" {
			rc.v.ps.add(path, "{{%s}}: %s", r.src, msg)
		}
	}
}

// chain checks one chain of field names reference r at path reads; a CEL
// chain (not a plain path) may end in a method name. A tasks.NAME chain is
// queued for the ancestor check (see outputRefs).
func (rc refChecker) chain(path string, r *ref, c []string) string {
	whole := r.path != nil
	at := func(i int) string {
		if i < len(c) {
			return c[i]
		}
		return ""
	}
	switch c[0] {
	case RootWorkflow:
		switch at(1) {
		case "", "name":
		case "parameters":
			name := at(2)
			if name == "" {
				return ""
			}
			p := rc.v.param(name)
			if p == nil {
				return fmt.Sprintf("unknown parameter %q", name)
			}
			if p.Type == TypeMatrix {
				return fmt.Sprintf("parameter %q is a matrix; read its items as matrix.%s in a task with matrix: \"{{workflow.parameters.%s}}\"", name, itemKeyOr(p), name)
			}
		default:
			return fmt.Sprintf("no field %q in workflow; want name or parameters", at(1))
		}
	case RootTasks:
		name := at(1)
		if name == "" {
			return ""
		}
		j, ok := rc.names[name]
		if !ok {
			return fmt.Sprintf("unknown task %q", name)
		}
		var fieldMsg string
		if f := at(2); f != "" && f != "outputs" {
			fieldMsg = fmt.Sprintf("no field %q in tasks.%s; want outputs", f, name)
		}
		if rc.v.g.pos[rc.index] < 0 {
			return fieldMsg // on or behind a cycle: no ancestors to check against
		}
		rc.v.refs = append(rc.v.refs, outputRef{q: ancestorQuery{task: rc.index, target: j}, path: path, src: r.src, fieldMsg: fieldMsg})
	case RootMatrix:
		f := at(1)
		switch {
		case f == "" || matrixBuiltins[f] || rc.matrix == nil:
		case rc.matrix.Kind == SourceList:
			if !whole {
				c = c[:2]
			}
			return listItemsHave(rc.matrix.Items, c[1:])
		case f != ItemKey(rc.matrix.Kind):
			return fmt.Sprintf("no field %q in matrix; items of a %s source are matrix.%s", f, rc.matrix.Kind, ItemKey(rc.matrix.Kind))
		}
	}
	return ""
}

// listItemsHave checks that every item of a list source has the path of
// fields (as far as the path goes through objects), and words the first
// item that does not.
func listItemsHave(items []any, path []string) string {
	for i, it := range items {
		v := Normalize(it)
		for j, k := range path {
			m, ok := v.(map[string]any)
			if !ok {
				if j == 0 {
					return fmt.Sprintf("no field %q in matrix: list item %d is %s, not an object; read it as matrix.%s", k, i, jsonKind(v), MatrixItemField)
				}
				break
			}
			if v, ok = m[k]; !ok {
				return fmt.Sprintf("no field %q in list item %d (matrix.%s)", k, i, strings.Join(path[:j+1], "."))
			}
		}
	}
	return ""
}

func itemKeyOr(p *Parameter) string {
	if p.Source == nil {
		return "item"
	}
	return ItemKey(p.Source.Kind)
}
