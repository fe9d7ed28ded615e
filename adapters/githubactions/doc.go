// Package githubactions is the "github-actions" job agent: it runs a job
// as a GitHub Actions workflow_dispatch of a workflow file, follows the
// run by polling with a doubling backoff, maps the run's status and
// conclusion to the job statuses (with the run id as external id and its
// URL in the outputs), and cancels the run on CancelJob.
//
// Idempotency: every dispatch passes the job's correlation key
// (jobfollow.CorrelationKey of the job id) as the workflow input named by
// correlationInput (default "reconciler_job"); the workflow must declare
// that input and put it in its run-name, e.g.
//
//	run-name: deploy ${{ inputs.reconciler_job }}
//
// Before dispatching, the agent lists the workflow's recent
// workflow_dispatch runs and follows one whose title carries the key, so
// a dispatch retried after a crash finds the run it already started.
//
// WebhookHandler takes GitHub's workflow_run webhooks, verified by their
// X-Hub-Signature-256, and reports the run's status by (agent id, run id).
//
// Credentials come only from the SecretResolver (tokenRef), per request;
// they are never logged or stored.
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
package githubactions
