// Package console is reconciler's web console, served by `serve` at "/":
// server-rendered html/template pages over the same engine services and
// ports as the API (release grid, a target's verdicts, versions,
// workflows with their DAG, runs, the catalog, operations), with the
// embedded htmx script (static/, version and sha256 in static/README.md)
// polling the live parts. No Node.js step: the script is committed.
//
// Invariants:
//   - Every page needs a session: the API token the user logged in with,
//     kept in an HttpOnly, SameSite=Strict cookie (Secure over TLS) and
//     checked on every request as the API checks a bearer token. A
//     request without one is sent to /login; an unknown or revoked token
//     is refused.
//   - Every POST carries the session's CSRF token (an HMAC of the token
//     secret, so no server state) and comes from this origin; it is
//     refused (403) otherwise, and refused (403) when the token lacks the
//     scope the API asks for the same change (approve: approvals,
//     force-deploys, workflow and catalog approvals; write: cancel,
//     propose; admin: redrive). Buttons are shown only with that scope.
//   - What an action records as its author is the session's token name.
//   - No secret is rendered: pages show no variable values, configs,
//     dispatch copies or outputs; the session token never appears in a
//     page (only its CSRF HMAC does).
//   - Errors map to the API's statuses (api.StatusOf): 4xx with the
//     message, 500 only for a store failure, logged and shown as
//     "internal error". Lists are capped at 500 rows, and say so.
//   - It reads through ports and engine services only, never an adapter.
package console
