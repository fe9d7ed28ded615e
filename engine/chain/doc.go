// Package chain is the release chain: desired-release →
// job-dispatch → job-verification-metric (job-eligibility is still
// registered for items enqueued by older versions; job-dispatch runs the job
// gates itself), one stateless controller per kind, the three target-scoped
// ones batched (`runBatch`), plus `SyncTargets`, `CreateVersion`, `Approve`,
// `ForceDeploy`, `Explain` and `ReportJob` (agents' reports)
//
// Invariants: The policies evaluated are the latest published revision of
// each catalog policy, never a draft or proposed one; a release keeps the
// policy revisions of the decision that created it, and `Explain` names them
// beside those applying now; every pass re-reads through the release store's
// ports (one `TargetFactsGet` per target; a batch pass reads its targets'
// facts in one `TargetFactsGetMany` and a deployment's first page of
// versions once, each target's facts taken by its first read only) and
// recomputes; handoff only by enqueueing (insert-then-lease); a batch pass
// runs its items in target-key order in one store transaction
// (`ports.Transactor`; the PostgreSQL queue joins it) together with their
// follow-up enqueues, so a batch commits once; a batch pass's decisions and
// their releases are written in one store call when the store is a
// `ports.DesiredBatcher` (the PostgreSQL store: one statement; the
// conformance suite checks it writes what `ReleaseUpsert` then `DesiredSet`
// would, write by write); a batch pass's uncapped job creates are made in
// one `JobCreateMany` call once its items have run (the PostgreSQL store:
// one `INSERT … SELECT FROM unnest(…)`; the conformance suite checks it
// creates what `JobCreate` would, create by create), each item's pass then
// going on with its job; a capped create is made at once, alone, under the
// store's per-environment lock; when an item fails the transaction rolls
// back and each item runs again alone; jobs are handed to agents only after
// the transaction that created them committed, and the agents' answers of a
// batch are recorded in one more transaction (compare-and-swap each, written
// together by `JobUpdateMany`); releases are content-addressed; a target
// whose newest job is not of its desired release gets a job for it whatever
// ran before (a job is created once per (release, run, attempt) key, a run
// being the release's consecutive jobs at the head of the target's history,
// and retries count within the run) and is dispatched once per job id (a
// `JobLeaser`'s job is claimed, its start time written, before it is sent
// and never sent again; it holds the agent's lease (`LeaseUntil`, from the
// agent's acceptance, renewed by its non-terminal reports, and its owner,
// the process's liveness name): if its process dies (its liveness row
// lapses, or, without one, the lease runs out) the target's job-dispatch
// pass ends the job as lost, with no job timeout needed, unless its agent is a `JobResumer`
// (an external run: `reclaim`): then the pass claims it anew, its lease
// renewed by a CAS write in the pass's transaction so one process wins, and
// after the commit hands it to `ResumeJob`, recording what the run did
// meanwhile (a job past its deployment's timeout times out instead); a pull
// agent's job whose taker's lease ran out is left for its next taker until
// its last hand-out's did, and a report naming a hand-out other than the
// job's is refused, `ErrConflict`); a job created but never handed over for
// a release no longer desired is cancelled; a paused version stays on the
// targets already running it and reaches no other; the rollback rule never
// returns to a version that is no longer a candidate (rejected); once no
// event is pending, every target's newest successful job is for its desired
// release (`TestConvergenceProperty`); `Explain` reports a target converged
// only while its newest job is a successful job of its desired release whose
// verification is neither running nor failed; job creation for a target is
// serialized by its per-target work key and re-checks the job gates; a
// per-environment cap is enforced atomically by the store at job creation
// (`MaxActiveInEnvironment`), so targets racing in one environment never
// exceed it; a force-deployed version skips version gates but never job
// gates; a version whose job triggered a rollback rule is never chosen again
// for that target; a job still active past its deployment's
// `job_timeout_seconds` is ended as a failure by the target's job-dispatch
// pass (requeued for the deadline) and its agent's `JobCanceler` is asked to
// stop it, so a job whose agent died cannot hold its target; a deployment
// with a `workflow_template` routes its jobs to the `workflow` agent;
// `ResyncSource` puts every target's desired-release and job-dispatch items
// and each running verification in the periodic sweep; `CreateVersion` and
// `Approve` validate their input before any lookup, so no error quotes a raw
// id (a version's deployment and tag are checked before its id, often
// derived from them); an ended job wakes its target and, through one
// `environment-wake` item each, only the environments whose progression
// rules may read its own (`policy.Downstream`)
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
// An environment-progression rule reads, for each candidate version and
// upstream environment, how the newest terminal job of the version ended
// on the deployment's targets there: the chain reads the store's summary
// of it (ports.ReleaseStore.ProgressionSummary, kept in each job's own
// write: O(1) rows whatever the environment's size) once per (deployment,
// environment, version) and batch, and only for targets a progression
// rule applies to. A job that ends wakes only the environments whose
// progression rules may read its own (policy.Downstream), and only when
// its environment's summary for the job's version may now let a target
// through (policy.ProgressionMayPass: under a 100% rule, only the job that
// completes the environment), through one environment-wake item each,
// which the jobs ending meanwhile share. The jobs that end in one batch
// decide it once per environment, after the batch's job writes. The wake's
// targets run at ProgressionPriority, ahead of new versions' items, and
// their hand-off to job-dispatch keeps it (ports.Lease.Priority): a
// rollout in flight finishes before the next one starts.
//
// # Rollout positions across batches
//
// A gradual rollout positions a target among its deployment's targets in
// its environment. The Chain keeps each such scope's list with the
// rollout order over it (policy.RolloutOrder) across batches, in a cache
// bounded at 250,000 targets (least recently used scopes go first): a
// batch asks the store once per scope whether the list's generation
// changed (ports.Targets.ScopeTargets, bumped in the same statement as any
// insert or delete of the scope's targets) and reads the list only when it
// did, so a rollout reads each list once per change, not once per batch.
//
// # What a process keeps between passes
//
// A pass takes up to BatchSize targets in one transaction. Beyond the
// rollout's lists above, a process keeps only what the store can tell is
// current, and another process simply misses it: the facts a
// desired-release pass decided on, for the job-dispatch pass it hands off
// to (at most 16,384 targets), used only while their stamp
// (ports.TargetFactsReader.TargetStampMany, read for the batch in one
// statement) is still the store's. A policy document is decoded once per
// content (ports.PolicyOf, whose memo holds the same bytes' decoding).
// Within one batch, the pass's job states are read in one call, selector matches are kept per subject ids
// (policy.MatchMemo, only over facts read in one statement), and the jobs
// that ended decide their downstream wakes once per environment.
package chain
