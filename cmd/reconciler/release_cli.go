package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// releaseOpts are the flags every release-chain command shares.
type releaseOpts struct {
	remoteOpts
	dsn    string
	output string
	// read marks a command that only reads: it never migrates.
	read bool
}

// bind adds --dsn, --server, --token and, when withOutput, -o.
func (o *releaseOpts) bind(cmd *cobra.Command, withOutput bool) {
	dsnFlag(cmd.Flags(), &o.dsn)
	o.remoteOpts.bind(cmd.Flags())
	if withOutput {
		cmd.Flags().StringVarP(&o.output, "output", "o", "table", outputs)
	}
}

// check applies the RECONCILER_* fallbacks once and validates -o and
// the choice of --server or --dsn.
func (o *releaseOpts) check(cmd *cobra.Command) error {
	if err := envFallback(cmd); err != nil {
		return err
	}
	if o.server != "" && cmd.Flags().Changed("dsn") {
		return usagef("--server and --dsn: give one (the server has its own database)")
	}
	return checkOutput(o.output)
}

// run opens the release chain on the configured database and runs fn. The
// chain's state lives in PostgreSQL, where a running `serve --dsn` picks up
// what these commands enqueue.
func (o *releaseOpts) run(cmd *cobra.Command, fn func(ctx context.Context, ch *chain.Chain) error) error {
	be, err := o.open(cmd, "the release chain is stored in PostgreSQL; set --dsn or RECONCILER_DSN "+
		"(the in-memory store lives only inside one `reconciler serve` process)")
	if err != nil {
		return err
	}
	defer be.close()
	ch := &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return releaseExit(fn(cmd.Context(), ch))
}

// noDatabase is the usage error of a command given neither --dsn nor
// --server: why it needs a database, and that --server (a running
// `reconciler serve`) is the other way. Every such message is this one.
func noDatabase(command, why string) error {
	return usagef("%s: no database: %s; or set --server URL (env RECONCILER_SERVER) to go through a running `reconciler serve`", command, why)
}

// open checks the flags (RECONCILER_* fallbacks, -o) and opens the
// configured database, migrated (a read-only command refuses an unmigrated
// one instead); without one it refuses with a usage error that says why
// (noDB).
func (o *releaseOpts) open(cmd *cobra.Command, noDB string) (*backend, error) {
	if err := o.check(cmd); err != nil {
		return nil, err
	}
	if o.dsn == "" {
		return nil, noDatabase(cmd.CommandPath(), noDB)
	}
	if o.read {
		return openForRead(cmd.Context(), o.dsn)
	}
	return openBackend(cmd.Context(), o.dsn, true, ports.SystemClock)
}

// releaseExit maps chain errors onto the exit status table (exitStatus):
// invalid input 2, a conflict 3, not found 4, anything else 1.
func releaseExit(err error) error {
	if code := exitStatus(err); code != exitOK && code != exitInternal {
		return &catalogError{msg: err.Error(), err: err, code: code}
	}
	return err
}

// newVersionCmd prints the build, as --version does.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print reconciler's version (reconciler about tells more)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("version prints this binary's version and takes no arguments; deployment versions are `reconciler versions %s`", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "reconciler %s\n", currentBuild())
			return err
		},
	}
}

// newVersionsCmd groups the deployment-version commands.
func newVersionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "versions",
		Short: "Deployment versions: create, list, get, status, force-deploy",
		Long: `versions creates and reads deployment versions, the start of the release
chain: create pushes one, list and get read them, status shows every rule's
verdict on a version for each target of its deployment, force-deploy pins one
whatever the policies say.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("versions: want a subcommand (create, list, get, status, force-deploy)")
		},
	}
	var o releaseOpts
	var id, status, name, planEnv string
	var dryRun bool
	var planPage client.Page
	create := &cobra.Command{
		Use:   "create DEPLOYMENT TAG",
		Short: "Store a new version of a deployment and evaluate its targets",
		Long: `create stores a version of DEPLOYMENT tagged TAG (ready unless --status says
otherwise) and enqueues desired-release for every target of the deployment, so a
running ` + "`reconciler serve`" + ` rolls it out as far as the policies allow. With
--server it goes through that server's API (token scope write); with --dsn it
writes the database directly.

