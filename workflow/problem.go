package workflow

import (
	"errors"
	"fmt"
	"strings"
)

// Problem is one thing wrong with a template or its inputs. Path names the
// field, e.g. "spec.tasks[2].matrixStrategy.maxParalel"; Line and Column
// locate it in the source document when known (1-based, zero otherwise).
type Problem struct {
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// String renders "path: message (line L, column C)".
func (p Problem) String() string {
	var b strings.Builder
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d, column %d)", p.Line, p.Column)
	}
	return b.String()
}

// InvalidError carries every problem found in a template or parameter set.
// Match it with errors.As; errors.Is(err, ErrInvalid) also holds.
type InvalidError struct {
	Problems []Problem
}

// ErrInvalid is the sentinel every InvalidError matches with errors.Is.
var ErrInvalid = errors.New("workflow: invalid")

// Error lists the problems, one per line after the first.
func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid workflow template: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid workflow template: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// problems accumulates Problems under a path.
type problems struct {
	list []Problem
}

func (ps *problems) add(path, format string, args ...any) {
	ps.list = append(ps.list, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// joinPath appends a field name to a dotted path.
func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// indexPath appends an index to a path.
func indexPath(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}
