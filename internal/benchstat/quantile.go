package benchstat

import "time"

// Quantile is the q-quantile (0 ≤ q ≤ 1) of sorted, ascending durations:
// the element at index q × len, the last for q = 1; 0 when there is none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
