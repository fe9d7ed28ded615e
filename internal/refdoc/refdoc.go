// Package refdoc writes Markdown references of Go types from their source:
// each struct's doc comment and a table of its JSON fields with their types
// and comments. The references users write documents from (policy rules,
// workflow templates) are generated with it, so a field without an entry
// cannot happen: tests regenerate them and fail when the committed text is
// stale.
package refdoc

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Field is one JSON field of a struct.
type Field struct {
	// Name is the JSON name; Type is the Go type as written; Doc is the
	// field's comment; Optional is set by omitempty or omitzero.
	Name, Type, Doc string
	Optional        bool
}

// Struct is one struct type of a package.
type Struct struct {
	// Name is the type's name; Doc its comment.
	Name, Doc string
	// Fields are its JSON fields in source order, embedded structs' fields
	// inlined.
	Fields []Field
}

// Package holds the struct types of one package directory.
type Package struct {
	structs map[string]*ast.StructType
	docs    map[string]string
}

// Load parses the non-test Go files of dir.
func Load(dir string) (*Package, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("refdoc: read %s: %w", dir, err)
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("refdoc: parse %s: %w", name, err)
		}
		files = append(files, f)
	}
	dp, err := doc.NewFromFiles(fset, files, "x", doc.PreserveAST|doc.AllDecls)
	if err != nil {
		return nil, fmt.Errorf("refdoc: %s: %w", dir, err)
	}
	p := &Package{structs: map[string]*ast.StructType{}, docs: map[string]string{}}
	for _, t := range dp.Types {
		for _, spec := range t.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				p.structs[ts.Name.Name] = st
				p.docs[ts.Name.Name] = strings.TrimSpace(t.Doc)
			}
		}
	}
	return p, nil
}

// Struct returns the named struct type; ok is false when the package has
// none of that name.
func (p *Package) Struct(name string) (Struct, bool) {
	st, ok := p.structs[name]
	if !ok {
		return Struct{}, false
	}
	return Struct{Name: name, Doc: p.docs[name], Fields: p.fields(st)}, true
}

// Walk returns the named structs, then every struct of the package their
// fields' types name, and so on, each once, breadth first: the roots first,
// in order. A root the package does not have is an error.
func (p *Package) Walk(roots ...string) ([]Struct, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), roots...)
	for _, r := range roots {
		seen[r] = true
	}
	var out []Struct
	for i := 0; i < len(queue); i++ {
		s, ok := p.Struct(queue[i])
		if !ok {
			return nil, fmt.Errorf("refdoc: no struct %s", queue[i])
		}
		out = append(out, s)
		for _, f := range s.Fields {
			typ := strings.TrimLeft(f.Type, "[]*")
			if _, ok := p.structs[typ]; ok && !seen[typ] {
				seen[typ] = true
				queue = append(queue, typ)
			}
		}
	}
	return out, nil
}

func (p *Package) fields(st *ast.StructType) []Field {
	var out []Field
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			tag = reflect.StructTag(strings.Trim(f.Tag.Value, "`")).Get("json")
		}
		if len(f.Names) == 0 { // embedded: inline its fields
			if id, ok := f.Type.(*ast.Ident); ok && tag == "" {
				if inner, ok := p.structs[id.Name]; ok {
					out = append(out, p.fields(inner)...)
				}
			}
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.Names[0].IsExported() {
			continue
		}
		if name == "" {
			name = f.Names[0].Name
		}
		comment := f.Doc.Text()
		if comment == "" {
			comment = f.Comment.Text()
		}
		out = append(out, Field{Name: name, Type: exprString(f.Type), Doc: oneLine(comment),
			Optional: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")})
	}
	return out
}

// Table renders fields as a Markdown table.
func Table(fields []Field) string {
	var b strings.Builder
	b.WriteString("| Field | Type | Meaning |\n|---|---|---|\n")
	for _, f := range fields {
		name := "`" + f.Name + "`"
		if f.Optional {
			name += " (optional)"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", name, f.Type, strings.ReplaceAll(f.Doc, "|", `\|`))
	}
	return b.String()
}

// Check reports the fields whose comment is empty, as "Type.field", so a
// test can insist that each has an entry.
func Check(structs ...Struct) []string {
	var missing []string
	for _, s := range structs {
		for _, f := range s.Fields {
			if f.Doc == "" {
				missing = append(missing, s.Name+"."+f.Name)
			}
		}
	}
	return missing
}

// WriteOrCompare writes text to path when UPDATE_DOCS=1 and returns the
// committed text, for the caller to compare with text.
func WriteOrCompare(path, text string) (string, error) {
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return "", err
		}
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	case *ast.ArrayType:
		return "[]" + exprString(t.Elt)
	case *ast.MapType:
		return "map[" + exprString(t.Key) + "]" + exprString(t.Value)
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.InterfaceType:
		return "any"
	}
	return fmt.Sprintf("%T", e)
}
