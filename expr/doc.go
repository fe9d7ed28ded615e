// Package expr compiles and evaluates the CEL expressions users write:
// selectors, rule conditions, workflow `when` clauses and verification
// success and failure conditions.
//
// Invariants:
//   - Compilation is deterministic and cached per environment by source text,
//     at most CacheSize programs per environment (the oldest dropped
//     first); a cached program is safe for concurrent use.
//   - A bad expression yields an *Error with the 1-based line and column of
//     the first problem; evaluation never panics on user input.
//   - Evaluation does no I/O and reads no clock: everything it sees is in the
//     activation the caller passes.
//   - It sits below the domain: reconcile/release, policy and workflow
//     import it; it imports none of this module's packages.
package expr
