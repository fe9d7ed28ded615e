package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api/client"
)

// completeNames is a completion of a command's first argument: the names
// list reads through the API (--server with --token, or in process on
// --dsn, as the command itself would), those starting with what was typed.
// It completes nothing, and no file names, when no API is reachable.
func completeNames(o *releaseOpts, list func(ctx context.Context, c *client.Client) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, closeFn, err := o.apiClient(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		defer closeFn()
		names, err := list(cmd.Context(), c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTargets lists the first page (up to 1000) of release target keys.
func completeTargets(ctx context.Context, c *client.Client) ([]string, error) {
	p, err := c.ListTargets(ctx, client.TargetFilter{}, client.Page{Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(p.Items))
	for i, t := range p.Items {
		out[i] = t.Target.Key()
	}
	return out, nil
}

// completeWorkflows lists the first page (up to 1000) of workflow ids.
func completeWorkflows(ctx context.Context, c *client.Client) ([]string, error) {
	p, err := c.ListWorkflows(ctx, client.Page{Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]string, len(p.Items))
	for i, w := range p.Items {
		out[i] = w.ID
	}
	return out, nil
}
