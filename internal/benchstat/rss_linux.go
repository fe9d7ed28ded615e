//go:build linux

package benchstat

import "syscall"

// MaxRSSMB is the process's peak resident set size in MiB (getrusage
// ru_maxrss, which Linux gives in KiB); 0 when it cannot be read.
func MaxRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return round(float64(ru.Maxrss) / 1024)
}