With --dry-run nothing is stored: it prints the version's plan, for each
target of the deployment (--environment's only) whether the version would be
chosen at once, the earliest time it may be (a rollout position, a window
opening, a soak ending; "-" when an approval or an upstream success must come
first), and what it waits for. -o json prints every rule's verdict.

Exit status: 0 created (or planned), 2 invalid input, 3 the id exists, 4 no
such deployment, 5 unauthorized, 1 anything else.`,
		Example: `  reconciler versions create web v1.4.2 --server http://127.0.0.1:8080 --token "$RECONCILER_TOKEN"
  reconciler versions create web v1.4.2 --dry-run --environment prod
  reconciler versions create web v1.4.2 --dsn "$RECONCILER_DSN"`,
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dryRun {
				return clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
					res, err := c.PlanVersion(ctx, api.VersionCreate{ID: id, DeploymentID: args[0], Tag: args[1], Name: name, Status: release.VersionStatus(status)}, planEnv, planPage)
					if err != nil {
						return err
					}
					defer nextPage(cmd, res.NextCursor)
					return show(cmd, o.output, res, "TARGET\tCHOSEN\tDECISION\tEARLIEST\tWAITS FOR", func() [][]string {
						rows := make([][]string, 0, len(res.Plan))
						for _, p := range res.Plan {
							chosen := "no"
							if p.Chosen {
								chosen = "yes"
							}
							rows = append(rows, []string{p.Target.Key(), chosen, string(p.Decision.Status), ts(p.Earliest), cmp.Or(p.WaitsFor, "-")})
						}
						return rows
					})
				})(cmd, args)
			}
			remote := func(ctx context.Context, c *client.Client) error {
				v, err := c.CreateVersion(ctx, api.VersionCreate{ID: id, DeploymentID: args[0], Tag: args[1], Name: name, Status: release.VersionStatus(status)})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "created version %s (%s) of %s\n", v.ID, v.Tag, v.DeploymentID)
				return nil
			}
			return o.withRemote(cmd, remote, func() error {
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
			})
		},
	}
	o.bind(create, true)
	create.Flags().BoolVar(&dryRun, "dry-run", false, "store nothing: print the version's plan for every target")
	create.Flags().StringVar(&planEnv, "environment", "", "with --dry-run: only this environment's targets")
	create.Flags().IntVar(&planPage.Limit, "limit", 100, "with --dry-run: most targets (1-1000)")
	create.Flags().StringVar(&planPage.Cursor, "cursor", "", "with --dry-run: continue a plan where the previous page ended")
	create.Flags().StringVar(&id, "id", "", "version id (default DEPLOYMENT-TAG)")
	create.Flags().StringVar(&name, "name", "", "human-readable name")
	create.Flags().StringVar(&status, "status", string(release.VersionReady), "building, ready, paused, rejected or failed")
	cmd.AddCommand(create, newVersionsListCmd("list"), newVersionsGetCmd("get"), newVersionsStatusCmd(), newForceDeployCmd())
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
force-deployed version wins where several apply. With --server it goes
through the API (token scope approve; the force is recorded as the token's
name); with --dsn it writes the database directly, recorded as
local:<operating-system user> ($USER), an offline action no token
authenticated.

Exit status: 0 forced, 2 invalid input, 4 no such version, 5 unauthorized,
1 anything else.`,
		Example: `  reconciler versions force-deploy web-v1.4.1 --environment prod --reason "roll back" --server http://127.0.0.1:8080
  reconciler versions force-deploy web-v1.4.1 --environment prod --dsn "$RECONCILER_DSN" --user alice`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			remote := func(ctx context.Context, c *client.Client) error {
				f := api.ForceDeployCreate{EnvironmentID: skip.EnvironmentID, ResourceID: skip.ResourceID, Reason: skip.Reason}
				if expires > 0 {
					f.ExpiresIn = expires.String()
				}
				s, err := c.ForceDeploy(ctx, args[0], f)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "force-deployed %s (skip %s)\n", s.VersionID, s.ID)
				return nil
			}
			return o.withRemote(cmd, remote, func() error { return o.forceDeploy(cmd, args[0], skip, expires) })
		},
	}
	o.bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&skip.EnvironmentID, "environment", "", "only this environment's targets")
	f.StringVar(&skip.ResourceID, "resource", "", "only this resource's targets")
	f.StringVar(&skip.Reason, "reason", "", "why, for the decision log and explain")
	durationRangeVar(f, &expires, "expires", 0, 0, 100*365*24*time.Hour, "end the force after this long (0: never)")
	return cmd
}

