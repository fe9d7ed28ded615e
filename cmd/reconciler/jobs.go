package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func newJobsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Take, report on and cancel jobs (through the API), as an agent or an operator",
		Args:  argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("jobs: want a subcommand (list, next, heartbeat, report, cancel)")
		},
	}
	var o releaseOpts
	var rep api.JobReport
	var status, secretEnv, reportAgent string
	var handOut int
	var outputs, links []string
	report := &cobra.Command{
		Use:   "report JOB --status STATUS",
		Short: "Report a job's status as its agent would (token scope agent, or signed)",
		Long: `report sends an agent's report on JOB: its status (pending, queued, inProgress,
actionRequired, successful, failure, cancelled, skipped, ...), a message, the
agent's own run id (--external-id), outputs (--output-value NAME=VALUE, read
by later workflow tasks) and links for people (--link NAME=URL, http or https;
added to the job's, shown by get job). With --sign-secret-env VAR it signs the report with
the secret in $VAR (the job agent's report_secret) instead of sending a
token. A status the job cannot move to is refused (exit 2). A pull agent's
taker reports with --agent ID --hand-out N (the hand-out it took the job
under, from jobs next) and the take's take_token in $RECONCILER_TAKE_TOKEN:
refused (exit 3) once the job was handed out again.`,
		Example: `  reconciler jobs report 8c458dd92cf2a587-1 --status successful --message deployed --server http://127.0.0.1:8080
  RECONCILER_AGENT_SECRET=... reconciler jobs report JOB --status failure --sign-secret-env RECONCILER_AGENT_SECRET --server URL`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			rep.Status = release.JobStatus(status)
			if !rep.Status.Valid() {
				return usagef("--status %q: unknown job status", status)
			}
			vals, err := parseParams(outputs)
			if err != nil {
				return usagef("--output-value: %v", err)
			}
			if len(vals) > 0 {
				rep.Outputs = vals
			}
			for _, l := range links {
				name, u, ok := strings.Cut(l, "=")
				if !ok || name == "" {
					return usagef("--link %q: want NAME=URL", l)
				}
				if rep.Links == nil {
					rep.Links = map[string]string{}
				}
				rep.Links[name] = u
			}
			switch {
			case handOut > 0 && reportAgent == "":
				return usagef("--hand-out needs --agent, the pull agent that took the job")
			case reportAgent != "" && handOut == 0:
				return usagef("--agent needs --hand-out, the hand-out the job was taken under")
			case handOut > 0 && secretEnv != "":
				return usagef("--hand-out: a taker's report goes with a token, not --sign-secret-env")
			}
			if handOut > 0 {
				tok, terr := takeToken()
				if terr != nil {
					return terr
				}
				err = c.ReportTakenJob(ctx, reportAgent, args[0], api.TakerReport{HandOut: handOut, TakeToken: tok, JobReport: rep})
			} else if secretEnv != "" {
				secret := os.Getenv(secretEnv)
				if secret == "" {
					return usagef("--sign-secret-env: $%s is empty", secretEnv)
				}
				err = c.ReportJobSigned(ctx, args[0], rep, secret, time.Now())
			} else {
				err = c.ReportJob(ctx, args[0], rep)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "reported job %s %s\n", args[0], rep.Status)
			return nil
		}),
	}
	o.bind(report, false)
	f := report.Flags()
	f.StringVar(&status, "status", "", "the job's status (required)")
	f.StringVar(&rep.Message, "message", "", "a message for people")
	f.StringVar(&rep.ExternalID, "external-id", "", "the agent's id of the run")
	f.StringArrayVar(&outputs, "output-value", nil, "NAME=VALUE the job produced (JSON values are parsed); repeat for several")
	f.StringArrayVar(&links, "link", nil, "NAME=URL, a link for people (http or https); repeat for several")
	f.StringVar(&secretEnv, "sign-secret-env", "", "sign with the secret in this environment variable instead of a token")
	f.StringVar(&reportAgent, "agent", "", "the pull agent that took the job (with --hand-out)")
	intRangeVar(f, &handOut, "hand-out", 0, 0, release.MaxHandOutsLimit, "report as the taker of this hand-out of the job (with --agent; 0: not as a taker)")

	var co releaseOpts
	cancel := &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel an active job: its agent is asked to stop it and it ends cancelled (token scope write)",
		Long: "Cancel an active job: its agent is asked to stop it and it ends cancelled (token scope write).\n\n" +
			"A workflow task's job (id wf/WORKFLOW/TASKRUN/ATTEMPT) ends its TaskRun Cancelled without a retry; the workflow is not " +
			"cancelled: its failure policy decides (the task's dependents are cancelled, other branches run on, and the workflow ends Failed).",
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&co, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			if err := c.CancelJob(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "cancelled job %s\n", args[0])
			return nil
		}),
	}
	co.bind(cancel, false)
	cmd.AddCommand(newJobsListCmd("list"), newJobsNextCmd(), newJobsHeartbeatCmd(), report, cancel)
	return cmd
}

