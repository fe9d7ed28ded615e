// Package chain is the release chain: the controllers that move a release
// target from "a version exists" to "a job ran and was verified" (Chain).
//
// # Lost means the owner is gone
//
// A job run by an in-process agent (ports.JobLeaser, the test runner) is
// claimed before it is sent, recording the process that runs it
// (release.Job.LeaseOwner, the process's name in ports.Liveness) and a
// lease its agent renews. Every serve process keeps its own liveness row
// (engine.KeepAlive, every third of --lock, on connections of its own), so
// whether a job is lost is a question about its owner, not about how late
// a renewal was:
//
//   - while the owner's row is alive, the job is never ended as lost,
//     however late its lease renewals (a live process that is slow keeps
//     its jobs; only the deployment's job timeout ends them);
//   - once the owner's row lapsed (it stopped beating for a whole --lock),
//     the job is ended as lost at once, without waiting for its lease;
//   - an owner with no row (it never beat, or stopped cleanly and removed
//     it) is judged by the job's lease alone.
//
// Why a late report for a job ended as lost by mistake cannot happen: the
// only process that can report such a job is its owner, since an
// in-process agent reports only the jobs it was sent, and a job is sent by
// the process that claimed it. The job is ended as lost only after its
// owner's row lapsed, and the row lapses only when the owner made no beat
// for a whole --lock: its owner is dead (a restarted process beats under
// a new name, with a random suffix), or was frozen for longer than the
// lease, the one case in which its report, still fenced by the job row's
// compare-and-swap, is refused rather than applied twice. A live owner's
// report is never refused for a loss, because its jobs are never lost.
//
// # Progression in linear time
//
// An environment-progression rule reads, for each candidate version, the
// newest terminal job of every target of the deployment: the chain reads
// it once per (deployment, version) and batch (one JobsLatest statement),
// and only for targets a progression rule applies to. A job that ends
// wakes only the environments whose progression rules may read its own
// (policy.Downstream), through one environment-wake item each, which the
// jobs ending meanwhile share.
package chain
