package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// FuzzCatalogDocument: any document for either catalog kind, YAML or JSON,
// is converted and validated as `catalog create -f` does, or refused with
// an error; never a panic. Seeded from testdata's templates and the demo.
// Run with `make fuzz`.
//
// The pattern for every decoder of user input (the API's request bodies
// too): a FuzzXxx in the decoder's package, seeded from testdata, asserting
// "accepted and usable, or refused with an error"; `make fuzz` finds it by
// name, and crashers are committed under the package's testdata/fuzz.
func FuzzCatalogDocument(f *testing.F) {
	for _, pattern := range []string{"../../testdata/workflows/*.yaml", "../../testdata/demo/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src, false)
			}
		}
	}
	f.Add([]byte(policyJSON("gate")), true)
	f.Add([]byte("id: gate\nname: Gate\npriority: 1\nenabled: true\nrules: []\n"), true)
	validators := catalogValidators()
	f.Fuzz(func(t *testing.T, src []byte, policy bool) {
		kind := revision.KindWorkflowTemplate
		if policy {
			kind = revision.KindPolicy
		}
		content, err := yamlToJSON(src)
		if err != nil {
			return
		}
		_ = validators[kind](content)
	})
}

// FuzzDemoRelease: any release.yaml is loaded by `serve --demo-dir` or
// refused with an error naming the file; never a panic. Seeded from
// testdata/demo.
func FuzzDemoRelease(f *testing.F) {
	rollout, _ := os.ReadFile("../../testdata/demo/rollout.yaml")
	if src, err := os.ReadFile("../../testdata/demo/release.yaml"); err == nil {
		f.Add(src)
	}
	f.Add([]byte("workspace: {id: w, name: w}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		fsys := fstest.MapFS{demoReleaseFile: {Data: src}, "rollout.yaml": {Data: rollout}}
		_, _ = loadReleaseDemo(fsys, "fuzz")
	})
}

// FuzzApplyManifest: any file given to `apply -f` is read into documents
// or refused with a usage error (exit 2) that names the file; never a
// panic. A server problem about any field of an accepted document is
// placed at the file and a line of it. Seeded from the apply tests'
// manifests.
func FuzzApplyManifest(f *testing.F) {
	f.Add([]byte(shopStaging), "spec.resource_selector")
	f.Add([]byte("apiVersion: reconciler.dev/v1\nkind: Workspace\nmetadata: {name: acme}\n---\n---\n"+
		"- apiVersion: reconciler.dev/v1\n  kind: Policy\n  metadata: {name: gate, workspace: acme}\n  spec: {enabled: true, rules: [{id: a, type: anyApproval, min_approvals: 1}]}\n"), "spec.rules[0].min_approvals")
	f.Add([]byte(`{"apiVersion":"reconciler.dev/v1","kind":"System","metadata":{"name":"shop","workspace":"acme"},"spec":{"name":"Shop"}}`), "metadata.name")
	f.Add([]byte("a: &x [*x]\n"), "")
	f.Fuzz(func(t *testing.T, src []byte, field string) {
		m := &manifest{}
		if err := m.add("fuzz.yaml", src); err != nil {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Fatalf("error %T is not a usage error: %v", err, err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(m.docs) != len(m.sources) {
			t.Fatalf("%d documents, %d sources", len(m.docs), len(m.sources))
		}
		if len(m.docs) == 0 {
			return
		}
		problem := &client.Error{Status: 422, Title: "Unprocessable Entity"}
		problem.Errors = append(problem.Errors, struct {
			Message  string `json:"message"`
			Location string `json:"location"`
		}{Message: "bad", Location: "body.documents[" + strconv.Itoa(len(m.docs)-1) + "]." + field})
		err := m.place(problem)
		if err == nil || !strings.HasPrefix(err.Error(), "fuzz.yaml:") {
			t.Fatalf("problem at %q not placed in the file: %v", field, err)
		}
	})
}
