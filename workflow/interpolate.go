package workflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Vars is what {{ }} references and `when` conditions can read while one
// TaskRun's config is resolved. Values may hold SecretValue anywhere.
type Vars struct {
	// Workflow is {name, parameters}.
	Workflow map[string]any
	// Release is the release that triggered the workflow, if any.
	Release map[string]any
	// Variables are the deployment variables.
	Variables map[string]any
	// Matrix is the item's fields plus index, length, isFirst and isLast;
	// nil outside a matrix task.
	Matrix map[string]any
	// Tasks maps an ancestor task's name to {outputs: ...}.
	Tasks map[string]any

	act       map[string]any // CEL activation, secrets unwrapped
	unwrapped *[3]any        // workflow, release, variables unwrapped, shared by a pass
}

// Resolved is an interpolated value in two copies: Dispatch keeps secret
// values for the executor; Stored has every value derived from a secret
// replaced by Redacted. The copies share subtrees that hold no secret, and
// may share unchanged subtrees with their input: treat them as read-only.
type Resolved struct {
	Dispatch any
	Stored   any
}

// Interpolate resolves every {{ }} reference in v (recursively through maps,
// arrays and strings). A string that is exactly one reference yields the
// typed value; references embedded in text are stringified. A missing path
// is a *RefError naming it, never an empty string.
func Interpolate(v any, s *Vars) (Resolved, error) {
	n, err := compileTree(v, s.Matrix != nil)
	if err != nil {
		return Resolved{}, err
	}
	d, st, _, rerr := n.resolve(s)
	if rerr != nil {
		return Resolved{}, rerr
	}
	return Resolved{Dispatch: d, Stored: st}, nil
}

// EvalWhen evaluates a `when` condition: a bare CEL expression or a single
// {{ }} reference, which must yield a boolean.
func EvalWhen(src string, s *Vars) (bool, error) {
	c, err := compileWhen(src, s.Matrix != nil)
	if err != nil {
		return false, err
	}
	return c.eval(s)
}

func (s *Vars) root(name string) (any, bool) {
	var m map[string]any
	switch name {
	case RootWorkflow:
		m = s.Workflow
	case RootRelease:
		m = s.Release
	case RootVariables:
		m = s.Variables
	case RootMatrix:
		m = s.Matrix
	case RootTasks:
		m = s.Tasks
	default:
		return nil, false
	}
	return m, m != nil
}

// activation builds (once) the CEL variables with secrets unwrapped.
func (s *Vars) activation() map[string]any {
	if s.act != nil {
		return s.act
	}
	s.act = make(map[string]any, 5)
	for i, name := range []string{RootWorkflow, RootRelease, RootVariables, RootMatrix, RootTasks} {
		if s.unwrapped != nil && i < len(s.unwrapped) {
			s.act[name] = s.unwrapped[i]
			continue
		}
		v, ok := s.root(name)
		if !ok {
			v = map[string]any{}
		}
		s.act[name] = unwrapSecrets(v)
	}
	return s.act
}

// lookup walks a plain path and returns the raw value found (which may be or
// hold a SecretValue). tainted reports whether the walk went through a
// SecretValue, making the whole result secret.
func (s *Vars) lookup(p []pathElem) (v any, tainted bool, err error) {
	v, ok := s.root(p[0].key)
	if !ok {
		return nil, false, fmt.Errorf("%s is not available here", p[0].key)
	}
	for i := 1; i < len(p); i++ {
		if sv, ok := v.(SecretValue); ok {
			v, tainted = sv.Value, true
		}
		e := p[i]
		if e.idx >= 0 {
			l, ok := v.([]any)
			if !ok {
				return nil, false, fmt.Errorf("%s is %s, not an array", pathString(p, i), jsonKind(v))
			}
			if e.idx >= len(l) {
				return nil, false, fmt.Errorf("index %d out of range in %s (length %d)", e.idx, pathString(p, i), len(l))
			}
			v = l[e.idx]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false, fmt.Errorf("%s is %s, not an object", pathString(p, i), jsonKind(v))
		}
		next, ok := m[e.key]
		if !ok {
			return nil, false, fmt.Errorf("no field %q in %s", e.key, pathString(p, i))
		}
		v = next
	}
	return v, tainted, nil
}

// eval resolves one reference. The value may hold SecretValue wrappers
// (paths return what they find); tainted means the whole value derives from
// a secret.
func (r *ref) eval(s *Vars) (any, bool, error) {
	if r.path != nil {
		return s.lookup(r.path)
	}
	v, err := r.prog.Eval(s.activation())
	if err != nil {
		if r.touchesSecret(s) { // CEL messages may quote values
			return nil, false, fmt.Errorf("evaluation failed (details withheld: the expression reads a secret)")
		}
		return nil, false, err
	}
	return v, r.touchesSecret(s), nil
}

// touchesSecret reports whether any identifier chain the CEL program reads
// reaches a secret or a subtree holding one. It is conservative: a chain
// that stops at a container (e.g. before an index) counts the whole
// container.
func (r *ref) touchesSecret(s *Vars) bool {
	for _, c := range r.chains {
		v, _ := s.root(c[0])
		for _, k := range c[1:] {
			if _, ok := v.(SecretValue); ok {
				return true
			}
			m, ok := v.(map[string]any)
			if !ok {
				break
			}
			next, ok := m[k]
			if !ok {
				break
			}
			v = next
		}
		if containsSecret(v) {
			return true
		}
	}
	return false
}

