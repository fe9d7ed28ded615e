package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// releaseOpts are the flags every release-chain command shares.
type releaseOpts struct {
	dsn    string
	output string
	// read marks a command that only reads: it never migrates.
	read bool
}

// releaseExitConflict is the exit status of a conflict, as in catalog.
const releaseExitConflict = 3

// bind adds --dsn and, when withOutput, -o.
func (o *releaseOpts) bind(cmd *cobra.Command, withOutput bool) {
	dsnFlag(cmd.Flags(), &o.dsn)
	if withOutput {
		cmd.Flags().StringVarP(&o.output, "output", "o", "text", "text or json")
	}
}

// run opens the release chain on the configured database and runs fn. The
// chain's state lives in PostgreSQL, where a running `serve --dsn` picks up
// what these commands enqueue.
func (o *releaseOpts) run(cmd *cobra.Command, fn func(ctx context.Context, ch *chain.Chain) error) error {
	be, err := o.open(cmd, "the release chain is stored in PostgreSQL; set --dsn or RECONCILER_DSN. "+
		"The in-memory store lives only inside one `reconciler serve` process (see its demo)")
	if err != nil {
		return err
	}
	defer be.close()
	ch := &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return releaseExit(fn(cmd.Context(), ch))
}

// open checks the flags (RECONCILER_* fallbacks, -o) and opens the
// configured database, migrated (a read-only command refuses an unmigrated
// one instead); without one it refuses with a usage error that says why
// (noDB).
func (o *releaseOpts) open(cmd *cobra.Command, noDB string) (*backend, error) {
	if err := envFallback(cmd); err != nil {
		return nil, err
	}
	if o.output != "" && o.output != "text" && o.output != "json" {
		return nil, usagef("--output: want text or json, got %q", o.output)
	}
	if o.dsn == "" {
		return nil, usagef("%s: no database: %s", cmd.CommandPath(), noDB)
	}
	if o.read {
		return openForRead(cmd.Context(), o.dsn)
	}
	return openBackend(cmd.Context(), o.dsn, true, ports.SystemClock)
}

// releaseExit maps chain errors onto exit statuses: invalid input 2, a
// conflict 3, anything else 1.
func releaseExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, release.ErrInvalid):
		return usageError{err}
	case errors.Is(err, ports.ErrConflict):
		return &catalogError{msg: err.Error(), err: err, code: releaseExitConflict}
	}
	return err
}

// newVersionCmd groups the deployment-version commands.
func newVersionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Create deployment versions (the start of the release chain)",
		Args:  argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("version: want a subcommand (create, force-deploy)")
		},
	}
	var o releaseOpts
	var id, status, name string
	create := &cobra.Command{
		Use:   "create DEPLOYMENT TAG",
		Short: "Store a new version of a deployment and evaluate its targets",
		Long: `create stores a version of DEPLOYMENT tagged TAG (ready unless --status says
otherwise) and enqueues desired-release for every target of the deployment, so a
running ` + "`reconciler serve --dsn`" + ` rolls it out as far as the policies allow.

Exit status: 0 created, 1 not found or failed, 2 invalid input, 3 the id exists.`,
		Example: `  reconciler version create web v1.4.2 --dsn "$RECONCILER_DSN"`,
		Args:    argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
				v := release.DeploymentVersion{ID: id, DeploymentID: args[0], Tag: args[1], Name: name, Status: release.VersionStatus(status)}
				if v.ID == "" {
					v.ID = args[0] + "-" + args[1]
				}
				if !v.Status.Valid() {
					return release.Invalid("status", "want building, ready, paused, rejected or failed, got "+status)
				}
				if err := ch.CreateVersion(ctx, v); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created version %s (%s) of %s\n", v.ID, v.Tag, v.DeploymentID)
				return nil
			})
		},
	}
	o.bind(create, false)
	create.Flags().StringVar(&id, "id", "", "version id (default DEPLOYMENT-TAG)")
	create.Flags().StringVar(&name, "name", "", "human-readable name")
	create.Flags().StringVar(&status, "status", string(release.VersionReady), "building, ready, paused, rejected or failed")
	cmd.AddCommand(create, newForceDeployCmd())
	return cmd
}

// newForceDeployCmd force-deploys a version.
func newForceDeployCmd() *cobra.Command {
	var o releaseOpts
	var skip release.PolicySkip
	var expires time.Duration
	cmd := &cobra.Command{
		Use:   "force-deploy VERSION",
		Short: "Deploy a version whatever the policies say (it still waits for active jobs)",
		Long: `force-deploy pins VERSION on its deployment's targets, narrowed by --environment
and --resource: every policy's version gates are skipped for it there, so it
becomes the desired release even if it is not the newest. Concurrency and retry
still hold, so a target's active job finishes first. The force is a policy skip
with rule "*"; it lasts until --expires passes or it is deleted. The newest
force-deployed version wins where several apply.

Exit status: 0 forced, 1 not found or failed, 2 invalid input.`,
		Example: `  reconciler version force-deploy web-v1.4.1 --environment prod --reason "roll back" --dsn "$RECONCILER_DSN"`,
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
				skip.VersionID = args[0]
				if skip.CreatedBy == "" {
					skip.CreatedBy = os.Getenv("USER")
				}
				if expires > 0 {
					skip.ExpiresAt = ch.Clock.Now().Add(expires)
				}
				s, err := ch.ForceDeploy(ctx, skip)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "force-deployed %s (skip %s)\n", s.VersionID, s.ID)
				return nil
			})
		},
	}
	o.bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&skip.EnvironmentID, "environment", "", "only this environment's targets")
	f.StringVar(&skip.ResourceID, "resource", "", "only this resource's targets")
	f.StringVar(&skip.Reason, "reason", "", "why, for the decision log and explain")
	f.StringVar(&skip.CreatedBy, "user", "", "who forces (default $USER)")
	durationRangeVar(f, &expires, "expires", 0, 0, 100*365*24*time.Hour, "end the force after this long (0: never)")
	return cmd
}

