// Package workflow is the pure core of multi-step workflows: WorkflowTemplate
// documents (names follow Argo Workflows), their validation, parameter and
// matrix resolution, {{ }} interpolation, and Schedule, the function that
// decides what a workflow does next.
//
// # Templates
//
// Parse decodes YAML or JSON strictly: every unknown field and wrong type is
// recorded with its path (spec.tasks[2].matrixStrategy.maxParalel) and line;
// Validate reports those together with every semantic problem at once; Load
// does both. Resolve picks the template a deployment sees (deployment, then
// system, then workspace scope).
//
// # Parameters, matrices and references
//
// ResolveParameters picks each value parameter from explicit values, version
// config, deployment variables, then the template default, and type- and
// enum-checks it. ExpandMatrix turns a matrix parameter's source into items
// (a TaskRun's matrixItem): a selected candidate wrapped under its kind
// ({resource: {...}}), a list source's values as listed. In a matrix task,
// an object item's own fields are matrix.<field> (matrix.resource.name),
// the whole item is matrix.item (the only way to read a scalar item), and
// matrix.index, length, isFirst and isLast win over item fields of the same
// name; validation checks a path into a list source's items against every
// item.
// Task config, the type's block and `when` may reference workflow.*,
// release.*, variables.*, matrix.* and tasks.NAME.outputs.* (ancestors only)
// by dotted path or CEL inside {{ }}. A string that is exactly one reference
// keeps the value's type; a missing path is an error naming it.
//
// # Triggers
//
// Besides a user (workflow run) and a release (a deployment's
// workflow_template), a template can start itself:
//   - spec.hooks: on an event of the release chain (EventType:
//     release.created, job.failed, verification.failed, release.failed,
//     resource.created, resource.updated, resource.deleted), when its filter, a
//     CEL expression over `event` that must type-check as bool (event.x ==
//     "y", not a bare event.x), holds. The event carries type, id, at,
//     release {id, target}, deployment, environment, resource and version
//     (the stored objects), job {id, status, message, agentId, externalId}
//     for job events and verification {status, metrics} for
//     verification.failed; a resource event carries the resource as it is
//     when the event is handled ({id} alone once deleted). Hook parameters map value parameters to values
//     reading {{event.<path>}}; the event's release is the workflow's
//     release.*. An event starts at most one workflow of a template, from
//     its first matching hook (HookMatches, HookParameters).
//   - spec.schedule: a cron schedule (ParseCron: five fields or a macro) in
//     spec.timezone (an IANA zone, default UTC; the zone database is built
//     in), with spec.concurrencyPolicy allow, forbid or replace and an
//     optional spec.startingDeadlineSeconds, as Argo's CronWorkflow. Cron.Next
//     and Cron.Last are pure (the time is passed in); across a clock change a
//     skipped wall time fires once at the end of the gap and a repeated one
//     once, at its first occurrence.
//
// Validate refuses an unknown event, a filter that does not compile or is
// not boolean (with the CEL line and column), a hook parameter that names
// no value parameter or reads anything but event.*, a bad schedule or
// timezone, an unknown policy, and schedule fields without a schedule.
//
// # Scheduling rules
//
// Schedule(in) reads only its input and returns actions; it keeps no memory,
// so every pass recomputes from stored TaskRuns:
//   - A task (or matrix item) gets its TaskRun once all its dependencies are
//     final. Two tasks fanning out over the same matrix parameter pair up:
//     item i waits only for item i of its dependency.
//   - A run is born Skipped when `when` is false (its dependents still run,
//     as in Argo), Failed when a dependency failed or its config cannot be
//     resolved, Cancelled when a dependency was cancelled or fail-fast has
//     tripped, and Pending otherwise.
//   - Pending runs are dispatched in index order, at most maxParallel of a
//     task running at once, not before their retry backoff has passed.
//   - A failed attempt is retried (RetryTaskRun) while retryStrategy.limit
//     allows: backoff duration*factor^n, capped by cap, and never past
//     maxDuration after the first start. A run that exceeds its timeout is
//     failed. Wait tasks are completed by the scheduler itself.
//   - failFast: once a dispatched item of a task has failed for good, its
//     pending items are cancelled, no new item starts and failed items get
//     no more attempts; running items finish.
//   - Cancellation cancels pending and running runs and creates nothing.
//   - The workflow completes, in a pass that has nothing else to do,
//     Succeeded when every run is final and none failed or was cancelled,
//     Failed otherwise, Cancelled when cancellation was requested.
//   - WakeAt names the earliest moment a pass would decide differently
//     without outside news (a wait, a backoff, a timeout).
//
// # Invariants
//
//   - No I/O, no clock (Now is an input), no randomness; equal inputs give
//     equal outputs, in a deterministic order.
//   - At most one action per TaskRun per pass, and every action is an edge
//     of TaskRunEdges or WorkflowEdges.
//   - Secrets (SecretValue) reach only the DispatchConfig copy; the stored
//     Config, messages and String/JSON renderings show Redacted.
//   - A pass costs time linear in the number of TaskRuns and allocations
//     proportional to the new work (one slot array per pass).
package workflow
