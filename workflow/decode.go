package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/internal/yamldoc"
)

// position is a 1-based line and column in the source document.
type position struct{ line, col int }

// Parse decodes a WorkflowTemplate from YAML or JSON. A document that is not
// syntactically valid, or not an object, is an *InvalidError with the line of
// the problem. Otherwise Parse returns the template with every decoding
// problem (unknown field, wrong type) recorded; Validate reports them along
// with the semantic ones. Use Load to parse and validate in one step.
func Parse(data []byte) (*Template, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, syntaxError(0, 0, "empty document")
	}
	var (
		jsonDoc []byte
		pos     map[string]position
		ps      problems
	)
	if trimmed[0] == '{' {
		if !json.Valid(data) {
			var x any
			err := json.Unmarshal(data, &x)
			var se *json.SyntaxError
			if errors.As(err, &se) {
				line, col := strictjson.Position(data, se.Offset)
				return nil, syntaxError(line, col, se.Error())
			}
			return nil, syntaxError(0, 0, "not valid JSON")
		}
		jsonDoc = data
		pos = jsonPositions(data)
	} else {
		node, err := yamldoc.One(data)
		var ce *yamldoc.CountError
		if errors.As(err, &ce) {
			return nil, syntaxError(ce.Line, 0, ce.Error())
		}
		if err != nil {
			return nil, yamlError(data, err)
		}
		j, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			return nil, yamlError(data, err)
		}
		jsonDoc = j
		pos = map[string]position{}
		yamlPositions(node, "", pos, &ps)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonDoc))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, syntaxError(0, 0, err.Error())
	}
	if _, ok := tree.(map[string]any); !ok {
		return nil, syntaxError(1, 1, "a WorkflowTemplate must be an object, got "+jsonKind(tree))
	}
	checkShape(typeOfTemplate, tree, "", &ps)
	nulProblems(tree, "", &ps)

	t := &Template{positions: pos, cache: &planCache{}}
	if len(ps.list) > 0 {
		// Decode what checkShape left of the tree: the values it dropped
		// would stop encoding/json before the rest is read.
		pruned, err := json.Marshal(tree)
		if err != nil {
			return nil, syntaxError(0, 0, err.Error())
		}
		jsonDoc = pruned
	}
	strict := json.NewDecoder(bytes.NewReader(jsonDoc))
	if len(ps.list) == 0 {
		strict.DisallowUnknownFields()
	}
	if err := strict.Decode(t); err != nil && len(ps.list) == 0 {
		// The shape check and encoding/json disagree: report what json says.
		ps.add("", "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	t.positions = pos
	t.cache = &planCache{}
	t.decodeProblems = ps.list
	return t, nil
}

// nulProblems records every string or key of tree holding a NUL character:
// no store can keep one, so the catalog refuses it, and a template that
// validates must be one the catalog takes.
func nulProblems(tree any, path string, ps *problems) {
	switch x := tree.(type) {
	case string:
		if strings.ContainsRune(x, 0) {
			ps.add(path, "must not contain a NUL character (\\u0000)")
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.ContainsRune(k, 0) {
				ps.add(joinPath(path, strconv.Quote(k)), "key must not contain a NUL character (\\u0000)")
				continue
			}
			nulProblems(x[k], joinPath(path, k), ps)
		}
	case []any:
		for i, e := range x {
			nulProblems(e, fmt.Sprintf("%s[%d]", path, i), ps)
		}
	}
}

// Load parses and validates a template; any problem makes it an
// *InvalidError listing every problem found.
func Load(data []byte) (*Template, error) {
	t, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if ps := Validate(t); len(ps) > 0 {
		return nil, &InvalidError{Problems: ps}
	}
	return t, nil
}

func syntaxError(line, col int, msg string) error {
	return &InvalidError{Problems: []Problem{{Line: line, Column: col, Message: "syntax error: " + msg}}}
}

var (
	yamlLineRe    = regexp.MustCompile(`line (\d+):?`)
	unquotedBrace = regexp.MustCompile(`(?m)^[^#"']*?(:|-)\s+\{\{`)
)

// yamlError turns a YAML library error into a syntax problem with its line.
func yamlError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(msg)
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.Replace(msg, m[0], "", 1))
	}
	if loc := unquotedBrace.FindIndex(data); loc != nil && strings.Contains(msg, "invalid map key") {
		line = bytes.Count(data[:loc[1]], []byte("\n")) + 1
		msg = "a value starting with {{ must be quoted, e.g. \"{{workflow.parameters.x}}\""
	}
	return syntaxError(line, 0, msg)
}