// newJobsListCmd is `jobs list` (and `get jobs`): the release chain's jobs
// and workflow tasks' on pull agents, filtered, newest first, a page at a
// time.
func newJobsListCmd(use string) *cobra.Command {
	var o releaseOpts
	var f api.JobFilter
	var page client.Page
	var w watch
	cmd := &cobra.Command{
		Use:   use,
		Short: "List jobs across targets, the release chain's and workflow tasks' on pull agents, newest first (through the API)",
		Long: `Lists jobs newest first (token scope read): the release chain's, and those
of workflow tasks on pull agents (column WORKFLOW: WORKFLOW_ID/TASK; their
TARGET and VERSION are set when the workflow runs a release). It keeps those
that match every filter given: --status (one or more, comma-separated or
repeated), --job-agent, --deployment, --environment, --resource, --version,
--workspace, or --target DEPLOYMENT:ENVIRONMENT:RESOURCE. A page holds --limit jobs; the cursor of the
next one is printed on standard error (pass it as --cursor). -o table
(default), json or yaml. --watch then prints each job created or whose status
changed, as it happens, keeping those of --workspace, --deployment,
--environment, --resource, --target and --status.`,
		Example: `  reconciler jobs list --status pending,inProgress --job-agent ext --server http://127.0.0.1:8080
  reconciler jobs list --deployment web --environment prod -o json
  reconciler get jobs --watch --workspace acme`,
		Args: argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			for _, st := range f.Status {
				if !release.JobStatus(st).Valid() {
					return usagef("--status %q: unknown job status", st)
				}
			}
			if f.Target != "" {
				if _, err := release.ParseTargetKey(f.Target); err != nil {
					return usagef("--target: %v", err)
				}
			}
			w.workspace, w.keep = f.WorkspaceID, jobsKeep(&f)
			watched := w.start(cmd, ctx, c)
			p, err := c.ListJobs(ctx, f, page)
			if err != nil {
				return err
			}
			if err := show(cmd, o.output, p, jobsHeader, func() [][]string { return jobRows(p.Items) }); err != nil {
				return err
			}
			nextPage(cmd, p.NextCursor)
			return watched(o.output)
		}),
	}
	o.bind(cmd, true)
	w.bind(cmd, ports.ChangeJobCreated, ports.ChangeJobStatus)
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Status, "status", nil, "only jobs in one of these statuses")
	fl.StringVar(&f.JobAgentID, "job-agent", "", "only this job agent's jobs")
	fl.StringVar(&f.DeploymentID, "deployment", "", "only this deployment's")
	fl.StringVar(&f.Environment, "environment", "", "only this environment's")
	fl.StringVar(&f.ResourceID, "resource", "", "only this resource's")
	fl.StringVar(&f.VersionID, "version", "", "only jobs of this deployment version")
	fl.StringVar(&f.WorkspaceID, "workspace", "", "only jobs of this workspace's deployments")
	fl.StringVar(&f.Target, "target", "", "only this release target's (DEPLOYMENT:ENVIRONMENT:RESOURCE)")
	intRangeVar(fl, &page.Limit, "limit", 100, 1, 1000, "most jobs")
	fl.StringVar(&page.Cursor, "cursor", "", "continue a list where the previous page ended")
	return cmd
}

