package main

import (
	"os"
	"testing"

	"github.com/reconcilerhq/reconciler/adapters/process"
)

// TestMain lets this test binary supervise agents, as the reconciler binary
// does: the process runtimes the tests build run os.Executable() with
// process.SuperviseArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == process.SuperviseArg {
		os.Exit(process.Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}
