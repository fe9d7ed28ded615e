// Package outbound is the HTTP client every outbound adapter (job agents,
// verification providers) shares, so they all behave alike toward the
// systems they call:
//
//   - one Client per adapter, named by the adapter, with a timeout per
//     attempt;
//   - retries with a doubling backoff on 429, a rate-limited 403 and 5xx
//     responses and on transport errors, honouring Retry-After and
//     X-RateLimit-Reset (capped; RetryWait); a request that is not
//     idempotent is retried only when rate limited, which the server
//     answers before it acts;
//   - one classification of answers (Refusal): a refusal that will not
//     change is an *Error marked Refused, which internal/jobagent turns
//     into the job's end (invalidJobAgent, with the vendor's message);
//   - a cap on the response body read;
//   - context cancellation at every wait;
//   - at most PerHost requests in flight to one host at once;
//   - each attempt is a client span (internal/tracing) and carries the
//     caller's trace context in a traceparent header when serve traces;
//   - every error is an *Error naming the adapter, the call and the HTTP
//     status (0 when no response came), never a request header, so a
//     credential sent in a header cannot leak into a log.
//
// Invariants: Per-attempt timeout; retries on 429/5xx/transport errors
// (non-idempotent calls on 429 only) honouring `Retry-After`; response cap;
// per-host concurrency limit; errors name adapter, call and status, never a
// header
package outbound
