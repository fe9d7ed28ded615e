package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// newCatalogPlanCmd builds `catalog plan`.
func newCatalogPlanCmd(o *catalogOpts) *cobra.Command {
	var number int
	cmd := &cobra.Command{
		Use:     "plan policy/NAME [--revision N]",
		Aliases: []string{"diff"},
		Short:   "Show what publishing a policy's open draft or proposal would change",
		Long: `plan shows, before anyone approves it, what publishing a policy revision
would change against the published one: for every release target it
affects, the gating rules (approval, window, progression, rollout,
verification; as policy/rule, type and policy revision) that start (+) or
stop (-) applying, and its desired release before (decided with the
published revisions) and after (decided by the release chain with this
revision in place, as apply --dry-run decides it: "desired: v1 (release …)
-> no release"); a target whose gates stay but whose release moves (e.g. a
rollback or concurrency rule) is listed too. The revision planned is the one get shows: the open draft
or proposal, else the latest published; --revision N plans published
revision N. Its own rules carry revision 0, as it has no number until it is
published. Nothing is written; -o json prints the plan as the API's
GET /api/v1/catalog/policy/{name}/revisions/{id}/plan does. catalog diff
is the same command.
` + catalogExitHelp,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if obj.Kind != revision.KindPolicy {
				return usagef("plan: %s: only a policy's revisions change gates", args[0])
			}
			if err := checkRevisionFlag(cmd, number); err != nil {
				return err
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				r, err := s.target(ctx, obj, number)
				if err != nil {
					return err
				}
				d, err := s.plan(ctx, r)
				if err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, d)
				}
				var b strings.Builder
				printPlan(&b, &d)
				_, err = s.out.Write([]byte(b.String()))
				return err
			})
		},
	}
	cmd.Flags().IntVar(&number, "revision", 0, "plan published revision N instead of the open draft")
	return cmd
}
