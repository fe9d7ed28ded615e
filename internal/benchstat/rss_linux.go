//go:build linux

package benchstat

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// MaxRSSMB is the process's peak resident set size in MiB (getrusage
// ru_maxrss, which Linux gives in KiB); 0 when it cannot be read.
func MaxRSSMB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return round(float64(ru.Maxrss) / 1024)
}

// PeakRSSMBOf is the peak resident set size in MiB of the running process
// pid (VmHWM of /proc/PID/status); 0 when it cannot be read. Unlike the
// ru_maxrss a parent reads when its child exits, it does not count the
// parent's memory the child shared before its exec.
func PeakRSSMBOf(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				return 0
			}
			return round(kb / 1024)
		}
	}
	return 0
}
