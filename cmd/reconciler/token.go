package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
)

// loopback reports whether a listen address is on a loopback interface.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// printAdminToken issues the in-memory daemon's admin token and prints it
// once; it lives as long as the process.
func printAdminToken(ctx context.Context, out io.Writer, tokens ports.Tokens, clock ports.Clock) error {
	_, secret, err := api.IssueToken(ctx, tokens, clock, "admin", []ports.Scope{ports.ScopeAdmin})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "API admin token (valid while this process runs; shown once):\n  export RECONCILER_TOKEN=%s\n", secret)
	return err
}

// newTokenCmd groups the API token commands.
func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke API tokens (through the API; stored hashed)",
		Long: `token administers the bearer tokens of the API that ` + "`reconciler serve`" + ` serves
under /api/v1. A token has a name (recorded as the author of what it does:
approvals, force-deploys, cancellations) and scopes: read, write, approve,
agent, admin (admin grants every scope). Only a hash of each token is stored,
so its secret is printed once, by create.

With --server (a token of scope admin) the commands go through the API of a
running server; with --dsn (or RECONCILER_DSN), through the same API served in
this process over that database. The in-memory daemon keeps its own tokens:
it prints a fresh admin token when it starts.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usagef("token: want a subcommand (create, list, revoke)")
		},
	}
	cmd.AddCommand(newTokenCreateCmd(), newTokenListCmd(), newTokenRevokeCmd())
	return cmd
}

func newTokenCreateCmd() *cobra.Command {
	var o releaseOpts
	var name string
	var scopes []string
	var expires time.Duration
	var agents []string
	cmd := &cobra.Command{
		Use:   "create --name NAME --scope SCOPE... [--agent ID...] [--expires DURATION]",
		Short: "Create a token and print its secret once (token scope admin)",
		Long: `create stores a new token named NAME with the given scopes (read, write,
approve, agent, admin; repeat --scope or separate with commas) and prints its
secret, which is not stored and cannot be shown again. A token of scope
agent must name the job agents it acts for with --agent ID[,ID] (repeatable):
it takes, heartbeats and reports only their jobs. With --expires the
token is refused (401, "expired") from that long after its creation on;
without it, it is valid until revoked. -o json or yaml prints the token record
with the secret.`,
		Example: `  reconciler token create --name ci --scope read,write --expires 720h --dsn "$RECONCILER_DSN"
  reconciler token create --name deploy-agent --scope agent --agent deployer --server http://127.0.0.1:8080`,
		Args: argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			req := api.TokenCreate{Name: name}
			for _, s := range scopes {
				for _, one := range strings.Split(s, ",") {
					if one = strings.TrimSpace(one); !ports.Scope(one).Valid() {
						return usagef("--scope %q: want read, write, approve, agent or admin", one)
					}
					req.Scopes = append(req.Scopes, ports.Scope(one))
				}
			}
			for _, a := range agents {
				for _, one := range strings.Split(a, ",") {
					req.Agents = append(req.Agents, strings.TrimSpace(one))
				}
			}
			if len(req.Agents) > 0 && (!slices.Contains(req.Scopes, ports.ScopeAgent) || slices.Contains(req.Scopes, ports.ScopeAdmin)) {
				return usagef("token create: --agent is only for a token of --scope agent (without admin)")
			}
			if slices.Contains(req.Scopes, ports.ScopeAgent) && !slices.Contains(req.Scopes, ports.ScopeAdmin) && len(req.Agents) == 0 {
				return usagef("token create: --scope agent needs --agent ID[,ID]: the job agents the token acts for")
			}
			if name == "" || len(req.Scopes) == 0 {
				return usagef("token create: --name and at least one --scope are required")
			}
			if expires > 0 {
				req.ExpiresIn = expires.String()
			}
			created, err := c.CreateToken(ctx, req)
			if err != nil {
				return err
			}
			if ok, err := structured(cmd.OutOrStdout(), o.output, created); ok {
				return err
			}
			t := created.Token
			until := ""
			if !t.ExpiresAt.IsZero() {
				until = ", expires " + t.ExpiresAt.Format(time.RFC3339)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created token %s (%s, scopes %s%s); its secret, shown once:\n%s\n", t.ID, t.Name, joinScopes(t.Scopes), until, created.Secret)
			return nil
		}),
	}
	o.bind(cmd, true)
	cmd.Flags().StringVar(&name, "name", "", "whose token: recorded as the author of what it does")
	cmd.Flags().StringSliceVar(&scopes, "scope", nil, "read, write, approve, agent or admin; repeat for several")
	cmd.Flags().StringSliceVar(&agents, "agent", nil, "with --scope agent (required there): a job agent id the token acts for; repeat or separate with commas")
	durationRangeVar(cmd.Flags(), &expires, "expires", 0, 0, api.MaxTokenLifetime, "how long the token is valid (e.g. 720h); 0: until revoked")
	return cmd
}

func newTokenListCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tokens, never their secrets (token scope admin)",
		Args:  argsUsage(cobra.NoArgs),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
			list, err := c.ListTokens(ctx)
			if err != nil {
				return err
			}
			return show(cmd, o.output, list, "ID\tNAME\tSCOPES\tCREATED\tEXPIRES\tREVOKED", func() [][]string {
				now := ports.SystemClock.Now()
				rows := make([][]string, 0, len(list))
				for _, t := range list {
					expires := ts(t.ExpiresAt)
					if t.Expired(now) {
						expires += " (expired)"
					}
					rows = append(rows, []string{t.ID, t.Name, joinScopes(t.Scopes), ts(t.CreatedAt), expires, ts(t.RevokedAt)})
				}
				return rows
			})
		}),
	}
	o.bind(cmd, true)
	return cmd
}

func newTokenRevokeCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: every later request with it is refused (401) (token scope admin)",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
			if err := c.RevokeToken(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked token %s\n", args[0])
			return nil
		}),
	}
	o.bind(cmd, false)
	return cmd
}

func joinScopes(s []ports.Scope) string {
	out := make([]string, len(s))
	for i := range s {
		out[i] = string(s[i])
	}
	return strings.Join(out, ",")
}
