// Package process is the ports.AgentRuntime that runs each run's agent as a
// local OS process: the embedded default of `reconciler serve`.
//
// A launch starts the configured command in the run's own working
// directory (<WorkRoot>/<kind>/<id>), under a supervisor (Supervise: the
// reconciler binary itself, Config.Supervisor) in a session and process
// group of its own, with an environment built only from the configuration
// (plain values, and secrets resolved through ports.SecretResolver at the
// moment of starting: never stored, never logged) plus
// RECONCILER_RUN_KIND, RECONCILER_RUN_ID, RECONCILER_PURPOSE,
// RECONCILER_TRIGGER and RECONCILER_WORKDIR, and for a repo run
// RECONCILER_REPO and RECONCILER_BRANCH (reconciler/<id>, where it pushes
// its work), and TRACEPARENT, the W3C trace context of the pass that
// launched it, when serve traces (--otlp-endpoint). Its output goes to agent.log in that directory, not to the
// daemon's log. An Exit hook may add to an exit's observation (serve
// opens the pull request of a repo agent's branch there).
//
// Each launch has a state directory, <WorkRoot>/.state/<kind>/<id>/<hash
// of the key>: launch.json (run, key, start) written before the start,
// agent.json (the supervisor's and the agent's pids) and exit.json (the
// agent's exit code) written by the supervisor, which holds the
// directory's lock file locked (flock) while it lives. So agents outlive
// the runtime (a crashed or stopped daemon), and Start adopts them: a
// live one is observed as if launched here, its key counts as launched,
// and its end is read from exit.json once the lock is free (polled every
// Config.Poll); a supervisor killed before writing it reports the agent
// lost (pod error). A pid is signalled only while the lock shows its
// supervisor alive, so a pid the system reused is never signalled. A
// launch's state is removed once its exit was reported or it was let go.
//
// The runtime is the run's pod watcher: it writes what it observes through
// the run store (the pod phase with its Since, a heartbeat while the
// process lives, the exit code) and wakes the run at once after a phase
// change; the kernel's heartbeat staleness rule catches whatever is missed
// (a daemon that died with its agents). The start is written once the
// launch's own move has landed (the run is in a state where its agent
// runs), and the exit once the run is in its running state, so an
// observation never races the executor's compare-and-swap of the launch.
// An exit 0 also reports the kind's "done" fact: review_done for a review,
// turn_done for a persistent agent's turn (the turn's end counts its
// messages as read, so one sent during the turn starts the next); a
// review's also carries the review draft: ReviewFile (the agent's
// RECONCILER_REVIEW_FILE, at most MaxReview bytes, cut saying so) and the
// verdict in ReviewEventFile.
//
// Invariants: one process per run (a new launch stops the previous
// attempt's first); launches and releases are idempotent by key (a bounded
// record of keys, Config.Keys, besides each run's current key, which its
// state directory keeps across restarts); a release sends SIGTERM to the
// process group and SIGKILL after the grace period, to adopted agents
// too; only the current attempt of a run writes observations; Close stops
// observing and leaves the agents to the next runtime.
package process
