// Package testrunner is the built-in "test-runner" job agent: it runs no
// real work, and reports a configured outcome after a configured delay, so
// release chains, policies and scenarios can be exercised without an
// external system.
//
// A job's behaviour comes from its merged JobAgentConfig:
//
//	delay    Go duration string ("2s"); default "1s"; must not be negative
//	outcome  terminal status the job reaches from inProgress: "successful"
//	         (default), "failure", "cancelled" or "externalRunNotFound"
//	message  optional message carried by the report
//
// Invariants:
//   - Dispatch is idempotent by Job.ID: a second dispatch of a job returns
//     the first result and schedules nothing. A dispatch that failed (bad
//     config, cancelled context, closed agent) records nothing, so a retry
//     may succeed.
//   - Dispatch never reports: the outcome is reported from a timer
//     goroutine, even for a zero delay, and never while a lock is held.
//   - Each accepted job gets at most one report (JobID, AgentID and
//     ExternalID set, At read from the injected clock). A failed report is
//     retried a few times with a doubling backoff, then dropped with a log
//     line; nothing panics.
//   - With WithLease(d) it is a ports.JobLeaser: every pending job's lease
//     is renewed every d/3 by an inProgress report with Lease d, until its
//     outcome is reported or it is cancelled. The jobs run in the process,
//     so they die with it; their leases then run out, and that is how the
//     workflow controller notices.
//   - Every accepted job is logged (testrunner.accepted, with its id).
//   - Close stops pending timers, cancels in-flight reports and waits for
//     them: no goroutine outlives it.
package testrunner
