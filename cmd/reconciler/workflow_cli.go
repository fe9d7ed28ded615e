package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// newWorkflowCmd groups the workflow commands.
func newWorkflowCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Validate workflow templates; run workflows and follow them",
		Args:  argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("workflow: want a subcommand (validate, run, status, approve, cancel)")
		},
	}
	cmd.AddCommand(newWorkflowValidateCmd(), newWorkflowRunCmd(), newWorkflowStatusCmd(), newWorkflowApproveCmd(), newWorkflowCancelCmd())
	return cmd
}

func newWorkflowValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a WorkflowTemplate (YAML or JSON) and list every problem",
		Long: `validate decodes FILE strictly and checks it, listing every problem at once
with its path and line: unknown fields, duplicate task names, unknown
dependencies, cycles (named), matrix references to non-matrix parameters, bad
expressions, values outside an enum. FILE "-" reads standard input.

Exit status: 0 valid, 2 problems found or unreadable.`,
		Example: `  reconciler workflow validate testdata/workflows/multi-cluster-deployment.yaml`,
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return usagef("--output: want text or json, got %q", output)
			}
			src, err := readInput(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			t, err := workflow.Load(src)
			var inv *workflow.InvalidError
			if err != nil && !errors.As(err, &inv) {
				return usageError{err}
			}
			out := cmd.OutOrStdout()
			if t != nil {
				for _, w := range t.Deprecations() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", args[0], w)
				}
			}
			if output == "json" {
				res := map[string]any{"valid": inv == nil, "problems": []workflow.Problem{}}
				if inv != nil {
					res["problems"] = inv.Problems
				}
				if err := json.NewEncoder(out).Encode(res); err != nil {
					return err
				}
			} else if inv == nil {
				fmt.Fprintf(out, "%s: valid WorkflowTemplate %q (%d tasks)%s\n", args[0], t.Metadata.Name, len(t.Spec.Tasks), triggersText(t))
			} else {
				for _, p := range inv.Problems {
					fmt.Fprintf(out, "%s: %s\n", args[0], p)
				}
			}
			if inv != nil {
				return usageError{fmt.Errorf("%s: %d problems", args[0], len(inv.Problems))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

// workflowOpts are the flags of the commands that work on a database.
type workflowOpts struct{ releaseOpts }

// run opens the workflow controller on the configured database.
func (o *workflowOpts) run(cmd *cobra.Command, fn func(ctx context.Context, c *flow.Controller, be *backend) error) error {
	be, err := o.open(cmd, "workflows are stored in PostgreSQL, where `reconciler serve --dsn` runs them; set --dsn or RECONCILER_DSN")
	if err != nil {
		return err
	}
	defer be.close()
	c := &flow.Controller{Store: be.workflows, Queue: be.queue, Releases: be.releases, Clock: ports.SystemClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err = fn(cmd.Context(), c, be)
	var inv *workflow.InvalidError
	if errors.As(err, &inv) {
		return usageError{err}
	}
	return releaseExit(err)
}

// parseParams reads --param k=v pairs; a value that is JSON (a number, a
// boolean, an object, a list, a quoted string) is taken as such, anything
// else as a string. A name given twice, or a name or value holding a
// control character or invalid UTF-8, is refused naming it.
func parseParams(pairs []string) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--param %q: want NAME=VALUE", p)
		}
		if err := release.CheckControl("--param "+strconv.Quote(k), p); err != nil {
			return nil, usagef("%v", err)
		}
		if _, dup := out[k]; dup {
			return nil, usagef("--param %s: given more than once", k)
		}
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			x = v
		}
		out[k] = workflow.Normalize(x)
	}
	return out, nil
}

