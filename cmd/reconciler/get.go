package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
)

// clientCmd runs fn with the API client of --server, or with --dsn the API
// in this process over that database.
func clientCmd(o *releaseOpts, fn func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, closeFn, err := o.apiClient(cmd)
		if err != nil {
			return err
		}
		defer closeFn()
		return releaseExit(fn(cmd, cmd.Context(), c, args))
	}
}

// table prints rows under a header, tab-aligned.
func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// show prints v as -o asks, or the table rows() renders.
func show(cmd *cobra.Command, output string, v any, header string, rows func() [][]string) error {
	if ok, err := structured(cmd.OutOrStdout(), output, v); ok {
		return err
	}
	return table(cmd.OutOrStdout(), header, rows())
}

// ts renders a time for tables.
func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// nextPage tells how to continue a list, on standard error.
func nextPage(cmd *cobra.Command, cursor string) {
	if cursor != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "more: add --cursor %s\n", cursor)
	}
}

func newGetCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Read objects, release targets, versions, jobs and workflows (through the API)",
		Long: `get reads through the API: of a running server with --server (token scope
read), or, with --dsn, through the same API served in this process over that
database. Lists page with --limit and --cursor (the next cursor is printed on
standard error). -o table (default), json or yaml. The objects (workspaces,
systems, variable-sets, deployments, environments, resources, relationship-rules,
job-agents, policies; one NAME
or all) print with -o yaml as the documents ` + "`reconciler apply`" + ` takes unchanged.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("get: want a subcommand (workspaces, systems, variable-sets, deployments, environments, resources, relationship-rules, job-agents, policies, targets, target, versions, version, jobs, job, workflows, workflow)")
		},
	}
	var o releaseOpts
	var page client.Page
	var scope ports.TargetScope
	sub := func(use, short string, args cobra.PositionalArgs, fn func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: argsUsage(args), RunE: clientCmd(&o, fn)}
		o.bind(c, true)
		return c
	}
	paged := func(c *cobra.Command) *cobra.Command {
		c.Flags().IntVar(&page.Limit, "limit", 100, "most items (1-1000)")
		c.Flags().StringVar(&page.Cursor, "cursor", "", "continue a list where the previous page ended")
		return c
	}
	var watchTargets, watchWorkflows watch
	targets := paged(sub("targets", "List release targets with their desired release, current and active job (--watch: then each change of a desired or current release)", cobra.NoArgs,
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			watchTargets.keep = targetKeep(scope.DeploymentID, scope.EnvironmentID, scope.ResourceID)
			watched := watchTargets.start(cmd, ctx, c)
			p, err := c.ListTargets(ctx, scope, page)
			if err != nil {
				return err
			}
			if err := show(cmd, o.output, p, "TARGET\tDESIRED\tCURRENT\tACTIVE", func() [][]string { return targetRows(p.Items) }); err != nil {
				return err
			}
			nextPage(cmd, p.NextCursor)
			return watched(o.output)
		}))
	watchTargets.bind(targets, ports.ChangeTargetDesired, ports.ChangeTargetCurrent)
	targets.Flags().StringVar(&scope.SystemID, "system", "", "only this system's")
	targets.Flags().StringVar(&scope.DeploymentID, "deployment", "", "only this deployment's")
	targets.Flags().StringVar(&scope.EnvironmentID, "environment", "", "only this environment's")
	targets.Flags().StringVar(&scope.ResourceID, "resource", "", "only this resource's")
	targetOne := sub("target KEY", "Read one release target (KEY is DEPLOYMENT:ENVIRONMENT:RESOURCE)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			t, err := c.GetTarget(ctx, args[0])
			if err != nil {
				return err
			}
			return show(cmd, o.output, t, "TARGET\tDESIRED\tCURRENT\tACTIVE", func() [][]string { return targetRows([]api.TargetStatus{t}) })
		})
	versions := newVersionsListCmd("versions")
	version := newVersionsGetCmd("version")
	jobs := newJobsListCmd("jobs")
	job := sub("job ID", "Read one job", cobra.ExactArgs(1),
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			j, err := c.GetJob(ctx, args[0])
			if err != nil {
				return err
			}
			return show(cmd, o.output, j, jobsHeader, func() [][]string { return jobRows([]ports.JobRow{j}) })
		})
	workflows := paged(sub("workflows", "List workflows by id (--watch: then each change of a workflow's or TaskRun's phase)", cobra.NoArgs,
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			watched := watchWorkflows.start(cmd, ctx, c)
			p, err := c.ListWorkflows(ctx, page)
			if err != nil {
				return err
			}
			err = show(cmd, o.output, p, "ID\tTEMPLATE\tPHASE\tCREATED", func() [][]string {
				rows := make([][]string, 0, len(p.Items))
				for _, w := range p.Items {
					rows = append(rows, []string{w.ID, w.TemplateName, string(w.Phase), ts(w.CreatedAt)})
				}
				return rows
			})
			if err != nil {
				return err
			}
			nextPage(cmd, p.NextCursor)
			return watched(o.output)
		}))
	watchWorkflows.bind(workflows, ports.ChangeWorkflowStatus, ports.ChangeTaskRunStatus)
	workflowOne := sub("workflow ID", "Read a workflow's DAG with each TaskRun", cobra.ExactArgs(1),
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			st, err := c.GetWorkflow(ctx, args[0])
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, st); ok {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), statusText(&st))
			return err
		})
	var af client.AuditFilter
	audit := paged(sub("audit", "List the audit log: every write with who made it, from where, and what it changed, newest first", cobra.NoArgs,
		func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			p, err := c.ListAudit(ctx, af, page)
			if err != nil {
				return err
			}
			defer nextPage(cmd, p.NextCursor)
			return show(cmd, o.output, p, "SEQ\tAT\tACTOR\tACTION\tOBJECT\tSUMMARY", func() [][]string {
				rows := make([][]string, 0, len(p.Items))
				for _, e := range p.Items {
					rows = append(rows, []string{strconv.FormatInt(e.Seq, 10), ts(e.At), e.Actor, e.Action, e.Kind + "/" + e.ID, e.Summary})
				}
				return rows
			})
		}))
	audit.Flags().StringVar(&af.Actor, "actor", "", "only this actor's writes (a token's name, local:USER)")
	audit.Flags().StringVar(&af.Kind, "kind", "", "only writes of this kind (deployments, versions, catalog, ...)")
	audit.Flags().StringVar(&af.ID, "id", "", "only writes of the object of this id")
	cmd.AddCommand(audit)
	targetOne.ValidArgsFunction = completeNames(&o, completeTargets)
	workflowOne.ValidArgsFunction = completeNames(&o, completeWorkflows)
	cmd.AddCommand(targets, targetOne, versions, version, jobs, job, workflows, workflowOne)
	cmd.AddCommand(documentGetCmds(&o.output, sub)...)
	return cmd
}

func targetRows(ts []api.TargetStatus) [][]string {
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		desired, current, active := "-", "-", "-"
		if t.Desired != nil {
			desired = "none"
			if t.Desired.ReleaseID != "" {
				desired = t.Desired.ReleaseID[:min(12, len(t.Desired.ReleaseID))]
			}
		}
		if t.Current != nil {
			current = t.Current.Version.Tag
		}
		if t.Active != nil {
			active = t.Active.Version.Tag + " (" + string(t.Active.Job.Status) + ")"
		}
		rows = append(rows, []string{t.Target.Key(), desired, current, active})
	}
	return rows
}

func jobRows(jobs []ports.JobRow) [][]string {
	rows := make([][]string, 0, len(jobs))
	for _, j := range jobs {
		wf := "-"
		if j.Workflow != nil {
			wf = j.Workflow.ID + "/" + j.Workflow.Task
		}
		rows = append(rows, []string{j.ID, j.TargetKey, wf, j.VersionID, string(j.Status), ts(j.CreatedAt), j.Message})
	}
	return rows
}

// jobsHeader heads jobRows' table: WORKFLOW is a workflow task's job's
// WORKFLOW_ID/TASK, - for a release job.
const jobsHeader = "ID\tTARGET\tWORKFLOW\tVERSION\tSTATUS\tCREATED\tMESSAGE"
