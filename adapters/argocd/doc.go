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
package argocd
