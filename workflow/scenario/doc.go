// Package scenario loads scripted workflow scenarios (testdata/workflows/
// scenarios/*.yaml) and runs them through the pure scheduler with a
// simulated executor, so the scheduler's tests and an engine-level runner
// can share one set of expectations.
//
// A scenario file holds a template (inline or by templateFile), parameter
// values, variables and secrets, matrix candidates (inputs), the scripted
// outcome of every job ("succeed", "fail", "hang", joined by "-then-" per
// attempt), job outputs, and the expected final workflow and TaskRun phases.
//
// Invariants:
//   - The simulator applies only edges of workflow.TaskRunEdges and
//     workflow.WorkflowEdges; any other move is an error, not a silent fix.
//   - Time is simulated: the clock starts at Start and only jumps to the
//     next job completion, WakeAt or cancel request, so runs are
//     deterministic and instant.
//   - Files are read only through the fs.FS the caller passes.
package scenario
