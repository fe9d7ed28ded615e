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
package githubactions
