// Package argocd is the "argo-cd" job agent: it runs a job as an Argo CD
// sync of one Application through Argo CD's REST API. Dispatch reads the
// Application, sets its target revision, Helm parameters and destination
// namespace from the job config when they differ (a JSON merge patch),
// and starts a sync whose operation carries the job's correlation key as
// an info item ("reconciler-job"). The follower polls the Application:
// the job is in progress while the operation runs or the app is not yet
// healthy, successful once the operation succeeded and the app is Synced
// and Healthy, failed when the operation failed or the app is Degraded.
// CancelJob terminates the running operation when it is the job's.
//
// A dispatch retried after a crash finds its operation by the
// correlation key (in the current operation or the last operation state)
// and follows it instead of syncing again.
//
// Credentials come only from the SecretResolver (tokenRef), per request.
//
// Invariants: Dispatch finds the run it already started by the job's
// correlation key before starting one; their followers hold a lease on each
// job (`--lock`, renewed every third of it), and a job whose lease ran out
// (its process died) is resumed by whichever `serve` claims it
// (`JobResumer`): followed by its recorded external id, never started again,
// or by the key when none was recorded (passes `porttest.JobAgent`'s resume
// cases: a new agent, one external run, one outcome); bad config or an
// unreadable credential ends the job `invalidJobAgent` naming the field;
// credentials only through `SecretResolver`, per request; reports only along
// `JobEdges`, one terminal
package argocd
