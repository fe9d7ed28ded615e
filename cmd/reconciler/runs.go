package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

// runIntents are the control intents `runs` offers as subcommands.
var runIntents = []struct {
	intent reconcile.Intent
	short  string
}{
	{reconcile.IntentCancel, "Cancel a run (repo, standalone, pr-review) that has not finished"},
	{reconcile.IntentRetry, "Retry a failed or cancelled repo or standalone run, within its max_retries"},
	{reconcile.IntentResume, "Resume a repo run that needs attention, or a paused or failed persistent agent"},
	{reconcile.IntentRestart, "Restart a finished repo or standalone run afresh, or a persistent agent"},
	{reconcile.IntentRereview, "Review a pull request again (pr-review runs)"},
	{reconcile.IntentPause, "Pause a persistent agent (its pod or process is released)"},
	{reconcile.IntentArchive, "Archive a persistent agent for good (its pod or process is released)"},
}

// parseRunRef reads KIND/ID.
func parseRunRef(s string) (reconcile.RunRef, error) {
	k, id, ok := strings.Cut(s, "/")
	ref := reconcile.RunRef{Kind: reconcile.RunKind(k), ID: id}
	if !ok || id == "" || !ref.Kind.Valid() {
		return ref, usagef("run %q: want KIND/ID, KIND one of repo, standalone, pr-review, persistent-agent", s)
	}
	return ref, nil
}

func newRunsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Create, list, read and steer runs of the four kinds (through the API)",
		Long: `runs works on the runs the kernel reconciles: repo, standalone, pr-review and
persistent-agent runs. A run is named KIND/ID. With --server it goes through
that server's API (token scope read for list and get, write for the rest);
with --dsn it serves the API in this process over the database, acting as
local:<operating-system user> (an offline action no token authenticated), and a running ` + "`reconciler serve --dsn`" + ` on that database reconciles.

Control intents (cancel, retry, resume, restart, rereview, pause, archive) are
judged by the kernel's rules for the run's kind and state before they are
stored: one that would not apply is refused with the kernel's reason (exit 3),
as is a second intent while one is pending. A stored intent is applied by the
next pass, which ` + "`runs get`" + ` shows among the run's decisions.

` + exitHelp,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("runs: want a subcommand (create, list, get, message, subtask, or an intent: cancel, retry, resume, restart, rereview, pause, archive)")
		},
	}
	cmd.AddCommand(newRunsCreateCmd(), newRunsListCmd(), newRunsGetCmd(), newRunsMessageCmd(), newRunsSubtaskCmd())
	for _, it := range runIntents {
		cmd.AddCommand(newRunsIntentCmd(it.intent, it.short))
	}
	return cmd
}

func newRunsCreateCmd() *cobra.Command {
	var o releaseOpts
	var in api.RunCreate
	var autoMerge, autoResume bool
	cmd := &cobra.Command{
		Use:   "create KIND/ID",
		Short: "Create a run in its kind's initial state and wake it",
		Long: `create stores a new run (repo: pending, persistent-agent: idle, standalone and
pr-review: queued) and wakes it. A repo run needs --repo, a standalone run
--workflow, a pr-review run --pr-url; a flag that does not apply to the kind
is refused (exit 2), as is a taken id (exit 3).`,
		Example: `  reconciler runs create repo/fix-login --repo acme/api --auto-merge --server http://127.0.0.1:8080
  reconciler runs create persistent-agent/triage-bot --dsn "$RECONCILER_DSN"`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			ref, err := parseRunRef(args[0])
			if err != nil {
				return err
			}
			in.Kind, in.ID = ref.Kind, ref.ID
			in.Settings.AutoMerge, in.Settings.AutoResume = autoMerge, autoResume
			row, err := c.CreateRun(ctx, in)
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, row); ok {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s (%s)\n", row.Ref, row.State)
			return nil
		}),
	}
	o.bind(cmd, true)
	f := cmd.Flags()
	f.StringVar(&in.Repo, "repo", "", "repo runs: the repository the agent works in")
	f.StringVar(&in.Workflow, "workflow", "", "standalone runs: the workflow")
	f.StringVar(&in.PRURL, "pr-url", "", "pr-review runs: the pull request to review")
	f.IntVar(&in.MaxRetries, "max-retries", 0, "repo and standalone runs: how often the retry intent may re-queue it (0-100)")
	f.StringSliceVar(&in.DependsOn, "depends-on", nil, "repo runs: ids of repo runs this one waits for")
	f.BoolVar(&autoMerge, "auto-merge", false, "repo runs: merge the pull request once CI passes and it is approved")
	f.BoolVar(&autoResume, "auto-resume", false, "repo runs: resume the agent when CI fails or changes are requested")
	return cmd
}

