package workflow

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/reconcilerhq/reconciler/expr"
)

var (
	nameRe      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	taskNameRe  = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?$`)
	paramNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	matrixRefRe = regexp.MustCompile(`^\{\{\s*workflow\.parameters\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

	resultEnv = expr.MustEnv("result")
)

// Validate reports every problem in a template at once: decoding problems
// recorded by Parse (unknown fields, wrong types) and semantic ones
// (duplicate or unknown names, dependency cycles, bad expressions and
// references, parameter values outside their enum, missing type blocks...).
// Problems are ordered by their position in the source document.
func Validate(t *Template) []Problem {
	v := &validator{t: t}
	v.header()
	v.params()
	v.tasks()
	v.triggers()
	out := append([]Problem(nil), t.decodeProblems...)
	decoded := make(map[string]bool, len(t.decodeProblems))
	for _, d := range t.decodeProblems {
		decoded[d.Path] = true
	}
	for _, p := range v.ps.list {
		if !underDecodeProblem(p.Path, decoded) {
			out = append(out, p)
		}
	}
	t.Locate(out)
	return out
}

// underDecodeProblem drops semantic problems about a field whose decoding
// already failed (its value is a zero stand-in): the path or one of its
// parents is a decoding problem's path.
func underDecodeProblem(path string, decoded map[string]bool) bool {
	if len(decoded) == 0 {
		return false
	}
	for p := path; ; p = parentPath(p) {
		if decoded[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

type validator struct {
	t  *Template
	ps problems
	g  *graph
	// paramByName indexes spec.parameters by name (the first of duplicates).
	paramByName map[string]*Parameter
	// refs are the tasks.NAME references awaiting the ancestor check.
	refs []outputRef
}

// param returns the parameter named name, or nil.
func (v *validator) param(name string) *Parameter {
	if v.paramByName == nil {
		v.paramByName = make(map[string]*Parameter, len(v.t.Spec.Parameters))
		for i := range v.t.Spec.Parameters {
			p := &v.t.Spec.Parameters[i]
			if _, dup := v.paramByName[p.Name]; !dup {
				v.paramByName[p.Name] = p
			}
		}
	}
	return v.paramByName[name]
}

func (v *validator) header() {
	t := v.t
	switch t.APIVersion {
	case APIVersion, DeprecatedAPIVersion:
	case "":
		v.ps.add("apiVersion", "required; want %q", APIVersion)
	default:
		v.ps.add("apiVersion", "unsupported apiVersion %q; want %q", t.APIVersion, APIVersion)
	}
	switch t.Kind {
	case KindWorkflowTemplate:
	case "":
		v.ps.add("kind", "required; want %q", KindWorkflowTemplate)
	default:
		v.ps.add("kind", "unsupported kind %q; want %q", t.Kind, KindWorkflowTemplate)
	}
	switch {
	case t.Metadata.Name == "":
		v.ps.add("metadata.name", "required")
	case len(t.Metadata.Name) > 253 || !nameRe.MatchString(t.Metadata.Name):
		v.ps.add("metadata.name", "%q is not a valid name (lower-case letters, digits, '-' and '.')", t.Metadata.Name)
	}
	switch t.Metadata.Scope {
	case "", ScopeWorkspace:
		if t.Metadata.ScopeID != "" {
			v.ps.add("metadata.scopeId", "only system and deployment templates have a scopeId")
		}
	case ScopeSystem, ScopeDeployment:
		if id := t.Metadata.ScopeID; id != "" && (len(id) > 100 || !nameRe.MatchString(id)) {
			v.ps.add("metadata.scopeId", "%q is not a valid scope id (lower-case letters, digits, '-' and '.')", id)
		}
	default:
		v.ps.add("metadata.scope", "unknown scope %q; want workspace, system or deployment", t.Metadata.Scope)
	}
}

func (v *validator) params() {
	seen := map[string]int{}
	for i := range v.t.Spec.Parameters {
		p := &v.t.Spec.Parameters[i]
		path := indexPath("spec.parameters", i)
		switch {
		case p.Name == "":
			v.ps.add(joinPath(path, "name"), "required")
		case !paramNameRe.MatchString(p.Name):
			v.ps.add(joinPath(path, "name"), "%q is not a valid parameter name (letters, digits and '_', not starting with a digit)", p.Name)
		default:
			if j, dup := seen[p.Name]; dup {
				v.ps.add(joinPath(path, "name"), "duplicate parameter %q (also spec.parameters[%d])", p.Name, j)
			} else {
				seen[p.Name] = i
			}
		}
		switch p.Type {
		case TypeMatrix:
			v.matrixParam(p, path)
			continue
		case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeArray:
		case "":
			v.ps.add(joinPath(path, "type"), "required; want string, number, boolean, object, array or matrix")
			continue
		default:
			v.ps.add(joinPath(path, "type"), "unknown parameter type %q; want string, number, boolean, object, array or matrix", p.Type)
			continue
		}
		if p.Source != nil {
			v.ps.add(joinPath(path, "source"), "only a matrix parameter has a source")
		}
		for k, e := range p.Enum {
			if _, err := checkType(p.Type, e); err != nil {
				v.ps.add(indexPath(joinPath(path, "enum"), k), "%v", err)
			}
		}
		if p.Default != nil {
			if _, err := checkParamValue(p, p.Default); err != nil {
				v.ps.add(joinPath(path, "default"), "%v", err)
			}
		}
	}
}

func (v *validator) matrixParam(p *Parameter, path string) {
	if p.Default != nil {
		v.ps.add(joinPath(path, "default"), "a matrix parameter takes its items from its source, not a default")
	}
	if len(p.Enum) > 0 {
		v.ps.add(joinPath(path, "enum"), "a matrix parameter has no enum")
	}
	src := p.Source
	spath := joinPath(path, "source")
	if src == nil {
		v.ps.add(spath, "a matrix parameter needs a source")
		return
	}
	switch src.Kind {
	case SourceResource, SourceEnvironment:
		if src.Selector == nil {
			v.ps.add(joinPath(spath, "selector"), "a %s source needs a selector", src.Kind)
		} else {
			v.selector(src, joinPath(spath, "selector"))
		}
	case SourceReleaseTarget:
		if src.Deployment == "" {
			v.ps.add(joinPath(spath, "deployment"), "a releaseTarget source needs a deployment")
		}
	case SourceList:
		if src.Items == nil {
			v.ps.add(joinPath(spath, "items"), "a list source needs items")
		}
	case "":
		v.ps.add(joinPath(spath, "kind"), "required; want resource, environment, releaseTarget or list")
		return
	default:
		v.ps.add(joinPath(spath, "kind"), "unknown source kind %q; want resource, environment, releaseTarget or list", src.Kind)
		return
	}
	if src.Selector != nil && src.Kind != SourceResource && src.Kind != SourceEnvironment {
		v.ps.add(joinPath(spath, "selector"), "only resource and environment sources have a selector")
	}
	if src.Deployment != "" && src.Kind != SourceReleaseTarget {
		v.ps.add(joinPath(spath, "deployment"), "only a releaseTarget source has a deployment")
	}
	if src.Items != nil && src.Kind != SourceList {
		v.ps.add(joinPath(spath, "items"), "only a list source has items")
	}
}

func (v *validator) selector(src *MatrixSource, path string) {
	code, ps := src.Selector.CEL(ItemKey(src.Kind))
	for _, p := range ps {
		v.ps.add(joinPath(path, p.Path), "%s", p.Message)
	}
	if len(ps) > 0 {
		return
	}
	if src.Selector.Condition == nil && strings.TrimSpace(code) == "" {
		v.ps.add(path, "empty selector")
		return
	}
	if _, err := selectorEnvs[src.Kind].Compile(code); err != nil {
		v.ps.add(path, "%s", exprMessage(err))
	}
}

// exprMessage words a CEL error without repeating a long expression.
func exprMessage(err error) string {
	var ee *expr.Error
	if errors.As(err, &ee) {
		if ee.Line > 0 {
			return fmt.Sprintf("bad expression %q: line %d, column %d: %s", ee.Expr, ee.Line, ee.Column, ee.Message)
		}
		return fmt.Sprintf("bad expression %q: %s", ee.Expr, ee.Message)
	}
	return err.Error()
}

func (v *validator) tasks() {
	tasks := v.t.Spec.Tasks
	if len(tasks) == 0 {
		v.ps.add("spec.tasks", "a template needs at least one task")
		return
	}
	seen := map[string]int{}
	for i := range tasks {
		name := tasks[i].Name
		path := joinPath(indexPath("spec.tasks", i), "name")
		switch {
		case name == "":
			v.ps.add(path, "required")
		case !taskNameRe.MatchString(name):
			v.ps.add(path, "%q is not a valid task name (letters, digits, '-' and '_')", name)
		default:
			if j, dup := seen[name]; dup {
				v.ps.add(path, "duplicate task name %q (also spec.tasks[%d])", name, j)
			} else {
				seen[name] = i
			}
		}
	}
	g := buildGraph(tasks)
	for _, c := range g.cycles {
		names := make([]string, len(c))
		for k, i := range c {
			names[k] = tasks[i].Name
		}
		v.ps.add(joinPath(indexPath("spec.tasks", c[0]), "dependencies"), "dependency cycle: %s", strings.Join(names, " -> "))
	}
	v.g = g
	for i := range tasks {
		v.task(i, seen)
	}
	v.outputRefs()
}

// outputRef is a reference to tasks.NAME.outputs whose NAME must be an
// ancestor of the referring task; answered for all references at once.
type outputRef struct {
	q        ancestorQuery
	path     string
	src      string
	fieldMsg string // the problem with the field after NAME, if any
}

// outputRefs reports the references to a task that is no ancestor of the
// referring task (and else any problem with the field they read).
func (v *validator) outputRefs() {
	qs := make([]ancestorQuery, len(v.refs))
	for k, r := range v.refs {
		qs[k] = r.q
	}
	for k, ok := range v.g.areAncestors(qs) {
		r := v.refs[k]
		t := &v.t.Spec.Tasks
		switch {
		case !ok:
			v.ps.add(r.path, "{{%s}}: task %q is not a dependency of task %q; outputs are only available to dependents",
				r.src, (*t)[r.q.target].Name, (*t)[r.q.task].Name)
		case r.fieldMsg != "":
			v.ps.add(r.path, "{{%s}}: %s", r.src, r.fieldMsg)
		}
	}
}