// resolve renders a parsed string in both copies.
func (t *tstr) resolve(s *Vars) (disp, stored any, tainted bool, err *RefError) {
	if t.whole {
		r := t.segs[0].ref
		v, tn, e := r.eval(s)
		if e != nil {
			return nil, nil, false, &RefError{Ref: r.src, Msg: shortExprError(e)}
		}
		switch {
		case tn:
			return unwrapSecrets(v), Redacted, true, nil
		case containsSecret(v):
			return unwrapSecrets(v), redactSecrets(v), true, nil
		}
		return v, v, false, nil
	}
	var d, st strings.Builder
	for _, seg := range t.segs {
		if seg.ref == nil {
			d.WriteString(seg.lit)
			st.WriteString(seg.lit)
			continue
		}
		v, tn, e := seg.ref.eval(s)
		if e != nil {
			return nil, nil, false, &RefError{Ref: seg.ref.src, Msg: shortExprError(e)}
		}
		str := stringify(unwrapSecrets(v))
		d.WriteString(str)
		if tn || containsSecret(v) {
			tainted = true
			st.WriteString(Redacted)
		} else {
			st.WriteString(str)
		}
	}
	if !tainted {
		out := d.String()
		return out, out, false, nil
	}
	return d.String(), st.String(), true, nil
}

// stringify renders a value embedded in text: strings as they are, other
// values as JSON.
func stringify(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// tnode is a parsed value tree: a literal without references, a string with
// references, or a map or array with references somewhere below.
type tnode struct {
	lit   any
	str   *tstr
	keys  []string
	vals  []*tnode
	items []*tnode
	kind  uint8
}

const (
	nodeLit uint8 = iota
	nodeStr
	nodeMap
	nodeList
)

// compileTree parses every string in v. Errors are *RefError located by
// the path inside v.
func compileTree(v any, matrix bool) (*tnode, error) {
	switch x := v.(type) {
	case string:
		t, err := parseString(x, matrix)
		if err != nil {
			if re, ok := err.(*RefError); ok {
				return nil, re
			}
			return nil, &RefError{Msg: err.Error()}
		}
		if t == nil {
			return &tnode{lit: x}, nil
		}
		return &tnode{kind: nodeStr, str: t}, nil
	case map[string]any:
		n := &tnode{kind: nodeMap, keys: make([]string, 0, len(x))}
		for k := range x {
			n.keys = append(n.keys, k)
		}
		sort.Strings(n.keys)
		plain := true
		for _, k := range n.keys {
			c, err := compileTree(x[k], matrix)
			if err != nil {
				return nil, err.(*RefError).at(k)
			}
			plain = plain && c.kind == nodeLit
			n.vals = append(n.vals, c)
		}
		if plain {
			return &tnode{lit: x}, nil
		}
		return n, nil
	case []any:
		n := &tnode{kind: nodeList}
		plain := true
		for i, e := range x {
			c, err := compileTree(e, matrix)
			if err != nil {
				return nil, err.(*RefError).at(fmt.Sprintf("[%d]", i))
			}
			plain = plain && c.kind == nodeLit
			n.items = append(n.items, c)
		}
		if plain {
			return &tnode{lit: x}, nil
		}
		return n, nil
	}
	return &tnode{lit: v}, nil
}

// resolve produces the dispatch and stored copies of the tree.
func (n *tnode) resolve(s *Vars) (disp, stored any, tainted bool, err *RefError) {
	switch n.kind {
	case nodeStr:
		return n.str.resolve(s)
	case nodeMap:
		d := make(map[string]any, len(n.keys))
		var st map[string]any
		for i, k := range n.keys {
			cd, cs, ct, e := n.vals[i].resolve(s)
			if e != nil {
				return nil, nil, false, e.at(k)
			}
			d[k] = cd
			if ct && st == nil {
				st = make(map[string]any, len(n.keys))
				for _, pk := range n.keys[:i] {
					st[pk] = d[pk]
				}
			}
			if st != nil {
				st[k] = cs
			}
		}
		if st == nil {
			return d, d, false, nil
		}
		return d, st, true, nil
	case nodeList:
		d := make([]any, len(n.items))
		var st []any
		for i, c := range n.items {
			cd, cs, ct, e := c.resolve(s)
			if e != nil {
				return nil, nil, false, e.at(fmt.Sprintf("[%d]", i))
			}
			d[i] = cd
			if ct && st == nil {
				st = make([]any, len(n.items))
				copy(st, d[:i])
			}
			if st != nil {
				st[i] = cs
			}
		}
		if st == nil {
			return d, d, false, nil
		}
		return d, st, true, nil
	}
	return n.lit, n.lit, false, nil
}

// refs lists every reference in the tree with its path, for validation.
func (n *tnode) refs(path string, visit func(path string, r *ref)) {
	switch n.kind {
	case nodeStr:
		for _, seg := range n.str.segs {
			if seg.ref != nil {
				visit(path, seg.ref)
			}
		}
	case nodeMap:
		for i, k := range n.keys {
			n.vals[i].refs(joinPath(path, k), visit)
		}
	case nodeList:
		for i, c := range n.items {
			c.refs(indexPath(path, i), visit)
		}
	}
}
