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
//   - Close stops pending timers, cancels in-flight reports and waits for
//     them: no goroutine outlives it.
package testrunner