// forceDeploy force-deploys on the database.
func (o *releaseOpts) forceDeploy(cmd *cobra.Command, versionID string, skip release.PolicySkip, expires time.Duration) error {
	return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
		skip.VersionID = versionID
		skip.CreatedBy = localPrincipal()
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
}

// newApproveCmd records an approval.
func newApproveCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "approve VERSION ENVIRONMENT",
		Short: "Approve a version for an environment and re-evaluate its targets there",
		Long: `approve records an approval of VERSION in ENVIRONMENT (anyApproval rules
count distinct approvers) and enqueues desired-release for the version's targets
in that environment. ENVIRONMENT is an id or a name, resolved within the system
of the version's deployment: a name of no environment there is exit 4, a name
of several is exit 3, listing their ids. Approving twice keeps the first record. With --server it
goes through the API (token scope approve) and the approver is the token's
name; with --dsn it writes the database directly, and the approver is
local:<operating-system user> ($USER), an offline action no token
authenticated.

Exit status: 0 recorded (or already), 2 invalid input, 3 a name of several
environments, 4 no such version or environment (in the version's system), 5
unauthorized, 1 anything else.`,
		Example: `  reconciler approve web-v1.4.2 prod --server http://127.0.0.1:8080 --token "$RECONCILER_TOKEN"
  reconciler approve web-v1.4.2 prod --dsn "$RECONCILER_DSN"`,
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			report := func(who, env string, added bool) {
				if added {
					fmt.Fprintf(cmd.OutOrStdout(), "%s approved %s in environment %s\n", who, args[0], env)
				} else {
					fmt.Fprintf(cmd.OutOrStdout(), "%s had already approved %s in environment %s\n", who, args[0], env)
				}
			}
			remote := func(ctx context.Context, c *client.Client) error {
				a, err := c.Approve(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				report(a.Approval.User, a.Approval.EnvironmentID, a.Added)
				return nil
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
					user := localPrincipal()
					env, err := ch.ResolveEnvironment(ctx, args[0], args[1])
					if err != nil {
						return err
					}
					added, err := ch.Approve(ctx, release.Approval{VersionID: args[0], EnvironmentID: env, User: user})
					if err != nil {
						return err
					}
					report(user, env, added)
					return nil
				})
			})
		},
	}
	o.bind(cmd, false)
	return cmd
}

// newExplainCmd answers "why is this version (not) deploying here?".
func newExplainCmd() *cobra.Command {
	var o releaseOpts
	var limit int
	var history bool
	cmd := &cobra.Command{
		Use:   "explain DEPLOYMENT:ENVIRONMENT:RESOURCE",
		Short: "Show a release target's desired release and every rule's verdict per version",
		Long: `explain evaluates the policies for the target's newest versions, exactly as the
desired-release controller does, and prints each rule's verdict: the answer to
"why is this version not deploying?". It also says whether the target has
converged (its newest job is a successful job of its desired release) and, if
not, what it runs and what it waits for, and how each reference variable
resolves: the relationship rule and related resource used, or why it is
unresolved. It changes nothing. With --server it
asks that server's API (token scope read); with --dsn it reads the database
(one that lacks migrations exits 6: run ` + "`reconciler migrate up`" + `).

With --history it prints instead the target's newest recorded desired-release
decisions (at most 20 are kept, --limit of them, 0: all), newest first: when,
the chosen version, how, every rule's verdict, the policy revisions and the
trigger. -o json adds each decision's snapshot, which reconciler decide
replays to the same result (docs/target-decision-format.md).`,
		Example: `  reconciler explain web:prod:eu-1 --server http://127.0.0.1:8080
  reconciler explain web:prod:eu-1 -o json --limit 10 --dsn "$RECONCILER_DSN"
  reconciler explain web:prod:eu-1 --history --server http://127.0.0.1:8080`,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := release.ParseTargetKey(args[0])
			if err != nil {
				return usagef("target: %v (want DEPLOYMENT:ENVIRONMENT:RESOURCE)", err)
			}
			if limit < 0 {
				return usagef("--limit must not be negative")
			}
			show := func(ex *chain.Explanation) error {
				if ok, err := structured(cmd.OutOrStdout(), o.output, ex); ok {
					return err
				}
				_, err := io.WriteString(cmd.OutOrStdout(), explainText(ex))
				return err
			}
			if history {
				return explainHistory(cmd, &o, t, limit)
			}
			remote := func(ctx context.Context, c *client.Client) error {
				n := limit
				if n == 0 {
					n = 1000 // the server's most
				}
				ex, err := c.ExplainTarget(ctx, t.Key(), n)
				if err != nil {
					return err
				}
				return show(&ex)
			}
			return o.withRemote(cmd, remote, func() error {
				return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
					ex, err := ch.Explain(ctx, t, limit)
					if err != nil {
						return err
					}
					return show(&ex)
				})
			})
		},
	}
	o.bind(cmd, true)
	o.read = true
	intRangeVar(cmd.Flags(), &limit, "limit", 5, 0, 10_000, "newest versions to explain (0: all); with --history, newest decisions")
	cmd.Flags().BoolVar(&history, "history", false, "print the target's newest recorded decisions instead")
	return cmd
}

