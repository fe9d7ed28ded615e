// Package github is the GitHub code host over the REST API: a
// ports.CodeHost (merge with the configured method, post a review) and a
// ports.PullRequests (open a pull request from an agent's branch, read a
// pull request's state, mergeability, check runs and reviews), plus the
// webhook receiver that wakes the runs a pull_request, check_suite,
// check_run or pull_request_review delivery concerns.
//
// Requests go through internal/outbound (timeouts, retries of 429 and 5xx
// honouring Retry-After, body cap, errors that never quote a header); the
// client adds GitHub's own rate limit on top. Its nine calls are checked,
// request and answer, against GitHub's published REST description in the
// tests (githubtest). It does not use go-github: that client brings its
// own HTTP stack, which would bypass the outbound address guard and the
// one classification of answers every adapter shares, for calls this
// small.
//
// Invariants: the token is resolved through ports.SecretResolver for each
// request and sent only in the Authorization header, never logged or put
// in an error; every call is rate-limit aware (X-RateLimit-Remaining 0
// holds further calls until X-RateLimit-Reset, Retry-After is honoured up
// to MaxWait, and a longer wait fails with ErrRateLimited instead of
// blocking a pass); a merge of an already merged pull request and a review
// already posted under the same idempotency key (a marker in its body) are
// no-ops, and concurrent submissions of one key through a client run one
// after the other; response bodies are capped; webhook deliveries are refused
// unless their X-Hub-Signature-256 matches the secret.
package github
