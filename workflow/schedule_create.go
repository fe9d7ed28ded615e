package workflow

import (
	"fmt"
)

// births creates the TaskRuns of items whose dependencies are all final:
// born Failed or Cancelled after a failed or cancelled dependency or a
// tripped fail-fast, Skipped when `when` is false, Pending otherwise.
func (s *pass) births(ti int) {
	if s.cancel {
		return
	}
	pt := &s.p.tasks[ti]
	ts := &s.tasks[ti]
	// Unpaired dependencies gate the whole task.
	var failedDep, cancelledDep string
	hasPaired := false
	for _, e := range pt.deps {
		if e.paired {
			hasPaired = true
			continue
		}
		d := &s.tasks[e.task]
		if !d.done {
			return
		}
		if d.failed && failedDep == "" {
			failedDep = s.itemName(e.task, d.failedItem)
		}
		if d.cancelled && cancelledDep == "" {
			cancelledDep = fmt.Sprintf("%q", s.p.tasks[e.task].name)
		}
	}
	items := s.items[ts.base : ts.base+ts.size]
	for idx := range items {
		if items[idx].st != stNone {
			continue
		}
		failed, cancelled := failedDep, cancelledDep
		if hasPaired {
			ready := true
			for _, e := range pt.deps {
				if !e.paired {
					continue
				}
				d := s.items[s.tasks[e.task].base+idx]
				if !final(d.st) {
					ready = false
					break
				}
				if d.st == stFailed && failed == "" {
					failed = s.itemName(e.task, idx)
				}
				if d.st == stCancelled && cancelled == "" {
					cancelled = s.itemName(e.task, idx)
				}
			}
			if !ready {
				continue
			}
		}
		s.birth(ti, idx, failed, cancelled)
	}
}

// birth emits the CreateTaskRun of one ready item.
func (s *pass) birth(ti, idx int, failedDep, cancelledDep string) {
	pt := &s.p.tasks[ti]
	ts := &s.tasks[ti]
	c := CreateTaskRun{Task: pt.name, Type: pt.typ, MatrixIndex: NoMatrix, MatrixKey: pt.matrixParam, At: s.now}
	if pt.matrixParam != "" {
		c.MatrixIndex = idx
		c.MatrixItem = s.in.Matrix[pt.matrixParam][idx]
	}
	switch {
	case failedDep != "":
		c.Phase, c.Reason, c.Message = TaskFailed, ReasonDependencyFailed, "dependency "+failedDep+" failed"
	case cancelledDep != "":
		c.Phase, c.Reason, c.Message = TaskCancelled, ReasonDependencyCancelled, "dependency "+cancelledDep+" was cancelled"
	case ts.failFast:
		c.Phase, c.Reason, c.Message = TaskCancelled, ReasonFailFast, "not started: another item failed (failFast)"
	default:
		s.resolve(ti, idx, &c)
	}
	it := &s.items[ts.base+idx]
	it.acted = true
	switch c.Phase {
	case TaskPending:
		it.st = stPending
	case TaskSkipped:
		it.st = stSkipped
	case TaskCancelled:
		it.st = stCancelled
	default:
		it.st = stFailed
	}
	s.out = append(s.out, c)
}

// resolve evaluates `when` and the config of an item about to be created.
func (s *pass) resolve(ti, idx int, c *CreateTaskRun) {
	pt := &s.p.tasks[ti]
	sc := s.itemScope(ti, idx)
	where := indexPath("spec.tasks", ti) // plans keep template order
	if pt.when != nil {
		ok, err := pt.when.eval(sc)
		if err != nil {
			c.Phase, c.Reason, c.Message = TaskFailed, ReasonWhenError, joinPath(where, "when")+": "+err.Error()
			return
		}
		if !ok {
			c.Phase, c.Reason, c.Message = TaskSkipped, ReasonWhenFalse, "when condition is false"
			return
		}
	}
	d, st, _, rerr := pt.body.resolve(sc)
	if rerr != nil {
		c.Phase, c.Reason, c.Message = TaskFailed, ReasonConfigError, rerr.at(where).Error()
		return
	}
	c.Phase, c.Reason = TaskPending, ReasonReady
	c.DispatchConfig, _ = d.(map[string]any)
	c.Config, _ = st.(map[string]any)
}

// itemScope builds the scope one item's references read.
func (s *pass) itemScope(ti, idx int) *Vars {
	if s.scope == nil {
		params := s.in.Workflow.Parameters
		if params == nil {
			params = map[string]any{}
		}
		s.scope = &Vars{
			Workflow:  map[string]any{"name": s.in.Workflow.Name, "parameters": params},
			Release:   s.in.Release,
			Variables: s.in.Variables,
		}
		s.scope.unwrapped = &[3]any{
			unwrapSecrets(s.scope.Workflow), unwrapSecrets(orEmpty(s.scope.Release)), unwrapSecrets(orEmpty(s.scope.Variables)),
		}
	}
	sc := &Vars{Workflow: s.scope.Workflow, Release: s.scope.Release, Variables: s.scope.Variables, unwrapped: s.scope.unwrapped}
	pt := &s.p.tasks[ti]
	if pt.matrixParam != "" {
		sc.Matrix = matrixScope(s.in.Matrix[pt.matrixParam], idx)
	}
	if pt.needsTasks {
		sc.Tasks = make(map[string]any, len(pt.ancestors))
		for _, a := range pt.ancestors {
			sc.Tasks[s.p.tasks[a].name] = map[string]any{"outputs": s.outputsFor(a, pt.matrixParam, idx)}
		}
	}
	return sc
}

// outputsFor is what tasks.NAME.outputs means to item idx of a task fanning
// out over param: the paired item's outputs when the ancestor fans out over
// the same parameter, the list of every item's outputs when it fans out over
// another one, and the single run's outputs otherwise.
func (s *pass) outputsFor(a int, param string, idx int) any {
	ts := &s.tasks[a]
	ap := s.p.tasks[a].matrixParam
	switch {
	case ap == "":
		return s.outputsOf(&s.items[ts.base])
	case ap == param:
		return s.outputsOf(&s.items[ts.base+idx])
	}
	list := make([]any, ts.size)
	for i := range list {
		list[i] = s.outputsOf(&s.items[ts.base+i])
	}
	return list
}

func (s *pass) outputsOf(it *item) map[string]any {
	if it.run == 0 {
		return map[string]any{}
	}
	if o := s.run(it).Outputs; o != nil {
		return o
	}
	return map[string]any{}
}

// matrixScope is matrix.* for item idx: an object item's own fields, the
// whole item as matrix.item, and index, length, isFirst and isLast (the
// built-ins win over item fields of the same name).
func matrixScope(vals []any, idx int) map[string]any {
	fields, _ := vals[idx].(map[string]any)
	m := make(map[string]any, len(fields)+len(matrixBuiltins))
	for k, v := range fields {
		m[k] = v
	}
	m[MatrixItemField] = vals[idx]
	m["index"] = int64(idx)
	m["length"] = int64(len(vals))
	m["isFirst"] = idx == 0
	m["isLast"] = idx == len(vals)-1
	return m
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