func newWorkflowRunCmd() *cobra.Command {
	var o workflowOpts
	var params []string
	var id string
	var scope flow.InputScope
	cmd := &cobra.Command{
		Use:   "run TEMPLATE",
		Short: "Start a workflow from a published catalog template or a file",
		Long: `run starts a workflow and prints its id. TEMPLATE is the name of a
workflow-template in the catalog (its latest published revision is pinned) or
a file (YAML or JSON). Parameters come from --param NAME=VALUE (JSON values are
parsed: --param replicas=3 is a number). Matrix parameters whose source is
resources, environments or release targets select from the stored workspace
(--workspace) and system (--system; all of the workspace's when omitted).
Every problem with the template or
the parameters is listed and nothing is started. A running
` + "`reconciler serve`" + ` executes it; follow it with ` + "`reconciler workflow status ID`" + `.
With --server, TEMPLATE must be a published workflow-template and the run goes
through the API (token scope write).

Exit status: 0 started, 2 invalid template or parameters, 3 the id exists,
4 no such template, 5 unauthorized, 1 anything else.`,
		Example: `  reconciler workflow run deploy --param replicas=3 --dsn "$RECONCILER_DSN"
  reconciler workflow run ./deploy.yaml --param region=eu-west-1`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			explicit, err := parseParams(params)
			if err != nil {
				return err
			}
			// A file is read (and capped) before the database is opened;
			// a name that is no file is looked up in the catalog.
			src, err := readInput(cmd.InOrStdin(), args[0])
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			show := func(w ports.WorkflowRecord) error {
				if ok, err := structured(cmd.OutOrStdout(), o.output, w); ok {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "started workflow %s (template %s", w.ID, w.TemplateName)
				if w.TemplateRevision > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), " revision %d", w.TemplateRevision)
				}
				fmt.Fprintln(cmd.OutOrStdout(), ")")
				return nil
			}
			remote := func(ctx context.Context, c *client.Client) error {
				if src != nil {
					return usagef("%s: with --server, TEMPLATE names a published workflow-template (publish a file with `reconciler catalog`)", args[0])
				}
				w, err := c.RunWorkflow(ctx, api.WorkflowRun{Template: args[0], ID: id, Parameters: explicit,
					WorkspaceID: scope.WorkspaceID, SystemID: scope.SystemID})
				if err != nil {
					return err
				}
				return show(w)
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, c *flow.Controller, be *backend) error {
					p := flow.StartParams{ID: id, Parameters: explicit, Scope: scope}
					if src != nil {
						p.Template = src
					} else {
						rev, err := be.catalog.CatalogLatestPublished(ctx, revision.KindWorkflowTemplate, args[0])
						if err != nil {
							return fmt.Errorf("template %s: no such file, and no published workflow-template of that name: %w", args[0], err)
						}
						p.Template, p.TemplateName, p.TemplateRevision = rev.Content, rev.Name, rev.Revision
					}
					w, err := c.Start(ctx, p)
					if err != nil && src != nil {
						return fmt.Errorf("%s: %w", displayName(args[0]), err)
					}
					if err != nil {
						return err
					}
					return show(w)
				})
			})
		},
	}
	o.bind(cmd, true)
	cmd.Flags().StringArrayVar(&params, "param", nil, "NAME=VALUE; repeat for several")
	cmd.Flags().StringVar(&id, "id", "", "workflow id (default: template name and a time stamp)")
	cmd.Flags().StringVar(&scope.WorkspaceID, "workspace", "", "workspace whose resources matrix sources select (default: the system's)")
	cmd.Flags().StringVar(&scope.SystemID, "system", "", "system whose environments and deployments matrix sources select")
	return cmd
}

func newWorkflowStatusCmd() *cobra.Command {
	var o workflowOpts
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Print a workflow's DAG with each TaskRun's phase and message",
		Long: `status prints the workflow's phase and its tasks in template order, each
with its dependencies and every TaskRun (one per matrix item): phase, attempt,
job and message. -o json prints the stored workflow and TaskRuns (secrets are
shown as [REDACTED]). It changes nothing: on a database that lacks
migrations it exits 6 (run ` + "`reconciler migrate up`" + `).`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			show := func(st *flow.Status) error {
				if ok, err := structured(cmd.OutOrStdout(), o.output, st); ok {
					return err
				}
				_, err := io.WriteString(cmd.OutOrStdout(), statusText(st))
				return err
			}
			remote := func(ctx context.Context, c *client.Client) error {
				st, err := c.GetWorkflow(ctx, args[0])
				if err != nil {
					return err
				}
				return show(&st)
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, c *flow.Controller, _ *backend) error {
					st, err := c.Status(ctx, args[0])
					if err != nil {
						return err
					}
					return show(&st)
				})
			})
		},
	}
	o.bind(cmd, true)
	o.read = true
	return cmd
}

// statusText renders a workflow's DAG for people.
func statusText(st *flow.Status) string {
	var b strings.Builder
	w := &st.Workflow
	fmt.Fprintf(&b, "workflow %s (%s", w.ID, w.TemplateName)
	if w.TemplateRevision > 0 {
		fmt.Fprintf(&b, " revision %d", w.TemplateRevision)
	}
	fmt.Fprintf(&b, "): %s", w.Phase)
	if w.Message != "" {
		fmt.Fprintf(&b, ": %s", w.Message)
	}
	b.WriteString("\n")
	if by := startedBy(w); by != "" {
		b.WriteString("  started by " + by + "\n")
	}
	var t workflow.Template
	_ = json.Unmarshal(w.Template, &t)
	byTask := map[string][]ports.TaskRunRecord{}
	for _, r := range st.TaskRuns {
		byTask[r.Task] = append(byTask[r.Task], r)
	}
	for _, task := range t.Spec.Tasks {
		fmt.Fprintf(&b, "  %s (%s)", task.Name, task.Type)
		if len(task.Dependencies) > 0 {
			fmt.Fprintf(&b, " after %s", strings.Join(task.Dependencies, ", "))
		}
		runs := byTask[task.Name]
		if len(runs) == 0 {
			b.WriteString(": not started\n")
			continue
		}
		b.WriteString("\n")
		sort.Slice(runs, func(i, j int) bool { return runs[i].MatrixIndex < runs[j].MatrixIndex })
		for _, r := range runs {
			name := task.Name
			if r.MatrixIndex != workflow.NoMatrix {
				name += "[" + strconv.Itoa(r.MatrixIndex) + "]"
			}
			fmt.Fprintf(&b, "    %-24s %-10s", name, r.Phase)
			if r.Attempt > 0 {
				fmt.Fprintf(&b, " attempt %d", r.Attempt+1)
			}
			if r.Message != "" {
				fmt.Fprintf(&b, " %s", r.Message)
			}
			b.WriteString("\n")
			writeLastMeasurements(&b, r.Outputs)
		}
	}
	return b.String()
}

