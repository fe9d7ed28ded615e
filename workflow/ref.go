package workflow

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/expr"
)

// The roots a {{ }} reference or a `when` condition can name.
const (
	RootWorkflow  = "workflow"
	RootRelease   = "release"
	RootVariables = "variables"
	RootMatrix    = "matrix"
	RootTasks     = "tasks"
)

var (
	refEnv         = expr.MustEnv(RootWorkflow, RootRelease, RootVariables, RootMatrix, RootTasks)
	refEnvNoMatrix = expr.MustEnv(RootWorkflow, RootRelease, RootVariables, RootTasks)

	pathRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[[0-9]+\])*$`)
	chainRe  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*`)
	stringRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
)

// celLiteral are words that look like a path but are CEL literals.
var celLiteral = map[string]bool{"true": true, "false": true, "null": true}

// pathElem is one step of a dotted path: a field name or a list index.
type pathElem struct {
	key string
	idx int // -1 for a field
}

// ref is one {{ }} reference, compiled: a plain dotted path, or a CEL
// program when the text is not a plain path.
type ref struct {
	src    string
	path   []pathElem    // nil for CEL
	prog   *expr.Program // nil for a path
	chains [][]string    // identifier chains a CEL program reads (for redaction)
}

// readChains returns the identifier chains the reference reads: its path
// up to the first index, or the chains of its CEL program.
func (r *ref) readChains() [][]string {
	if r.path == nil {
		return r.chains
	}
	chain := make([]string, 0, len(r.path))
	for _, e := range r.path {
		if e.idx >= 0 {
			break
		}
		chain = append(chain, e.key)
	}
	return [][]string{chain}
}

// compileRef compiles the text between {{ and }}. matrix says whether the
// matrix root is in scope.
func compileRef(src string, matrix bool) (*ref, error) {
	src = strings.TrimSpace(src)
	if src == "" {
		return nil, fmt.Errorf("empty reference {{}}")
	}
	if pathRe.MatchString(src) && !celLiteral[strings.SplitN(src, ".", 2)[0]] {
		p := parsePath(src)
		if err := checkRoot(p[0].key, matrix); err != nil {
			return nil, err
		}
		return &ref{src: src, path: p}, nil
	}
	env := refEnvNoMatrix
	if matrix {
		env = refEnv
	}
	prog, err := env.Compile(src)
	if err != nil {
		return nil, err
	}
	r := &ref{src: src, prog: prog}
	for _, c := range chainRe.FindAllString(stringRe.ReplaceAllString(src, `""`), -1) {
		parts := strings.Split(c, ".")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		if isRoot(parts[0]) {
			r.chains = append(r.chains, parts)
		}
	}
	return r, nil
}

func isRoot(s string) bool {
	switch s {
	case RootWorkflow, RootRelease, RootVariables, RootMatrix, RootTasks:
		return true
	}
	return false
}

func checkRoot(root string, matrix bool) error {
	if !isRoot(root) {
		return fmt.Errorf("unknown root %q; want workflow, release, variables, matrix or tasks", root)
	}
	if root == RootMatrix && !matrix {
		return fmt.Errorf("matrix is only available in a task with a matrix")
	}
	return nil
}

// parsePath splits a path that matched pathRe.
func parsePath(src string) []pathElem {
	var out []pathElem
	for _, part := range strings.Split(src, ".") {
		name, rest, _ := strings.Cut(part, "[")
		out = append(out, pathElem{key: name, idx: -1})
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			n, _ := strconv.Atoi(num)
			out = append(out, pathElem{idx: n})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

// pathString renders the first n elements of a path.
func pathString(p []pathElem, n int) string {
	var b strings.Builder
	for i := 0; i < n && i < len(p); i++ {
		if p[i].idx >= 0 {
			fmt.Fprintf(&b, "[%d]", p[i].idx)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p[i].key)
	}
	return b.String()
}

// segment is a piece of a string with references: literal text, or a
// reference when ref is set.
type segment struct {
	lit string
	ref *ref
}

// tstr is a parsed string. whole is true when the string is exactly one
// reference, which then yields a typed value.
type tstr struct {
	segs  []segment
	whole bool
}

// parseString splits s into literal text and {{ }} references. It returns
// nil when s has none.
func parseString(s string, matrix bool) (*tstr, error) {
	if !strings.Contains(s, "{{") {
		return nil, nil
	}
	var t tstr
	rest := s
	for rest != "" {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.segs = append(t.segs, segment{lit: rest})
			break
		}
		if i > 0 {
			t.segs = append(t.segs, segment{lit: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("unterminated {{ in %q", s)
		}
		inner := rest[i+2 : i+2+j]
		r, err := compileRef(inner, matrix)
		if err != nil {
			return nil, &RefError{Ref: strings.TrimSpace(inner), Msg: shortExprError(err)}
		}
		t.segs = append(t.segs, segment{ref: r})
		rest = rest[i+2+j+2:]
	}
	t.whole = len(t.segs) == 1 && t.segs[0].ref != nil
	return &t, nil
}

// shortExprError words an error without repeating the expression, which
// the caller shows already.
func shortExprError(err error) string {
	var ee *expr.Error
	if errors.As(err, &ee) {
		if ee.Line > 0 {
			return fmt.Sprintf("line %d, column %d: %s", ee.Line, ee.Column, ee.Message)
		}
		return ee.Message
	}
	return err.Error()
}

// RefError is a {{ }} reference that does not compile or resolve. Path is
// where the reference sits (e.g. "spec.tasks[1].config.namespace"), Ref the
// text inside the braces.
type RefError struct {
	Path string
	Ref  string
	Msg  string
}

// Error renders "path: {{ref}}: message".
func (e *RefError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Ref != "" {
		b.WriteString("{{")
		b.WriteString(e.Ref)
		b.WriteString("}}: ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// at returns a copy of the error located under prefix.
func (e *RefError) at(prefix string) *RefError {
	c := *e
	switch {
	case c.Path == "":
		c.Path = prefix
	case strings.HasPrefix(c.Path, "["):
		c.Path = prefix + c.Path
	case prefix != "":
		c.Path = prefix + "." + c.Path
	}
	return &c
}