func newJobsNextCmd() *cobra.Command {
	var o releaseOpts
	var agent, taker string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "next --agent ID",
		Short: "Take the next job of a pull agent, waiting for one (token scope agent)",
		Long: `next takes the next job of pull agent ID (type pull): the oldest pending job,
or one whose taker stopped heartbeating, leased to the caller for the agent's
lease. It waits up to --wait for one and prints it as JSON (the job with its
take: hand_out and lease_until, and its release, version, deployment,
environment and resource; kind "workflow" for a workflow task's job, whose
job.workflow names its workflow, task and TaskRun, and which carries a
release and target only when the workflow runs a release); when none came it prints nothing and says so on
standard error. Renew the lease with jobs heartbeat before it runs out, and
report with jobs report --agent ID --hand-out N, both with the printed
take_token in $RECONCILER_TAKE_TOKEN.`,
		Example: `  reconciler jobs next --agent deployer --wait 30s --server http://127.0.0.1:8080`,
		Args:    argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			if agent == "" {
				return usagef("--agent is required: the pull agent's id")
			}
			if taker == "" {
				taker, _ = os.Hostname()
				if taker == "" {
					taker = "cli"
				}
			}
			t, ok, err := c.NextJob(ctx, agent, taker, wait)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "no job of agent %s came within %s\n", agent, wait)
				return nil
			}
			return writeJSON(cmd.OutOrStdout(), t)
		}),
	}
	o.bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the pull agent's id (required)")
	f.StringVar(&taker, "taker", "", "who takes the job, shown on it (default: the host name)")
	durationRangeVar(f, &wait, "wait", 30*time.Second, 0, api.MaxTakeWait, "how long to wait for a job")
	return cmd
}

func newJobsHeartbeatCmd() *cobra.Command {
	var o releaseOpts
	var agent string
	var handOut int
	cmd := &cobra.Command{
		Use:   "heartbeat JOB --agent ID --hand-out N",
		Short: "Renew a pull agent's lease on a job it took (token scope agent)",
		Long: `heartbeat renews the lease of hand-out N of JOB, which pull agent ID's taker
took with jobs next, to the agent's lease from now, and prints its new end.
The take's take_token is read from $RECONCILER_TAKE_TOKEN (kept out of the
command line). It is refused (exit 3) once the job was handed out again or
ended.`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			if agent == "" {
				return usagef("--agent is required: the pull agent's id")
			}
			if handOut == 0 {
				return usagef("--hand-out is required: the hand-out the job was taken under")
			}
			tok, err := takeToken()
			if err != nil {
				return err
			}
			hb, err := c.HeartbeatJob(ctx, agent, args[0], handOut, tok)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "job %s (hand-out %d) leased until %s\n", hb.JobID, hb.HandOut, hb.LeaseUntil.Format(time.RFC3339))
			return nil
		}),
	}
	o.bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the pull agent's id (required)")
	intRangeVar(f, &handOut, "hand-out", 0, 0, release.MaxHandOutsLimit, "the hand-out the job was taken under (required)")
	return cmd
}

// takeTokenEnv names the environment variable a taker's CLI calls read
// the take's take_token from (kept out of the process list).
const takeTokenEnv = "RECONCILER_TAKE_TOKEN"

// takeToken reads the take token from $RECONCILER_TAKE_TOKEN.
func takeToken() (string, error) {
	tok := os.Getenv(takeTokenEnv)
	if tok == "" {
		return "", usagef("$%s is required: the take_token jobs next printed", takeTokenEnv)
	}
	return tok, nil
}