func newRunsListCmd() *cobra.Command {
	var o releaseOpts
	var p client.RunListParams
	var kind, state string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs by kind and id, optionally of one kind and in one state",
		Args:  argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			p.Kind, p.State = reconcile.RunKind(kind), reconcile.State(state)
			if kind != "" && !p.Kind.Valid() {
				return usagef("--kind %q: want repo, standalone, pr-review or persistent-agent", kind)
			}
			page, err := c.Runs(ctx, p)
			if err != nil {
				return err
			}
			nextPage(cmd, page.NextCursor)
			return show(cmd, o.output, page, "KIND\tID\tSTATE\tVERSION\tUPDATED", func() [][]string {
				rows := make([][]string, 0, len(page.Items))
				for _, r := range page.Items {
					rows = append(rows, []string{string(r.Ref.Kind), r.Ref.ID, string(r.State), fmt.Sprint(r.Version), ts(r.UpdatedAt)})
				}
				return rows
			})
		}),
	}
	o.bind(cmd, true)
	f := cmd.Flags()
	f.StringVar(&kind, "kind", "", "only runs of this kind")
	f.StringVar(&state, "state", "", "only runs in this state")
	f.IntVar(&p.Limit, "limit", 100, "most runs (1-1000)")
	f.StringVar(&p.Cursor, "cursor", "", "continue a list (printed on standard error)")
	return cmd
}

func newRunsGetCmd() *cobra.Command {
	var o releaseOpts
	var decisions int
	cmd := &cobra.Command{
		Use:   "get KIND/ID",
		Short: "Show a run and its newest decisions (action, reason, from → to, time, who asked)",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			ref, err := parseRunRef(args[0])
			if err != nil {
				return err
			}
			v, err := c.Run(ctx, ref, decisions)
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, v); ok {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s  state %s  version %d  updated %s\n", v.Ref, v.State, v.Version, ts(v.UpdatedAt))
			if v.Repo != "" {
				fmt.Fprintf(w, "repo %s\n", v.Repo)
			}
			if v.PR != nil {
				fmt.Fprintf(w, "pr %s (%s, checks %s, review %s)\n", v.PR.URL, v.PR.State, v.PR.Checks, v.PR.Review)
			}
			if v.Pod != nil {
				fmt.Fprintf(w, "pod %s %s\n", v.Pod.Name, v.Pod.Phase)
			}
			fmt.Fprintln(w)
			rows := make([][]string, 0, len(v.Decisions))
			for _, d := range v.Decisions {
				move := "-"
				if d.From != "" || d.To != "" {
					move = string(d.From) + " → " + string(d.To)
				}
				by := d.By
				if by == "" {
					by = "-"
				}
				rows = append(rows, []string{ts(d.At), d.Action, d.Reason, move, by})
			}
			return table(w, "AT\tACTION\tREASON\tMOVE\tBY", rows)
		}),
	}
	o.bind(cmd, true)
	cmd.Flags().IntVar(&decisions, "decisions", 20, "how many of the newest decisions to show (0-50)")
	return cmd
}

func newRunsIntentCmd(in reconcile.Intent, short string) *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   string(in) + " KIND/ID",
		Short: short + " (control intent " + string(in) + ")",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			ref, err := parseRunRef(args[0])
			if err != nil {
				return err
			}
			res, err := c.RunIntent(ctx, ref, in)
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, res); ok {
				return err
			}
			next := res.Next.Reason
			if res.Next.To != "" {
				next += ": " + string(res.Next.From) + " → " + string(res.Next.To)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s asked for %s; next pass: %s\n", in, ref, next)
			return nil
		}),
	}
	o.bind(cmd, true)
	return cmd
}

func newRunsSubtaskCmd() *cobra.Command {
	var o releaseOpts
	var blocking, remove bool
	cmd := &cobra.Command{
		Use:   "subtask repo/ID CHILD",
		Short: "Make repo run CHILD a subtask of a repo run (--blocking: it must complete before the run's pull request is merged automatically), or --remove it",
		Long: `subtask records repo run CHILD as a subtask of the repo run: with --blocking
its completion gates the run's auto-merge (an approved pull request with CI
green waits until CHILD is completed). Run again to change --blocking, or
with --remove to take CHILD off. Each change is one of the run's decisions
(runs get), with who made it.`,
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			ref, err := parseRunRef(args[0])
			if err != nil {
				return err
			}
			if remove && cmd.Flags().Changed("blocking") {
				return usagef("--remove and --blocking exclude each other")
			}
			var row ports.RunRow
			if remove {
				row, err = c.RunRemoveSubtask(ctx, ref, args[1])
			} else {
				row, err = c.RunSetSubtask(ctx, ref, args[1], blocking)
			}
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, row); ok {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s subtasks:", row.Ref)
			if len(row.Subtasks) == 0 {
				fmt.Fprint(cmd.OutOrStdout(), " none")
			}
			for _, st := range row.Subtasks {
				fmt.Fprintf(cmd.OutOrStdout(), " %s", st.ID)
				if st.Blocking {
					fmt.Fprint(cmd.OutOrStdout(), " (blocking)")
				}
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		}),
	}
	cmd.Flags().BoolVar(&blocking, "blocking", false, "the subtask must complete before the run's pull request is merged automatically")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove CHILD from the run's subtasks")
	o.bind(cmd, true)
	return cmd
}

func newRunsMessageCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "message persistent-agent/ID TEXT",
		Short: "Send a message to a persistent agent: kept in its inbox, it starts a turn (the next one, if a turn is running)",
		Args:  argsUsage(cobra.ExactArgs(2)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			ref, err := parseRunRef(args[0])
			if err != nil {
				return err
			}
			row, err := c.RunMessage(ctx, ref, args[1])
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, row); ok {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sent to %s\n", row.Ref)
			return nil
		}),
	}
	o.bind(cmd, true)
	return cmd
}
