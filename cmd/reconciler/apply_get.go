package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/apply"
)

// documentKinds are the kinds `get` and `delete` read as documents: the
// command name, its aliases and the document kind.
var documentKinds = []struct {
	use     string
	aliases []string
	kind    string
}{
	{"workspaces", []string{"workspace"}, "Workspace"},
	{"systems", []string{"system"}, "System"},
	{"variable-sets", []string{"variable-set", "variablesets", "variableset"}, "VariableSet"},
	{"deployments", []string{"deployment"}, "Deployment"},
	{"environments", []string{"environment"}, "Environment"},
	{"resources", []string{"resource"}, "Resource"},
	{"relationship-rules", []string{"relationship-rule", "relationshiprules", "relationshiprule"}, "RelationshipRule"},
	{"job-agents", []string{"job-agent", "jobagents", "jobagent"}, "JobAgent"},
	{"policies", []string{"policy"}, "Policy"},
}

// documentGetCmds are `get KIND [NAME]`; sub builds a subcommand bound to
// the get flags.
func documentGetCmds(output *string, sub func(use, short string, args cobra.PositionalArgs, fn func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error) *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, k := range documentKinds {
		c := sub(k.use+" [NAME]", "Read "+k.use+" as the documents `apply` takes (-o yaml round-trips)", cobra.MaximumNArgs(1),
			func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
				var docs []apply.Document
				if len(args) == 1 {
					d, err := c.Document(ctx, k.kind, args[0])
					if err != nil {
						return err
					}
					docs = []apply.Document{d}
				} else {
					var err error
					if docs, err = c.Documents(ctx, k.kind); err != nil {
						return err
					}
				}
				return printDocuments(cmd.OutOrStdout(), *output, docs, len(args) == 1)
			})
		c.Aliases = k.aliases
		out = append(out, c)
	}
	return out
}

// printDocuments prints documents: -o yaml as a stream (---), -o json as
// one object (one) or a list, else a table of names and parents.
func printDocuments(w io.Writer, output string, docs []apply.Document, one bool) error {
	switch output {
	case "yaml":
		var b strings.Builder
		for i, d := range docs {
			j, err := json.Marshal(d)
			if err != nil {
				return fmt.Errorf("encode %s %s: %w", d.Kind, d.Metadata.Name, err)
			}
			y, err := yaml.JSONToYAML(j)
			if err != nil {
				return fmt.Errorf("encode %s %s: %w", d.Kind, d.Metadata.Name, err)
			}
			if i > 0 {
				b.WriteString("---\n")
			}
			b.Write(y)
		}
		_, err := io.WriteString(w, b.String())
		return err
	case "json":
		var v any = docs
		if one && len(docs) == 1 {
			v = docs[0]
		}
		_, err := structured(w, output, v)
		return err
	}
	rows := make([][]string, 0, len(docs))
	for _, d := range docs {
		parent := "-"
		switch {
		case d.Metadata.Workspace != "":
			parent = "workspace " + d.Metadata.Workspace
		case d.Metadata.System != "":
			parent = "system " + d.Metadata.System
		}
		name, _ := d.Spec["name"].(string)
		rows = append(rows, []string{d.Metadata.Name, name, parent})
	}
	return table(w, "NAME\tDISPLAY NAME\tPARENT", rows)
}

func newDeleteCmd() *cobra.Command {
	var o releaseOpts
	cmd := &cobra.Command{
		Use:   "delete KIND NAME",
		Short: "Delete a workspace, system, variable set, deployment, environment, resource, relationship rule, job agent or policy",
		Long: `delete removes one object with its release targets, in one transaction. It
never cascades: an object others depend on (a system's deployments, a
deployment's versions, a job agent a deployment names) is refused as a conflict.
KIND is workspace, system, variable-set, deployment, environment, resource,
relationship-rule, job-agent or policy (plural accepted). With --server through that server's API (token scope
write); with --dsn through the same API served in this process.

Exit status: 0 deleted, 2 bad input (an unknown kind), 3 still in use, 4 not
found, 5 unauthorized.`,
		Example: `  reconciler delete deployment web --server http://127.0.0.1:8080 --token "$RECONCILER_TOKEN"`,
		Args:    argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, err := apply.ParseKind(args[0])
			if err != nil {
				return usagef("delete: %v", err)
			}
			return clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, args []string) error {
				if err := c.DeleteDocument(ctx, kind, args[1]); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted\n", strings.ToLower(kind), args[1])
				return err
			})(cmd, args)
		},
	}
	o.bind(cmd, false)
	return cmd
}
