// Package terraformcloud is the "terraform-cloud" job agent and
// verification provider, over the HCP Terraform / Terraform Enterprise
// API v2 (JSON:API, Bearer token).
//
// The agent creates a run on a workspace with run variables (POST
// /api/v2/runs), its message carrying the job's correlation key; a
// dispatch retried after a crash lists the workspace's recent runs and
// follows the one with the key instead of creating another. It follows
// the run (GET /api/v2/runs/ID) and maps its status; CancelJob discards a
// run waiting for confirmation and cancels one planning or applying.
//
// The verifier measures a run's status: the run named by the metric's
// runId, or else the job's external id (the run its terraform-cloud job
// created).
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
package terraformcloud