func newDeadCmd() *cobra.Command {
	var o releaseOpts
	var kind string
	var limit int
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "List dead-lettered work items (through the API); `dead redrive` runs one again",
		Long: `dead lists the work items that exhausted their attempts or failed terminally,
oldest first, with their last error (token scope read), and the count of items
in each queue state on standard error.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			items, err := c.DeadWork(ctx, kind, limit)
			if err != nil {
				return err
			}
			stats, err := c.QueueStats(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "queue: %d pending, %d leased, %d dead\n", stats[ports.WorkPending], stats[ports.WorkLeased], stats[ports.WorkDead])
			return show(cmd, o.output, items, "KIND\tSCOPE\tID\tATTEMPTS\tLAST ERROR", func() [][]string {
				rows := make([][]string, 0, len(items))
				for _, it := range items {
					rows = append(rows, []string{it.Key.Kind, it.Key.ScopeType, it.Key.ScopeID, fmt.Sprint(it.Attempts), it.LastError})
				}
				return rows
			})
		}),
	}
	o.bind(cmd, true)
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind's")
	cmd.Flags().IntVar(&limit, "limit", 100, "most items (1-1000)")
	var ro releaseOpts
	redrive := &cobra.Command{
		Use:   "redrive KIND SCOPE_TYPE SCOPE_ID",
		Short: "Make a dead-lettered item pending again, due now (token scope admin)",
		Args:  argsUsage(cobra.ExactArgs(3)),
		RunE: clientCmd(&ro, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			for i, name := range []string{"KIND", "SCOPE_TYPE", "SCOPE_ID"} {
				if err := release.CheckControl(name, args[i]); err != nil {
					return usageError{err}
				}
			}
			if err := c.Redrive(ctx, ports.WorkKey{Kind: args[0], ScopeType: args[1], ScopeID: args[2]}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "redrove %s/%s/%s\n", args[0], args[1], args[2])
			return nil
		}),
	}
	ro.bind(redrive, false)
	cmd.AddCommand(redrive)
	return cmd
}

func newQueueCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Show the work queue's depth per kind (through the API)",
		Long: `queue lists each work kind with its pending, leased and dead items and the
age of its oldest pending item already due (how long it has waited for a
worker; "-" when none is due), by the server's clock (token scope read).`,
		Args: argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			kinds, err := c.QueueKinds(ctx)
			if err != nil {
				return err
			}
			return show(cmd, o.output, kinds, "KIND\tPENDING\tLEASED\tDEAD\tOLDEST", func() [][]string {
				rows := make([][]string, 0, len(kinds))
				for _, k := range kinds {
					age := "-"
					if !k.OldestDue.IsZero() {
						age = (time.Duration(k.OldestAgeSeconds * float64(time.Second))).Round(time.Second).String()
					}
					rows = append(rows, []string{k.Kind, fmt.Sprint(k.Pending), fmt.Sprint(k.Leased), fmt.Sprint(k.Dead), age})
				}
				return rows
			})
		}),
	}
	o.bind(cmd, true)
	return cmd
}

// jobsKeep keeps the job changes the list's filters would show: of the
// target's deployment, environment and resource, in one of the statuses.
func jobsKeep(f *api.JobFilter) func(*ports.Change) bool {
	d, e, r := f.DeploymentID, f.Environment, f.ResourceID
	if t, err := release.ParseTargetKey(f.Target); err == nil {
		d, e, r = t.DeploymentID, t.EnvironmentID, t.ResourceID
	}
	byTarget := targetKeep(d, e, r)
	if byTarget == nil && len(f.Status) == 0 {
		return nil
	}
	return func(ch *ports.Change) bool {
		if byTarget != nil && !byTarget(ch) {
			return false
		}
		var data struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(ch.Data, &data)
		return len(f.Status) == 0 || slices.Contains(f.Status, data.Status)
	}
}
