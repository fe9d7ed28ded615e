package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestSoak loops the kill tests for the duration in RECONCILER_SOAK
// (`make soak SOAK=10m`), each run with a random kill timing, and prints
// one summary line. Runs rotate through the worker kill (20,000 queue
// items), the workflow kill (61 TaskRuns) and the rollout kill (1,000
// release targets); items counts queue items and jobs sent. Every run
// asserts its own recovery, and the line sums what they saw: lost (items
// never completed, TaskRuns not succeeded, targets without exactly one
// successful job), duplicated (items run twice without a lease expiry,
// job ids sent twice) and re-run (items run again after their lease
// expired, which is allowed).
func TestSoak(t *testing.T) {
	spec := os.Getenv("RECONCILER_SOAK")
	if spec == "" {
		t.Skip("soak: set RECONCILER_SOAK to a duration (make soak SOAK=10m)")
	}
	d, err := time.ParseDuration(spec)
	if err != nil {
		t.Fatalf("RECONCILER_SOAK=%q: not a duration: %v", spec, err)
	}
	var runs, kills, items, lost, duplicated, reRun int
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		delay := time.Duration(rand.Int64N(int64(3 * time.Second)))
		runs++
		switch i % 3 {
		case 0:
			var r killResult
			t.Run(fmt.Sprintf("worker-%d", i), func(t *testing.T) { killWorkers(t, 20000, delay, &r) })
			kills++
			items, lost, duplicated, reRun = items+r.items, lost+r.lost, duplicated+r.duplicated, reRun+r.dups
		case 1:
			var r workflowKill
			t.Run(fmt.Sprintf("workflow-%d", i), func(t *testing.T) { killWorkflow(t, delay, &r) })
			kills++
			items, lost, duplicated = items+r.jobs, lost+r.lost, duplicated+r.duplicated
		default:
			var r rolloutKill
			// Killed after a random share (up to 80%) of the jobs were
			// accepted: a delay in seconds may outlast the rollout.
			at := 0.8 * float64(delay) / float64(3*time.Second)
			t.Run(fmt.Sprintf("rollout-%d", i), func(t *testing.T) { killRollout(t, 1000, at, &r) })
			kills++
			items, lost, duplicated = items+r.jobs, lost+r.lost, duplicated+r.duplicated
		}
	}
	fmt.Printf("soak: duration=%s runs=%d kills=%d items=%d lost=%d duplicated=%d re-run-after-lease-expiry=%d\n",
		d, runs, kills, items, lost, duplicated, reRun)
}