// explainHistory prints the target's newest recorded decisions.
func explainHistory(cmd *cobra.Command, o *releaseOpts, t release.ReleaseTarget, limit int) error {
	if limit > ports.TargetDecisionsKept {
		limit = ports.TargetDecisionsKept
	}
	show := func(ds []ports.TargetDecision) error {
		if ok, err := structured(cmd.OutOrStdout(), o.output, ds); ok {
			return err
		}
		_, err := io.WriteString(cmd.OutOrStdout(), historyText(t, ds))
		return err
	}
	remote := func(ctx context.Context, c *client.Client) error {
		ds, err := c.TargetDecisions(ctx, t.Key(), limit)
		if err != nil {
			return err
		}
		return show(ds)
	}
	return o.withRemote(cmd, remote, func() error {
		return o.run(cmd, func(ctx context.Context, ch *chain.Chain) error {
			if _, err := ch.Store.TargetGet(ctx, t); err != nil {
				return err
			}
			ds, err := ch.Store.TargetDecisions(ctx, t, limit)
			if err != nil {
				return err
			}
			return show(ds)
		})
	})
}

// historyText renders a target's decision history for people.
func historyText(t release.ReleaseTarget, ds []ports.TargetDecision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "target %s: %d decisions (newest first)\n", t, len(ds))
	for _, d := range ds {
		what := "no release"
		if d.Tag != "" {
			what = "version " + d.Tag
		}
		fmt.Fprintf(&b, "#%d %s  %s (%s)  policies: %s  trigger: %s\n", d.Seq, d.At.UTC().Format(time.RFC3339), what, d.How,
			policyRevisions(d.Policies), d.Trigger)
		for _, r := range d.Reasons {
			fmt.Fprintf(&b, "    %s\n", r)
		}
		for _, rv := range d.Verdicts {
			fmt.Fprintf(&b, "    %-20s %-8s %s\n", ruleName(&rv), rv.Status, rv.Message)
		}
	}
	return b.String()
}

// policyRevisions renders policy revisions as "a@r2, b@r1", or "none".
func policyRevisions(ps []release.PolicyRevision) string {
	if len(ps) == 0 {
		return "none"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
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
		fmt.Fprintf(&b, "  decided with policies: %s\n", policyRevisions(ex.DecidedWith))
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
	fmt.Fprintf(&b, "policies now: %s\n", policyRevisions(ex.Policies))
	if len(ex.Relations) > 0 {
		b.WriteString("relations (reference variables):\n")
		for _, r := range ex.Relations {
			ref := r.Reference + "." + strings.Join(r.Path, ".")
			switch {
			case r.Unresolved != "" && r.Rule == "":
				fmt.Fprintf(&b, "  %s = %s: unresolved: %s\n", r.Variable, ref, r.Unresolved)
			case r.Unresolved != "":
				fmt.Fprintf(&b, "  %s = %s: rule %s, resource %s: unresolved: %s\n", r.Variable, ref, r.Rule, r.ResourceID, r.Unresolved)
			default:
				fmt.Fprintf(&b, "  %s = %s: rule %s, resource %s\n", r.Variable, ref, r.Rule, r.ResourceID)
			}
		}
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
			name := ruleName(&rv)
			skipped := ""
			if rv.Skipped {
				skipped = " (skipped)"
			}
			fmt.Fprintf(&b, "    %-20s %-8s %s%s\n", name, rv.Status, rv.Message, skipped)
		}
	}
	return b.String()
}

// ruleName names a verdict's rule: its id, or its policy's.
func ruleName(rv *policy.RuleVerdict) string {
	if rv.RuleID != "" {
		return rv.RuleID
	}
	return "policy " + rv.PolicyID
}
