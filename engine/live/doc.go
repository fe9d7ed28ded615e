// Package live makes every write of the release chain's objects enqueue
// exactly the work it can change, in the same transaction as the write
// (ports.Transactor), so the chain reaches the new desired state without
// waiting for the resync sweep:
//
//   - a policy (PolicyChanged, the catalog's hook for every write that
//     changes a policy's latest published revision: the API, a catalog
//     approve or propose-delete): desired-release of every target its
//     selector matched before or matches after, when enabled;
//   - a deployment, environment or resource: its targets are recomputed
//     (release.ComputeTargets over the objects it can pair with) and
//     desired-release is enqueued for every target it has now, new ones
//     included (the others read the changed object);
//   - a variable set: desired-release of the targets of its system whose
//     resolved variables differ with the set before and after;
//   - a version status change (SetVersionStatus): its deployment's
//     targets;
//   - a relationship rule, or a resource of a workspace that has one:
//     every target of a resource of the workspace (what reference
//     variables resolve to may change).
//
// A delete of a deployment, environment or resource enqueues nothing: the
// store refuses it while the object has targets. Writes that touch no
// target (workspaces, systems, job agents) enqueue nothing.
//
// Invariants: In the write's transaction (`ports.Transactor`): a policy →
// the targets its old or new selector matches (enabled); a deployment,
// environment or resource → its targets recomputed, every one it has now
// enqueued; a variable set → the targets whose resolved variables change; a
// version status → its deployment's targets; a relationship rule → the
// targets of its workspace's resources; a failed enqueue undoes the
// write
package live
