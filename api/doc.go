// Package api is reconciler's HTTP API under /api/v1: JSON operations
// registered with huma on the standard net/http mux, described by the
// OpenAPI 3.1 document the server serves at /api/v1/openapi.json.
//
// Invariants:
//   - Every operation needs a bearer token (ports.Tokens) with the scope the
//     operation declares, except a job report signed with HMAC-SHA256 by
//     the job's agent (SignRequest); the OpenAPI document needs read.
//   - Errors are RFC 9457 application/problem+json: invalid input 400/422
//     naming the field (body.FIELD), 401/403 for auth, 404, 409 for a
//     conflict (stale version, held lock, taken id), 413 over the body
//     limit, 503 with Retry-After for a read the store could not answer
//     within Options.ReadWait (reads run on ports.LaneRead). Unknown JSON
//     fields are refused. User input never yields a 500: only a store
//     failure does.
//   - What a request records as its author (approvals, force-deploys,
//     cancellations, catalog approvals) is the authenticated principal,
//     never a field of the request.
//   - Handlers depend on ports and engine services only, never on an
//     adapter; every read of a store goes through the Server's few fields.
package api
