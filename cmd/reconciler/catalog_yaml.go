package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/internal/yamldoc"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// yamlToJSON converts one YAML document holding a mapping to JSON; syntax
// errors name their line in src (see yamlSyntaxError).
func yamlToJSON(src []byte) (json.RawMessage, error) {
	n, err := yamldoc.One(src)
	var ce *yamldoc.CountError
	switch {
	case errors.As(err, &ce):
		return nil, revision.Invalid(fmt.Errorf("content: %w", err))
	case err != nil:
		return nil, yamlSyntaxError(src, err)
	case n.Kind == yaml3.DocumentNode && len(n.Content) == 1 && n.Content[0].Kind != yaml3.MappingNode:
		return nil, revision.Invalid(fmt.Errorf("content: must be a mapping (an object), line %d", n.Content[0].Line))
	}
	j, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		return nil, revision.Invalid(fmt.Errorf("content: %s", strings.TrimPrefix(msg, "yaml: ")))
	}
	if err := ports.ValidateRevisionContent(j); err != nil {
		return nil, err
	}
	return j, nil
}

// yamlParserProblems are the problems libyaml's parser reports, as opposed
// to its scanner's and reader's. go.yaml.in/yaml/v3 prints the line of a
// parser error zero-based (its scanner errors one-based), and prints no line
// at all for a mark on the first line.
var yamlParserProblems = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found undefined tag handle",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
}

// yamlReaderProblems are the problems libyaml's reader reports, before any
// line is known: bad encoding and control characters.
var yamlReaderProblems = []string{
	"control characters are not allowed",
	"invalid leading UTF-8 octet",
	"invalid trailing UTF-8 octet",
	"incomplete UTF-8 octet sequence",
	"invalid length of a UTF-8 sequence",
	"invalid Unicode character",
}

// yamlLineRe splits "line N: problem".
var yamlLineRe = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlSyntaxError turns a go.yaml.in/yaml/v3 syntax error about src into a
// validation error naming the true one-based line of src: parser errors are
// moved down the one line v3 misses, reader errors get the line of the
// first bad byte, and a problem found only at the end of the input (an
// unclosed bracket, say) names the last line of the document rather than a
// line past it.
func yamlSyntaxError(src []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	switch {
	case slices.Contains(yamlParserProblems, msg):
		line++
	case slices.Contains(yamlReaderProblems, msg):
		line = badByteLine(src)
	case line == 0:
		// A scanner error on the first line: v3 prints no line for it.
		line = 1
	}
	if last := lastDocumentLine(src); line > last {
		return revision.Invalid(fmt.Errorf("content: syntax error at line %d: %s (the document ends there)", last, msg))
	}
	if line == 0 {
		return revision.Invalid(fmt.Errorf("content: syntax error: %s", msg))
	}
	return revision.Invalid(fmt.Errorf("content: syntax error at line %d: %s", line, msg))
}

// lastDocumentLine is the one-based line of src's last line holding more
// than blanks or a comment (1 when there is none).
func lastDocumentLine(src []byte) int {
	last := 1
	for i, l := range strings.Split(string(src), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			last = i + 1
		}
	}
	return last
}

// badByteLine is the one-based line of the first byte of src that YAML
// refuses (invalid UTF-8 or a control character), 0 when none is found.
func badByteLine(src []byte) int {
	line := 1
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return line
		case r == '\n':
			line++
		case r != '\t' && r != '\r' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0 && r != 0x85)):
			return line
		}
		i += n
	}
	return 0
}

