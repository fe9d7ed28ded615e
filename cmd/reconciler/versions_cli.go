package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// versionRows renders versions for a table.
func versionRows(vs ...release.DeploymentVersion) [][]string {
	rows := make([][]string, 0, len(vs))
	for _, v := range vs {
		rows = append(rows, []string{v.ID, v.Tag, string(v.Status), ts(v.CreatedAt)})
	}
	return rows
}

const versionHeader = "ID\tTAG\tSTATUS\tCREATED"

// newVersionsListCmd lists a deployment's versions (versions list, get versions).
func newVersionsListCmd(use string) *cobra.Command {
	var o releaseOpts
	var page client.Page
	var deployment string
	cmd := &cobra.Command{
		Use:   use + " --deployment DEPLOYMENT",
		Short: "List a deployment's versions, newest first",
		Args:  argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			if deployment == "" {
				return usagef("%s: --deployment is required", use)
			}
			p, err := c.ListVersions(ctx, deployment, page)
			if err != nil {
				return err
			}
			defer nextPage(cmd, p.NextCursor)
			return show(cmd, o.output, p, versionHeader, func() [][]string { return versionRows(p.Items...) })
		}),
	}
	o.bind(cmd, true)
	cmd.Flags().StringVar(&deployment, "deployment", "", "the deployment (required)")
	cmd.Flags().IntVar(&page.Limit, "limit", 100, "most items (1-1000)")
	cmd.Flags().StringVar(&page.Cursor, "cursor", "", "continue a list where the previous page ended")
	return cmd
}

// newVersionsGetCmd reads one version (versions get, get version).
func newVersionsGetCmd(use string) *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   use + " ID",
		Short: "Read one deployment version",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			v, err := c.GetVersion(ctx, args[0])
			if err != nil {
				return err
			}
			return show(cmd, o.output, v, versionHeader, func() [][]string { return versionRows(v) })
		}),
	}
	o.bind(cmd, true)
	return cmd
}

// newVersionsStatusCmd shows where a version stands on each target of its
// deployment: the policies' decision and the rule that holds it.
func newVersionsStatusCmd() *cobra.Command {
	var o releaseOpts
	var page client.Page
	var environment string
	cmd := &cobra.Command{
		Use:   "status ID [--environment ENV]",
		Short: "Every target of a version's deployment: allowed, pending or denied, and the rule that holds it",
		Long: `status lists, for each release target of the version's deployment (only
--environment's with it), the policies' decision on the version there, the
rule that blocks or holds it with its message, and the force-deploy pinning it
if one does. Token scope read.`,
		Example: `  reconciler versions status web-v1.4.2 --environment prod --server http://127.0.0.1:8080`,
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			p, err := c.ExplainVersion(ctx, args[0], environment, page)
			if err != nil {
				return err
			}
			defer nextPage(cmd, p.NextCursor)
			return show(cmd, o.output, p, "TARGET\tDECISION\tRULE\tMESSAGE", func() [][]string {
				rows := make([][]string, 0, len(p.Items))
				for _, it := range p.Items {
					rule, msg := "-", "-"
					if b := it.Decision.Blocking; b.PolicyID != "" {
						rule, msg = b.PolicyID+"/"+b.RuleID, b.Message
					}
					if it.Forced != "" {
						rule, msg = "force-deploy", it.Forced
					}
					rows = append(rows, []string{it.Target.Key(), string(it.Decision.Status), rule, msg})
				}
				return rows
			})
		}),
	}
	o.bind(cmd, true)
	cmd.Flags().StringVar(&environment, "environment", "", "only this environment's targets")
	cmd.Flags().IntVar(&page.Limit, "limit", 100, "most targets (1-1000)")
	cmd.Flags().StringVar(&page.Cursor, "cursor", "", "continue a list where the previous page ended")
	return cmd
}