// triggersText says what starts a template besides a user or a release:
// its hooks' events and its schedule.
func triggersText(t *workflow.Template) string {
	var parts []string
	for _, h := range t.Spec.Hooks {
		parts = append(parts, "on "+string(h.Event))
	}
	if t.Spec.Schedule != "" {
		parts = append(parts, fmt.Sprintf("schedule %q in %s", t.Spec.Schedule, cmp.Or(t.Spec.Timezone, "UTC")))
	}
	if len(parts) == 0 {
		return ""
	}
	return ", starts " + strings.Join(parts, ", ")
}

// startedBy says which event or scheduled time started a workflow, or the
// release job it runs; empty for one a user started.
func startedBy(w *ports.WorkflowRecord) string {
	switch tr := w.Trigger; {
	case tr != nil && tr.Event != nil:
		e := tr.Event
		s := fmt.Sprintf("event %s #%d (release %s, target %s", e.Type, e.Seq, e.ReleaseID, e.TargetKey)
		if e.JobID != "" {
			s += ", job " + e.JobID + " " + string(e.JobStatus)
		}
		return s + ")"
	case tr != nil && tr.Kind == ports.TriggerSchedule:
		return fmt.Sprintf("schedule %q (%s) for %s", tr.Schedule, cmp.Or(tr.Timezone, "UTC"), tr.ScheduledAt.UTC().Format(time.RFC3339))
	case w.JobID != "":
		return "release job " + w.JobID
	}
	return ""
}

// writeLastMeasurements adds a line per metric of a verification run with
// what its last measurement measured (or why it could not), so the status
// says why a verification failed.
func writeLastMeasurements(b *strings.Builder, outputs map[string]any) {
	raw, err := json.Marshal(outputs["measurements"])
	if err != nil {
		return
	}
	var taken map[string][]release.Measurement
	if json.Unmarshal(raw, &taken) != nil || len(taken) == 0 {
		return
	}
	names := make([]string, 0, len(taken))
	for n := range taken {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ms := taken[n]
		if len(ms) == 0 {
			continue
		}
		last := ms[len(ms)-1]
		what := "error: " + last.Error
		if last.Error == "" {
			r, _ := json.Marshal(last.Result)
			what = "result " + string(r)
		}
		if len(what) > 300 {
			what = what[:300] + "..."
		}
		fmt.Fprintf(b, "      %s (%d measured): last %s\n", n, len(ms), what)
	}
}

func newWorkflowApproveCmd() *cobra.Command {
	var o workflowOpts
	cmd := &cobra.Command{
		Use:   "approve ID TASKRUN",
		Short: "Approve a running approval task (TASKRUN is the task name, or NAME.INDEX for a matrix item)",
		Long: `approve records an approval of a running approval task. With --server it goes
through the API (token scope approve) and the approver is the token's name;
with --dsn it writes the database directly, and the approver is
local:<operating-system user> ($USER), an offline action no token
authenticated (a task naming its approvers must name that principal).`,
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			remote := func(ctx context.Context, c *client.Client) error {
				if err := c.ApproveTaskRun(ctx, args[0], args[1]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "approved %s of workflow %s\n", args[1], args[0])
				return nil
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, c *flow.Controller, _ *backend) error {
					user := localPrincipal()
					if err := c.Approve(ctx, args[0], args[1], user); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s approved %s of workflow %s\n", user, args[1], args[0])
					return nil
				})
			})
		},
	}
	o.bind(cmd, false)
	return cmd
}

func newWorkflowCancelCmd() *cobra.Command {
	var o workflowOpts
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow: nothing new starts, running tasks are cancelled",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			done := func() { fmt.Fprintf(cmd.OutOrStdout(), "cancellation of workflow %s requested\n", args[0]) }
			remote := func(ctx context.Context, c *client.Client) error {
				if err := c.CancelWorkflow(ctx, args[0]); err != nil {
					return err
				}
				done()
				return nil
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, c *flow.Controller, _ *backend) error {
					if err := c.Cancel(ctx, args[0]); err != nil {
						return err
					}
					done()
					return nil
				})
			})
		},
	}
	o.bind(cmd, false)
	return cmd
}
