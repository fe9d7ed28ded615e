// Package release holds the pure domain types of the release chain: the
// workspace catalog (systems, deployments, environments, resources), the
// release targets computed from it, deployment versions, releases, jobs,
// approvals, policy skips and deployment variables.
//
// Invariants:
//   - The package is pure: no I/O, no clock, no randomness. Times are fields
//     the caller fills in.
//   - Selectors are CEL expressions (see Selector and CEL). An EMPTY selector
//     matches nothing, as a null selector does in ctrlplane; write "true" to
//     match everything. A selector that fails to evaluate for a subject does
//     not match it.
//   - A resource is a release target of (deployment, environment) exactly
//     when the deployment and the environment belong to the same system, the
//     resource belongs to that system's workspace, and the resource matches
//     both resource selectors. ComputeTargets returns targets sorted by Key,
//     without duplicates.
//   - A release's ID is a content hash of (target, version, resolved
//     variables): identical releases get identical IDs, different ones
//     different IDs (see ReleaseID).
//   - Secret plaintext lives only in a Sensitive value, which prints and
//     encodes as "[REDACTED]" in every form (String, GoString, any fmt verb,
//     JSON, text, slog). Stored variables hold a SecretRef (ciphertext or a
//     reference), never plaintext.
//   - Validate on every saved type reports the first problem as a
//     *FieldError naming the field (and the CEL line and column for a bad
//     selector); it never panics. FieldError matches ErrInvalid.
//   - Job statuses move only along the edges of JobEdges.
package release
