package outbound

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The one classification of vendors' answers the agents share. A refusal
// that will not change (a 4xx other than 408, 425 and 429, and other than a
// rate-limited 403 or a status the call documents as transient) ends the
// job invalid with the vendor's message; 429, a rate-limited 403 and 5xx
// back off, honouring Retry-After, x-ratelimit-reset (GitHub: epoch
// seconds) and X-RateLimit-Reset (Datadog: seconds to wait).

// Refusal reports whether status is a refusal that will not change: a 4xx
// other than 408 Request Timeout, 425 Too Early, 429 Too Many Requests, a
// rate-limited 403 (RateLimited) and the statuses transient lists (those
// the vendor documents as transient for the call, such as Argo CD's 409
// while another operation runs).
func Refusal(status int, h http.Header, transient ...int) bool {
	if status < 400 || status > 499 {
		return false
	}
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	for _, s := range transient {
		if s == status {
			return false
		}
	}
	return !RateLimited(status, h)
}

// RateLimited reports whether an answer says the caller is rate limited:
// 429, or a 403 with x-ratelimit-remaining 0 (GitHub's primary limit) or
// with Retry-After (its secondary limit).
func RateLimited(status int, h http.Header) bool {
	if status == http.StatusTooManyRequests {
		return true
	}
	return status == http.StatusForbidden && h != nil &&
		(strings.TrimSpace(h.Get("X-RateLimit-Remaining")) == "0" || h.Get("Retry-After") != "")
}

// resetEpoch tells an epoch-seconds reset (GitHub's x-ratelimit-reset)
// from a seconds-to-wait one (Datadog's X-RateLimit-Reset): no wait is
// this long.
const resetEpoch = 1_000_000_000

// RetryWait is the wait an answer asks for before the next attempt:
// Retry-After (seconds or an HTTP date), else X-RateLimit-Reset read as
// epoch seconds (GitHub) or as seconds to wait (Datadog), whichever its
// size says; 0 when none is given or readable.
func RetryWait(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if d := retryAfter(h.Get("Retry-After"), now); d > 0 {
		return d
	}
	n, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64)
	switch {
	case err != nil || n <= 0:
		return 0
	case n >= resetEpoch:
		return max(time.Unix(n, 0).Sub(now), 0)
	default:
		return time.Duration(n) * time.Second
	}
}

// IsRefusal reports whether err carries an *Error the vendor answered
// with a refusal that will not change (Refusal, as DoJSON classified it),
// or one the outbound guard refused to connect (GuardRefusal): retrying
// the call is pointless, the job ends invalid with Message.
func IsRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Refused
}

// Message is the vendor's part of err's *Error: the status and the start
// of the answer's body, for a job's message; err's text when it carries
// none.
func Message(err error) string {
	var e *Error
	if !errors.As(err, &e) || e.Status == 0 {
		return err.Error()
	}
	msg := e.Call + ": " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}
