package reconcile_test

import (
	"encoding"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// The tests in this file hold docs/snapshot-format.md to the code: every
// JSON field, state, intent, enumerated value and action type must appear
// in it as `name`, and its marked examples must decode (and decide, and
// fail) exactly as shown. Markers are HTML comments on the line before a
// fenced code block:
//
//	<!-- example -->      a snapshot that must decode
//	<!-- decision -->     the decision of the example before it
//	<!-- bad-example -->  a snapshot that must be refused
//	<!-- error -->        text containing the refusal's message
const docPath = "../docs/snapshot-format.md"

// docActions holds one value of every action type, so their fields can be
// walked. TestDocValuesDocumented fails when an ActionType constant has no
// entry here.
var docActions = []reconcile.Action{
	reconcile.Transition{}, reconcile.PatchStatus{}, reconcile.LaunchReview{},
	reconcile.AutoMergePR{}, reconcile.ResumeAgent{}, reconcile.RequeueForAgent{},
	reconcile.RequeueSoon{}, reconcile.DeferWithBackoff{}, reconcile.ClearControlIntent{},
	reconcile.EnqueueAgent{}, reconcile.LaunchReviewRun{}, reconcile.SubmitReview{},
	reconcile.MarkStale{}, reconcile.EnqueueTurn{}, reconcile.ReleasePod{}, reconcile.Noop{},
}

// docSnapshots maps each kind to its snapshot type.
var docSnapshots = map[reconcile.RunKind]reflect.Type{
	reconcile.KindRepo:            reflect.TypeFor[reconcile.RepoSnapshot](),
	reconcile.KindStandalone:      reflect.TypeFor[reconcile.StandaloneSnapshot](),
	reconcile.KindPRReview:        reflect.TypeFor[reconcile.PRReviewSnapshot](),
	reconcile.KindPersistentAgent: reflect.TypeFor[reconcile.AgentSnapshot](),
}

// setup reads the format document.
func setup(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(docPath)
	require.NoError(t, err, "the recorded-snapshot format must be documented")
	return string(b)
}

// documented reports whether the doc names s as a code span.
func documented(doc, s string) bool { return strings.Contains(doc, "`"+s+"`") }

// kindSection returns the part of the doc under "## Kind `k`", up to the
// next second-level heading.
func kindSection(t *testing.T, doc string, k reconcile.RunKind) string {
	t.Helper()
	head := "\n## Kind `" + string(k) + "`\n"
	i := strings.Index(doc, head)
	require.GreaterOrEqual(t, i, 0, "doc has no section %q", strings.TrimSpace(head))
	rest := doc[i+len(head):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// jsonField is one JSON member of a Go type: its dotted path and its name.
type jsonField struct{ path, name string }

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// ownEncoding reports whether t encodes itself (time.Time,
// reconcile.Duration, json.RawMessage): a leaf, not a set of fields.
func ownEncoding(t reflect.Type) bool {
	for _, x := range []reflect.Type{t, reflect.PointerTo(t)} {
		if x.Implements(marshalerType) || x.Implements(textMarshalerType) {
			return true
		}
	}
	return false
}

// jsonFields lists the JSON members of struct t the way encoding/json sees
// them: embedded structs without a name are flattened, and struct-typed
// members (through pointers, slices and maps) are descended into.
func jsonFields(t reflect.Type, prefix string) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft, prefix)...)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		path := prefix + name
		out = append(out, jsonField{path: path, name: name})
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !ownEncoding(ft) {
			out = append(out, jsonFields(ft, path+".")...)
		}
	}
	return out
}

// stringConsts returns the values of the string constants of the named type
// declared in this package's non-test sources.
func stringConsts(t *testing.T, typeName string) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typeName {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					if s != "" {
						out = append(out, s)
					}
				}
			}
		}
	}
	require.NotEmpty(t, out, "no string constants of type %s found; was it renamed?", typeName)
	return out
}

// TestDocFieldsDocumented: every JSON field of the four snapshot types, of
// every action and of the printed decision is named in the doc, and each
// kind's run-row fields are named in that kind's section.
func TestDocFieldsDocumented(t *testing.T) {
	t.Parallel()
	doc := setup(t)
	var missing []string
	for _, name := range []string{"kind", "type"} { // added by the codec
		if !documented(doc, name) {
			missing = append(missing, name)
		}
	}
	for _, k := range reconcile.Kinds {
		typ, ok := docSnapshots[k]
		require.True(t, ok, "no snapshot type listed for kind %s", k)
		section := kindSection(t, doc, k)
		for _, f := range jsonFields(typ, "") {
			if !documented(doc, f.name) {
				missing = append(missing, typ.Name()+": "+f.path)
			}
			if rest, ok := strings.CutPrefix(f.path, "run."); ok && !strings.Contains(rest, ".") && !documented(section, rest) {
				missing = append(missing, typ.Name()+": "+f.path+" (in section Kind `"+string(k)+"`)")
			}
		}
	}
	for _, a := range docActions {
		typ := reflect.TypeOf(a)
		for _, f := range jsonFields(typ, "") {
			if !documented(doc, f.name) {
				missing = append(missing, typ.Name()+": "+f.path)
			}
		}
	}
	for _, f := range jsonFields(reflect.TypeFor[reconcile.Decision](), "") {
		if !documented(doc, f.name) {
			missing = append(missing, "Decision: "+f.path)
		}
	}
	require.Empty(t, missing, "fields missing from %s (name them as `name`)", docPath)
}

