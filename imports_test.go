package reconciler_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// module is this module's import path.
const module = "github.com/reconcilerhq/reconciler"

// TestImportRules holds the code to the import rules of ARCHITECTURE.md:
// for every package's non-test files, each import of this module's
// packages must point the way the rules allow.
func TestImportRules(t *testing.T) {
	t.Parallel()
	imports := map[string][]string{} // package dir → module-relative imports
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != "." && err == nil {
				return filepath.SkipDir // a module of its own (bench/)
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				imports[dir] = append(imports[dir], rel)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, imports, "reconcile/release", "the walk found the packages")
	for from, list := range imports {
		for _, to := range list {
			require.NoError(t, importAllowed(from, to))
		}
	}
}

// under reports whether pkg is dir or inside it.
func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// pure reports whether pkg is one of the pure domain packages.
func pure(pkg string) bool {
	return under(pkg, "reconcile") || under(pkg, "policy") || under(pkg, "workflow")
}

// importAllowed applies the rules of ARCHITECTURE.md to one import.
func importAllowed(from, to string) error {
	deny := func(rule string) error { return fmt.Errorf("%s imports %s: %s", from, to, rule) }
	top := strings.Split(to, "/")[0]
	switch {
	case under(from, "cmd"):
		return nil
	case from == "expr":
		return deny("expr/ imports none of this module's packages")
	case from == "reconcile":
		if to != "internal/strictjson" {
			return deny("reconcile/ imports only internal/strictjson")
		}
	case pure(from):
		if !pure(to) && to != "expr" && to != "internal/strictjson" && to != "internal/yamldoc" {
			return deny("the pure packages import only each other, expr/, internal/strictjson and internal/yamldoc")
		}
		if under(from, "reconcile") && (under(to, "policy") || under(to, "workflow")) {
			return deny("reconcile/ sits below policy/ and workflow/")
		}
		if under(from, "workflow") && under(to, "policy") {
			return deny("workflow/ imports reconcile/ and expr/, not policy/")
		}
	case under(from, "ports"):
		if !pure(to) && to != "expr" && !under(to, "internal") && !under(to, "ports") {
			return deny("ports/ imports the pure packages")
		}
	case under(from, "api"):
		if top == "adapters" || top == "cmd" {
			return deny("api/ never imports an adapter")
		}
	case under(from, "console"):
		if top == "adapters" || top == "cmd" || top == "internal" {
			return deny("console/ imports ports/, engine/..., api/ and the pure packages, never an adapter")
		}
	case under(from, "engine"):
		if top == "adapters" || top == "cmd" {
			return deny("engine/ never imports an adapter")
		}
	case under(from, "adapters"):
		own := path.Join("adapters", strings.Split(from, "/")[1])
		if (top == "adapters" && !under(to, own)) || top == "engine" || top == "cmd" {
			return deny("adapters import ports/ and the pure packages, never each other")
		}
	case under(from, "internal"):
		if top == "engine" || top == "adapters" || top == "cmd" {
			return deny("internal/ helpers import only ports/, the pure packages and each other")
		}
	}
	return nil
}
