// Package policy holds release policies and their pure rule evaluators: the
// gates that decide whether a version may deploy to a release target now
// (Evaluate, Explain), whether a job may be created for a release
// (EvaluateJob, MayCreateJob), when to roll back (Rollback.Decide) and how
// to judge verification measurements (EvaluateMeasurements).
//
// A Policy applies to the targets its CEL selector matches (empty: all) and
// holds rules, a closed tagged union: JSON {"id", "type", ...params} with
// snake_case parameter names. Every rule type documents its semantics on
// its struct, one bullet per case; the table tests follow those bullets.
//
// Invariants:
//   - Pure: no I/O, no clock, no randomness. Now and every fact a rule reads
//     are fields of Input, loaded by the caller; the same Input and policies
//     always give the same verdicts.
//   - Validation refuses a policy with an invalid CEL expression, RRULE or
//     time zone with a *release.FieldError naming the field path (and CEL
//     line and column); a bad rule is never silently dropped. Decoding is
//     strict: unknown fields and rule types are refused.
//   - Evaluate runs version gates cheapest first (VersionGates), stops at
//     the first denial, and otherwise reports the earliest Until among the
//     pending verdicts as the time to look again. Pending means "not yet";
//     Denied means time alone will not help.
//   - A rule waived by an unexpired policy skip for the version and target
//     scope counts as Allowed and says so.
//   - A policy whose selector fails to evaluate fails closed (Denied).
//   - A release's run is its consecutive jobs at the head of the target's
//     history: without a retry rule a run has exactly one job; with one, at
//     most MaxRetries+1. A release wanted again after another one ran starts
//     a new run (a fresh budget). Without a concurrency rule a target has at
//     most one active job.
//   - Choose takes ready versions, and a paused version only where the
//     target already runs it: a pause stops a rollout, it rolls nothing
//     back.
//   - Gradual rollout admits the targets of each deployment and environment
//     in ascending FNV-1a order of (target key + version ID), from a start
//     no earlier than the version's creation, its approval and progression
//     and the opening of the deployment windows that apply; the set of
//     admitted targets only grows with Now.
//   - Deployment windows are computed on the wall clock of their time zone
//     and give the same answer as iterating the RRULE from its DTSTART,
//     though they iterate from a recent period start.
//
// Invariants of Choose: Reads the stream only up to the first allowed
// version; only ready, non-excluded versions are chosen, and paused ones
// where the target already runs them; keeps the newest reasons and the
// earliest time a pending verdict may change
package policy