// TestDocValuesDocumented: every kind, every state (in its kind's section),
// every intent, every enumerated field value and every action type is named
// in the doc, and every action type has an entry in docActions.
func TestDocValuesDocumented(t *testing.T) {
	t.Parallel()
	doc := setup(t)
	var missing []string
	for _, k := range reconcile.Kinds {
		if !documented(doc, string(k)) {
			missing = append(missing, "kind "+string(k))
		}
		section := kindSection(t, doc, k)
		for _, st := range reconcile.MachineFor(k).States {
			if !documented(section, string(st)) {
				missing = append(missing, "state "+string(st)+" (in section Kind `"+string(k)+"`)")
			}
		}
	}
	for _, typ := range []string{"Intent", "ActionType", "PodPhase", "PRState", "ChecksStatus", "ReviewStatus", "ReviewTrigger", "PodLifecycle"} {
		for _, v := range stringConsts(t, typ) {
			if !documented(doc, v) {
				missing = append(missing, typ+" "+v)
			}
		}
	}
	require.Empty(t, missing, "values missing from %s (name them as `value`)", docPath)

	listed := map[string]bool{}
	for _, a := range docActions {
		listed[string(a.Type())] = true
	}
	for _, v := range stringConsts(t, "ActionType") {
		require.True(t, listed[v], "action type %q has no entry in docActions", v)
	}
}

// docMarkers are the marker comments the tests understand.
var docMarkers = map[string]bool{"example": true, "decision": true, "bad-example": true, "error": true}

// docBlock is a fenced code block preceded by a marker comment.
type docBlock struct {
	marker string // "example", "decision", ...
	line   int    // 1-based line of the marker
	body   string
}

// markedBlocks returns the fenced code blocks of doc that follow a
// "<!-- marker -->" line, in order. An unknown marker, or one not followed
// by a fence, is an error, so an example cannot silently drop out of the
// tests.
func markedBlocks(t *testing.T, doc string) []docBlock {
	t.Helper()
	lines := strings.Split(doc, "\n")
	var out []docBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "<!-- ") || !strings.HasSuffix(l, " -->") {
			continue
		}
		marker := strings.TrimSuffix(strings.TrimPrefix(l, "<!-- "), " -->")
		require.True(t, docMarkers[marker], "line %d: unknown marker %q (want example, decision, bad-example or error)", i+1, marker)
		require.Less(t, i+1, len(lines), "line %d: marker at end of file", i+1)
		require.True(t, strings.HasPrefix(lines[i+1], "```"), "line %d: marker %q must be followed by a fenced code block", i+1, marker)
		var body []string
		j := i + 2
		for ; j < len(lines) && !strings.HasPrefix(lines[j], "```"); j++ {
			body = append(body, lines[j])
		}
		require.Less(t, j, len(lines), "line %d: unterminated code block", i+1)
		out = append(out, docBlock{marker: marker, line: i + 1, body: strings.Join(body, "\n") + "\n"})
		i = j
	}
	return out
}

// TestDocExamplesDecode: every snapshot example decodes, there is one per
// kind, and the decision shown after an example is the one Decide makes.
func TestDocExamplesDecode(t *testing.T) {
	t.Parallel()
	blocks := markedBlocks(t, setup(t))
	perKind := map[reconcile.RunKind]int{}
	decisions := 0
	for i, b := range blocks {
		if b.marker != "example" {
			continue
		}
		s, err := reconcile.DecodeSnapshot([]byte(b.body))
		require.NoError(t, err, "example at line %d", b.line)
		perKind[s.Ref().Kind]++
		if i+1 >= len(blocks) || blocks[i+1].marker != "decision" {
			continue
		}
		d, err := reconcile.NewDecision(s.Ref(), reconcile.Decide(s))
		require.NoError(t, err)
		got, err := json.Marshal(d)
		require.NoError(t, err)
		require.JSONEq(t, blocks[i+1].body, string(got), "decision shown at line %d", blocks[i+1].line)
		decisions++
	}
	for _, k := range reconcile.Kinds {
		require.Positive(t, perKind[k], "no example of kind %s", k)
	}
	require.Equal(t, len(reconcile.Kinds), decisions, "every kind's example shows its decision")
}

// TestDocBadExamplesFail: every bad example is refused as bad input, and the
// error text shown after it contains the actual message.
func TestDocBadExamplesFail(t *testing.T) {
	t.Parallel()
	blocks := markedBlocks(t, setup(t))
	n := 0
	for i, b := range blocks {
		if b.marker != "bad-example" {
			continue
		}
		_, err := reconcile.DecodeSnapshot([]byte(b.body))
		require.Error(t, err, "bad example at line %d decodes", b.line)
		require.True(t, reconcile.ErrSnapshot(err), "bad example at line %d: not a snapshot error: %v", b.line, err)
		require.Less(t, i+1, len(blocks), "bad example at line %d has no error block", b.line)
		next := blocks[i+1]
		require.Equal(t, "error", next.marker, "bad example at line %d must be followed by an error block", b.line)
		require.True(t, strings.Contains(next.body, err.Error()),
			"error shown at line %d does not contain the actual message %q", next.line, err.Error())
		n++
	}
	require.GreaterOrEqual(t, n, 2, "want at least two bad examples")
}
