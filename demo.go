// Package reconciler carries the files the reconciler binary ships with:
// the demo workspace in testdata/demo, which `reconciler serve` loads into
// its in-memory store. The library itself lives in the subpackages; see
// ARCHITECTURE.md.
package reconciler

import "embed"

// DemoFiles holds testdata/demo: the release demo workspace (release.yaml).
//
//go:embed testdata/demo
var DemoFiles embed.FS