// newApproveCmd records an approval.
func newApproveCmd() *cobra.Command {
	var o releaseOpts
	var user string
	cmd := &cobra.Command{
		Use:   "approve VERSION ENVIRONMENT",
		Short: "Approve a version for an environment and re-evaluate its targets there",
		Long: `approve records USER's approval of VERSION in ENVIRONMENT (anyApproval rules
count distinct users) and enqueues desired-release for the version's targets in
that environment. Approving twice keeps the first record.

Exit status: 0 recorded (or already), 1 not found or failed, 2 invalid input.`,
		Example: `  reconciler approve web-v1.4.2 prod --user alice --dsn "$RECONCILER_DSN"`,
		Args:    argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
				if user == "" {
					user = os.Getenv("USER")
				}
				added, err := ch.Approve(ctx, release.Approval{VersionID: args[0], EnvironmentID: args[1], User: user})
				if err != nil {
					return err
				}
				if added {
					fmt.Fprintf(cmd.OutOrStdout(), "%s approved %s in %s\n", user, args[0], args[1])
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s had already approved %s in %s\n", user, args[0], args[1])
				}
				return nil
			})
		},
	}
	o.bind(cmd, false)
	cmd.Flags().StringVar(&user, "user", "", "who approves (default $USER)")
	return cmd
}

// newExplainCmd answers "why is this version (not) deploying here?".
func newExplainCmd() *cobra.Command {
	var o releaseOpts
	var limit int
	cmd := &cobra.Command{
		Use:   "explain DEPLOYMENT:ENVIRONMENT:RESOURCE",
		Short: "Show a release target's desired release and every rule's verdict per version",
		Long: `explain evaluates the policies for the target's newest versions, exactly as the
desired-release controller does, and prints each rule's verdict: the answer to
"why is this version not deploying?". It also says whether the target has
converged (its newest job is a successful job of its desired release) and, if
not, what it runs and what it waits for. It changes nothing: on a database
that lacks migrations it exits 5 (run ` + "`reconciler migrate up`" + `).`,
		Example: `  reconciler explain web:prod:eu-1 --dsn "$RECONCILER_DSN"
  reconciler explain web:prod:eu-1 -o json --limit 10`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := release.ParseTargetKey(args[0])
			if err != nil {
				return usagef("target: %v (want DEPLOYMENT:ENVIRONMENT:RESOURCE)", err)
			}
			return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
				ex, err := ch.Explain(ctx, t, limit)
				if err != nil {
					return err
				}
				if o.output == "json" {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(ex)
				}
				_, err = io.WriteString(cmd.OutOrStdout(), explainText(&ex))
				return err
			})
		},
	}
	o.bind(cmd, true)
	o.read = true
	intRangeVar(cmd.Flags(), &limit, "limit", 5, 0, 10_000, "newest versions to explain (0: all)")
	return cmd
}

// explainText renders an explanation for people.
func explainText(ex *chain.Explanation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "target %s\n", ex.Target)
	switch d := ex.Desired; {
	case d == nil:
		b.WriteString("desired: not evaluated yet\n")
	case d.ReleaseID != "":
		fmt.Fprintf(&b, "desired: release %s\n", d.ReleaseID)
	default:
		b.WriteString("desired: no release\n")
		for _, r := range d.Reasons {
			fmt.Fprintf(&b, "  %s\n", r)
		}
	}
	if ex.Convergence.Converged {
		fmt.Fprintf(&b, "converged: yes, %s\n", ex.Convergence.Message)
	} else {
		fmt.Fprintf(&b, "converged: no, %s\n", ex.Convergence.Message)
	}
	if ex.Forced != "" {
		fmt.Fprintf(&b, "forced: %s (policies skipped for it)\n", ex.Forced)
	}
	if len(ex.Jobs) > 0 {
		b.WriteString("jobs (newest first):\n")
		for i, j := range ex.Jobs {
			if i == 5 {
				fmt.Fprintf(&b, "  ... %d more\n", len(ex.Jobs)-i)
				break
			}
			fmt.Fprintf(&b, "  %s  %-12s version %s %s\n", j.ID, j.Status, j.VersionID, j.Message)
			writeLastMeasurements(&b, map[string]any{"measurements": j.Measurements})
		}
	}
	b.WriteString("versions (newest first):\n")
	for _, v := range ex.Versions {
		fmt.Fprintf(&b, "  %s (%s, %s): %s\n", v.Version.Tag, v.Version.ID, v.Version.Status, v.Decision.Status)
		for _, rv := range v.Verdicts {
			name := rv.RuleID
			if name == "" {
				name = "policy " + rv.PolicyID
			}
			skipped := ""
			if rv.Skipped {
				skipped = " (skipped)"
			}
			fmt.Fprintf(&b, "    %-20s %-8s %s%s\n", name, rv.Status, rv.Message, skipped)
		}
	}
	return b.String()
}
