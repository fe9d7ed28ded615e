// Package verify is the measure-and-judge step of verification, shared by
// the release chain (job verification) and workflows (verification tasks):
// Run takes each metric's due measurements through its ports.Verifier and
// judges them with the pure policy rules.
//
// Invariants:
//   - Stateless: the measurements taken so far are passed in and the new
//     ones appended to them; the caller stores them.
//   - A missing verifier or a provider error is a failed measurement, never
//     an error of the pass.
package verify
