package main

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

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
