package reconcile

import "time"

// Backoff parameters for failed reads: 30 s × 2^min(attempts, 6), plus up to
// 10% jitter derived from the snapshot's seed.
const (
	BackoffBase     = 30 * time.Second
	BackoffMaxShift = 6
)

// BackoffDelay is the delay before the next pass after a failed read, given
// the attempts so far. It is deterministic in (attempts, seed).
func BackoffDelay(attempts int, seed uint64) time.Duration {
	if attempts < 0 {
		attempts = 0
	}
	d := BackoffBase << min(attempts, BackoffMaxShift)
	jitter := time.Duration(mix(seed^uint64(attempts)) % uint64(d/10+1))
	return d + jitter
}

// RetryDelay is the exponential delay before retry n (0-based) with the
// given base, capped at limit.
func RetryDelay(n int, base, limit time.Duration) time.Duration {
	if n < 0 {
		n = 0
	}
	d := base << min(n, 30)
	if d <= 0 || d > limit {
		return limit
	}
	return d
}

// mix is SplitMix64's finaliser: a cheap, well-distributed hash of the seed.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
