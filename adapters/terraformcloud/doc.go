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
package terraformcloud