// pathSegmentRe matches one step of a field path: a name or an [index].
var pathSegmentRe = regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`)

// locateField finds the field at path (e.g. "rules[2].condition") in src,
// a YAML or JSON document: the node of its key (nil for a list element) and
// of its value. ok is false when src does not parse or has no such field.
func locateField(src []byte, path string) (key, val *yaml3.Node, ok bool) {
	var doc yaml3.Node
	if path == "" || yaml3.Unmarshal(src, &doc) != nil || len(doc.Content) != 1 {
		return nil, nil, false
	}
	return locateNode(doc.Content[0], path)
}

// locateNode is locateField under the node n.
func locateNode(cur *yaml3.Node, path string) (key, val *yaml3.Node, ok bool) {
	if path == "" {
		return nil, nil, false
	}
	for _, m := range pathSegmentRe.FindAllStringSubmatch(path, -1) {
		key = nil
		if m[2] != "" {
			i, err := strconv.Atoi(m[2])
			if err != nil || cur.Kind != yaml3.SequenceNode || i >= len(cur.Content) {
				return nil, nil, false
			}
			cur = cur.Content[i]
			continue
		}
		if cur.Kind != yaml3.MappingNode {
			return nil, nil, false
		}
		found := false
		for i := 0; i+1 < len(cur.Content); i += 2 {
			if cur.Content[i].Value == m[1] {
				key, cur, found = cur.Content[i], cur.Content[i+1], true
				break
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	return key, cur, true
}

// positionedProblem is a problem of one field, placed in the user's file.
type positionedProblem struct {
	msg string
	err error
}

func (e *positionedProblem) Error() string { return e.msg }
func (e *positionedProblem) Unwrap() error { return e.err }

// placePolicyProblem puts the position of a policy problem into the user's
// file src. The policy package reports a CEL error's line and column inside
// the expression, and strictjson's positions are in the JSON converted from
// YAML; both are replaced by the line (and, when it can be told, the
// column) of the field in src. Other errors pass through.
func placePolicyProblem(src []byte, fromYAML bool, err error) error {
	var fe *release.FieldError
	var se *strictjson.Error
	switch {
	case errors.As(err, &fe):
		key, val, ok := locateField(src, fe.Field)
		if !ok {
			return err
		}
		line := val.Line
		if key != nil && val.Kind != yaml3.ScalarNode {
			line = key.Line
		}
		msg := fmt.Sprintf("%s: %s", fe.Field, fe.Msg)
		switch col, exact := exprColumn(src, val, fe.Line, fe.Column); {
		case exact:
			msg += fmt.Sprintf(" (line %d, column %d)", line, col)
		case fe.Line > 0:
			msg += fmt.Sprintf(" (field at line %d; line %d, column %d of the expression)", line, fe.Line, fe.Column)
		default:
			msg += fmt.Sprintf(" (line %d)", line)
		}
		return revision.Invalid(&positionedProblem{msg: msg, err: err})
	case errors.As(err, &se) && fromYAML:
		msg := se.Msg
		if se.Path != "" {
			msg = se.Path + ": " + msg
		}
		if key, val, ok := locateField(src, se.Path); ok {
			n := val
			if key != nil {
				n = key
			}
			msg += fmt.Sprintf(" (line %d)", n.Line)
		}
		return revision.Invalid(&positionedProblem{msg: msg, err: err})
	}
	return err
}

// exprColumn turns a position inside a one-line expression, the scalar val,
// into a column of src. exact is false when it cannot be told for sure (a
// multi-line or escaped scalar).
func exprColumn(src []byte, val *yaml3.Node, line, col int) (int, bool) {
	if line != 1 || col <= 0 || val.Kind != yaml3.ScalarNode || strings.Contains(val.Value, "\n") {
		return 0, false
	}
	lines := strings.Split(string(src), "\n")
	if val.Line < 1 || val.Line > len(lines) {
		return 0, false
	}
	start := val.Column // 1-based, at the value or its opening quote
	if val.Style == yaml3.DoubleQuotedStyle || val.Style == yaml3.SingleQuotedStyle {
		start++
	} else if val.Style != 0 {
		return 0, false
	}
	text := []rune(lines[val.Line-1])
	prefix := []rune(val.Value)
	if col-1 > len(prefix) || start-1+len(prefix) > len(text) || string(text[start-1:start-1+len(prefix)]) != val.Value {
		return 0, false
	}
	return start + col - 1, true
}
