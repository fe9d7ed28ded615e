//go:build !linux

package benchstat

// MaxRSSMB is the process's peak resident set size in MiB; it is read on
// Linux only and is 0 elsewhere.
func MaxRSSMB() float64 { return 0 }

// PeakRSSMBOf is the peak resident set size in MiB of process pid; it is
// read on Linux only and is 0 elsewhere.
func PeakRSSMBOf(pid int) float64 { return 0 }
