//go:build !linux

package benchstat

import (
	"context"
	"time"
)

// MaxRSSMB is the process's peak resident set size in MiB; it is read on
// Linux only and is 0 elsewhere.
func MaxRSSMB() float64 { return 0 }

// PeakRSSMBOf is the peak resident set size in MiB of process pid; it is
// read on Linux only and is 0 elsewhere.
func PeakRSSMBOf(pid int) float64 { return 0 }

// ProcessCPU is the CPU time of this process; it is read on Linux only and
// is 0 elsewhere.
func ProcessCPU() time.Duration { return 0 }

// ServerCPU is the CPU time of the PostgreSQL cluster q is connected to;
// it is read on Linux only, so ok is always false here.
func ServerCPU(ctx context.Context, q Querier) (d time.Duration, ok bool) { return 0, false }
