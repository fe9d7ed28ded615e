package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// newCatalogListCmd builds `catalog list`.
func newCatalogListCmd(o *catalogOpts) *cobra.Command {
	var (
		kind, name string
		lifecycles []string
	)
	cmd := &cobra.Command{
		Use:   "list [--kind KIND] [--name NAME] [--lifecycle L,...]",
		Short: "List revisions, published ones by number, then open drafts",
		Long: `list shows every revision matching the filters, one per line: published
ones by number, then each object's open draft, with the version the next
change must name. No match prints "no revisions match" on stderr (exit 0).
` + catalogExitHelp,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := ports.CatalogListParams{Kind: revision.Kind(kind), Name: name}
			if kind != "" && !p.Kind.Valid() {
				return usagef("--kind: %q is not a catalog kind: want workflow-template or policy", kind)
			}
			for _, l := range lifecycles {
				lc := revision.Lifecycle(l)
				if !lc.Valid() {
					return usagef("--lifecycle: %q is not a lifecycle: want draft, proposed, published or deletion-proposed", l)
				}
				p.Lifecycles = append(p.Lifecycles, lc)
			}
			return o.run(cmd, revision.Object{}, func(ctx context.Context, s *catalogSession) error {
				rs, err := s.svc.List(ctx, p)
				if err != nil {
					return err
				}
				if s.json {
					if rs == nil {
						rs = []ports.Revision{} // [] rather than null
					}
					return writeJSON(s.out, rs)
				}
				if len(rs) == 0 {
					_, err := fmt.Fprintln(s.errOut, "no revisions match")
					return err
				}
				return writeTable(s.out, rs)
			})
		},
	}
	cmd.Flags().StringVar(&kind, "kind", "", "only this kind: workflow-template or policy")
	cmd.Flags().StringVar(&name, "name", "", "only objects with this name")
	cmd.Flags().StringSliceVar(&lifecycles, "lifecycle", nil, "only these lifecycles (comma-separated): draft, proposed, published, deletion-proposed")
	return cmd
}

// writeTable writes revisions as an aligned table.
func writeTable(out io.Writer, rs []ports.Revision) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OBJECT\tREVISION\tLIFECYCLE\tVERSION\tID\tUPDATED\tLABELS")
	for _, r := range rs {
		number := "-"
		if r.Revision > 0 {
			number = strconv.Itoa(r.Revision)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Object(), number, r.Lifecycle, r.Version, r.ID,
			r.UpdatedAt.UTC().Format(time.RFC3339), joinLabels(r.Labels))
	}
	return w.Flush()
}

// joinLabels renders labels as sorted key=value pairs.
func joinLabels(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ",")
}

// newCatalogGetCmd builds `catalog get`.
func newCatalogGetCmd(o *catalogOpts) *cobra.Command {
	var (
		number    int
		published bool
	)
	cmd := &cobra.Command{
		Use:   "get KIND/NAME [--revision N | --published]",
		Short: "Show one revision: the open draft, else the latest published",
		Long: `get shows one revision of an object with its version, which the next change
must name.

Without flags it shows the open draft (draft or proposed) if there is one,
else the latest published revision (else, for an object whose every
revision is up for deletion, the newest of those). --revision N shows
published revision N; --published shows the latest published revision even
when a draft is open.

-o content prints only the stored document (JSON), ready to edit and pass
back with ` + "`catalog edit -f`" + `.
` + catalogExitHelp,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if err := checkRevisionFlag(cmd, number); err != nil {
				return err
			}
			if published && number != 0 {
				return usagef("get: --revision and --published exclude each other")
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				var r ports.Revision
				var err error
				if published {
					r, err = s.svc.LatestPublished(ctx, obj)
				} else {
					r, err = s.target(ctx, obj, number)
				}
				if err != nil {
					return err
				}
				switch {
				case o.output == "content":
					_, err = fmt.Fprintf(s.out, "%s\n", r.Content)
					return err
				case s.json:
					return writeJSON(s.out, r)
				}
				return writeRevision(s.out, r)
			})
		},
	}
	revisionFlag(cmd, &number, "show published revision N")
	cmd.Flags().BoolVar(&published, "published", false, "show the latest published revision even when a draft is open")
	return cmd
}

// writeRevision writes one revision as readable text, its content as YAML.
func writeRevision(out io.Writer, r ports.Revision) error {
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	fmt.Fprintf(w, "object:\t%s\n", r.Object())
	if r.Revision > 0 {
		fmt.Fprintf(w, "revision:\t%d\n", r.Revision)
	} else {
		fmt.Fprintf(w, "revision:\t- (unpublished)\n")
	}
	fmt.Fprintf(w, "lifecycle:\t%s\n", r.Lifecycle)
	fmt.Fprintf(w, "version:\t%d\n", r.Version)
	fmt.Fprintf(w, "id:\t%s\n", r.ID)
	if r.CreatedBy != "" {
		fmt.Fprintf(w, "created by:\t%s\n", r.CreatedBy)
	}
	if r.EditedBy != "" {
		fmt.Fprintf(w, "edited by:\t%s\n", r.EditedBy)
	}
	if r.ApprovedBy != "" {
		fmt.Fprintf(w, "approved by:\t%s\n", r.ApprovedBy)
	}
	if !r.PublishedAt.IsZero() {
		fmt.Fprintf(w, "published:\t%s\n", r.PublishedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "created:\t%s\n", r.CreatedAt.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "updated:\t%s\n", r.UpdatedAt.UTC().Format(time.RFC3339))
	if len(r.Labels) > 0 {
		fmt.Fprintf(w, "labels:\t%s\n", joinLabels(r.Labels))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
		fmt.Fprintf(w, "annotation:\t%s=%s\n", k, r.Annotations[k])
	}
	if err := w.Flush(); err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(r.Content)
	if err != nil {
		return fmt.Errorf("render content: %w", err)
	}
	_, err = fmt.Fprintf(out, "content:\n  %s\n", strings.ReplaceAll(strings.TrimRight(string(y), "\n"), "\n", "\n  "))
	return err
}
