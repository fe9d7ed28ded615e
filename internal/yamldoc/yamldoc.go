// Package yamldoc reads a YAML input that must hold exactly one document,
// the one rule every decoder of user files (workflow templates, catalog
// documents, the demo workspace) applies: a second document is refused,
// never silently ignored.
//
// Invariants: Exactly one document: a second one is refused with its line,
// never ignored
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yaml3 "go.yaml.in/yaml/v3"
)

// CountError is an input with no document or more than one. Line is where
// the second document starts (zero when there is none).
type CountError struct {
	Count int
	Line  int
}

// Error says how many documents were found and where the extra one starts.
func (e *CountError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("want exactly one YAML document, got %d (the second starts at line %d)", e.Count, e.Line)
	}
	return fmt.Sprintf("want exactly one YAML document, got %d", e.Count)
}

// One decodes src as a YAML stream and returns its only document node.
// A syntax error is returned as the YAML library reports it; zero
// documents or more than one is a *CountError.
func One(src []byte) (*yaml3.Node, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(src))
	var first *yaml3.Node
	count, line := 0, 0
	for {
		var n yaml3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		count++
		switch count {
		case 1:
			first = &n
		case 2:
			line = n.Line
			if line > 0 && len(n.Content) > 0 {
				line = n.Content[0].Line
			}
		}
	}
	if count != 1 {
		return nil, &CountError{Count: count, Line: line}
	}
	return first, nil
}