// yaml11Bools are the plain words YAML 1.1 (and so sigs.k8s.io/yaml) reads
// as booleans; as mapping keys they silently become "true" or "false".
var yaml11Bools = map[string]bool{
	"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "n": true, "N": true, "no": true, "No": true, "NO": true,
	"on": true, "On": true, "ON": true, "off": true, "Off": true, "OFF": true,
}

// yamlPositions records where each path's key or item starts, and reports
// unquoted keys that YAML 1.1 would turn into booleans.
func yamlPositions(n *yaml3.Node, path string, out map[string]position, ps *problems) {
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			yamlPositions(c, path, out, ps)
		}
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			out[p] = position{k.Line, k.Column}
			if k.Style == 0 && yaml11Bools[k.Value] {
				ps.list = append(ps.list, Problem{Path: p, Line: k.Line, Column: k.Column,
					Message: fmt.Sprintf("key %s is read as a boolean by YAML 1.1; quote it (\"%s\")", k.Value, k.Value)})
			}
			yamlPositions(v, p, out, ps)
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			p := indexPath(path, i)
			out[p] = position{c.Line, c.Column}
			yamlPositions(c, p, out, ps)
		}
	case yaml3.AliasNode:
		if n.Alias != nil {
			yamlPositions(n.Alias, path, out, ps)
		}
	}
}

// jsonPositions records where each path's key or item starts in a JSON
// document.
func jsonPositions(data []byte) map[string]position {
	out := map[string]position{}
	dec := json.NewDecoder(bytes.NewReader(data))
	// Offsets only grow: count lines from the last one asked for, so the
	// whole walk reads the document once.
	var lastOff int64
	line, lineStart := 1, int64(0)
	at := func(off int64) (int, int) {
		if off > int64(len(data)) {
			off = int64(len(data))
		}
		if off < lastOff {
			return strictjson.Position(data, off)
		}
		for k := lastOff; k < off; k++ {
			if data[k] == '\n' {
				line, lineStart = line+1, k+1
			}
		}
		lastOff = off
		return line, int(off-lineStart) + 1
	}
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		switch d {
		case '{':
			for dec.More() {
				off := dec.InputOffset()
				k, err := dec.Token()
				if err != nil {
					return err
				}
				p := joinPath(path, fmt.Sprint(k))
				line, col := at(skipSpace(data, off))
				out[p] = position{line, col}
				if err := walk(p); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				p := indexPath(path, i)
				line, col := at(skipSpace(data, dec.InputOffset()))
				out[p] = position{line, col}
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		_, err = dec.Token()
		if err == io.EOF {
			return nil
		}
		return err
	}
	_ = walk("")
	return out
}

func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// Locate fills Line and Column from the nearest recorded ancestor of each
// problem's path, then orders problems by position and path.
func (t *Template) Locate(ps []Problem) {
	for i := range ps {
		if ps[i].Line > 0 || t.positions == nil {
			continue
		}
		for p := ps[i].Path; p != ""; p = parentPath(p) {
			if at, ok := t.positions[p]; ok {
				ps[i].Line, ps[i].Column = at.line, at.col
				break
			}
		}
	}
	sort.SliceStable(ps, func(a, b int) bool {
		if ps[a].Line != ps[b].Line {
			return ps[a].Line < ps[b].Line
		}
		if ps[a].Column != ps[b].Column {
			return ps[a].Column < ps[b].Column
		}
		return ps[a].Path < ps[b].Path
	})
}

// parentPath strips the last field or index from a path.
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
