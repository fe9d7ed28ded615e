// Package verifiers holds the built-in verification providers, each a
// ports.Verifier:
//
//   - Sleep ("sleep") waits provider.config.duration, then returns
//     provider.config.result (default {"ok": true}).
//   - Scripted ("scripted") returns provider.config.results[Attempt-1],
//     repeating the last entry; an entry {"error": "msg"} makes the
//     measurement fail with msg.
//
// Invariants:
//   - Stateless: a measurement depends only on the request (the metric's
//     provider config and the attempt number), so the providers are
//     goroutine-safe and need no constructor; the zero value is ready.
//   - Results are JSON-like (maps, slices, strings, float64, bool, nil) and
//     are fresh copies: a caller may change a result without changing the
//     config or another caller's result.
//   - A bad config is an error wrapping a *release.FieldError that names
//     the key (provider.config.duration, provider.config.results, ...);
//     nothing panics.
//   - Sleep holds no lock while it waits and returns ctx.Err() when its
//     context ends first.
package verifiers
