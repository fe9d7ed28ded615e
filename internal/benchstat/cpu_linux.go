//go:build linux

package benchstat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100
// on every Linux the kernel's ABI allows).
const clockTick = 10 * time.Millisecond

// ProcessCPU is the CPU time (user and system) of this process and of its
// children that have ended and been waited for.
func ProcessCPU() time.Duration {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// ServerCPU is the CPU time of the PostgreSQL cluster q is connected to:
// its postmaster, the postmaster's children still running (backends,
// background workers) and the children it has ended and waited for, from
// /proc. It works only when the server runs on this host and this process
// may read its data directory's postmaster.pid; ok is false otherwise.
func ServerCPU(ctx context.Context, q Querier) (d time.Duration, ok bool) {
	var dir string
	if err := q.QueryRow(ctx, `SHOW data_directory`).Scan(&dir); err != nil {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, false
	}
	own, err := procTicks(pid, true)
	if err != nil {
		return 0, false
	}
	ticks := own
	for _, c := range procChildren(pid) {
		t, err := procTicks(c, false)
		if err == nil { // a child that ended meanwhile is counted by its parent
			ticks += t
		}
	}
	return time.Duration(ticks) * clockTick, true
}

// procTicks reads utime and stime of process pid from /proc/PID/stat and,
// with reaped, cutime and cstime too (its children waited for).
func procTicks(pid int, reaped bool) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after its closing one, from field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	last := 15 // stime is field 15, f[12]; cstime is field 17, f[14]
	if reaped {
		last = 17
	}
	if len(f) < last-2 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var sum int64
	for k := 14; k <= last; k++ {
		v, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, k, err)
		}
		sum += v
	}
	return sum, nil
}

// procChildren lists the running children of process pid.
func procChildren(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}
