package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// newCatalogCreateCmd builds `catalog create`.
func newCatalogCreateCmd(o *catalogOpts) *cobra.Command {
	var (
		file string
		from int
	)
	cmd := &cobra.Command{
		Use:   "create KIND/NAME (-f FILE | --from N)",
		Short: "Start a draft from a document, or from a published revision",
		Long: `create starts a new draft of an object, new or already published. The
document comes from -f FILE (YAML or JSON; -f - reads stdin) or, with
--from N, is a copy of published revision N to edit further.

A workflow template is checked in full (every problem is listed with its
field and line) and its metadata.name must be the object's NAME; a policy
is decoded strictly and its rules checked. An object has at most one open
draft: creating a second is a conflict.
` + catalogExitHelp,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if err := checkFromFlag(cmd, file, from); err != nil {
				return err
			}
			var content json.RawMessage
			if file != "" {
				if content, err = readDocument(cmd, obj, file); err != nil {
					return classify(obj, err)
				}
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				r, err := s.svc.Create(ctx, catalog.CreateParams{Kind: obj.Kind, Name: obj.Name, Content: content, From: from, By: localPrincipal()})
				if err != nil {
					return err
				}
				return s.changed("created", r)
			})
		},
	}
	fileFlag(cmd, &file)
	cmd.Flags().IntVar(&from, "from", 0, "start from the content of published revision N instead of -f")
	return cmd
}

// checkFromFlag requires exactly one of -f and --from.
func checkFromFlag(cmd *cobra.Command, file string, from int) error {
	fromSet := cmd.Flags().Changed("from")
	switch {
	case file != "" && fromSet:
		return usagef("create: give -f FILE or --from N, not both")
	case file == "" && !fromSet:
		return usagef("create: the document is missing: give -f FILE (YAML or JSON, - for stdin) or --from N")
	case fromSet && from <= 0:
		return usagef("create: --from must be a published revision number (1, 2, ...), got %d", from)
	}
	return nil
}

// newCatalogEditCmd builds `catalog edit`.
func newCatalogEditCmd(o *catalogOpts) *cobra.Command {
	var (
		file    string
		version int64
	)
	cmd := &cobra.Command{
		Use:   "edit KIND/NAME -f FILE --version N",
		Short: "Replace the content of the open draft",
		Long: `edit replaces the content of the object's open draft (draft or proposed)
with -f FILE (YAML or JSON; -f - reads stdin). --version must be the
draft's current version: if anyone changed the draft since you read it, or
is changing it right now, the edit is refused as a conflict and nothing is
written. The document is checked as create checks it.
` + catalogExitHelp,
		Args: argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if err := requireVersion(cmd, obj, version); err != nil {
				return err
			}
			if file == "" {
				return usagef("edit %s: the document is missing: give -f FILE (YAML or JSON, - for stdin)", obj)
			}
			content, err := readDocument(cmd, obj, file)
			if err != nil {
				return classify(obj, err)
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				d, err := s.openDraft(ctx, obj)
				if err != nil {
					return err
				}
				r, err := s.svc.Edit(ctx, catalog.EditParams{Ref: d.Ref(), Version: version, Content: content, By: localPrincipal()})
				if err != nil {
					return err
				}
				return s.changed("edited", r)
			})
		},
	}
	fileFlag(cmd, &file)
	versionFlag(cmd, &version)
	return cmd
}

// fileFlag binds -f/--file.
func fileFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "file", "f", "", "the document, YAML or JSON; - reads stdin")
}

// draftOp is a lifecycle change of the open draft.
type draftOp struct {
	name, short, long, verb string
	// flags binds extra flags; check validates them before the database
	// is opened.
	flags func(cmd *cobra.Command)
	check func(obj revision.Object) error
	apply func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error)
}

// newDraftOpCmd builds a command that changes the open draft at --version.
func newDraftOpCmd(o *catalogOpts, op draftOp) *cobra.Command {
	var version int64
	cmd := &cobra.Command{
		Use:   op.name + " KIND/NAME --version N",
		Short: op.short,
		Long:  op.long + "\n" + catalogExitHelp,
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if err := requireVersion(cmd, obj, version); err != nil {
				return err
			}
			if op.check != nil {
				if err := op.check(obj); err != nil {
					return err
				}
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				d, err := s.openDraft(ctx, obj)
				if err != nil {
					return err
				}
				r, err := op.apply(ctx, s, catalog.Change{Ref: d.Ref(), Version: version})
				if err != nil {
					return err
				}
				return s.changed(op.verb, r)
			})
		},
	}
	versionFlag(cmd, &version)
	if op.flags != nil {
		op.flags(cmd)
	}
	return cmd
}

// newCatalogProposeCmd builds `catalog propose`.
func newCatalogProposeCmd(o *catalogOpts) *cobra.Command {
	return newDraftOpCmd(o, draftOp{
		name: "propose", verb: "proposed", short: "Propose the open draft for review",
		long: "propose moves the object's draft to proposed, ready for approve or reject.\nIts content is checked again and stays editable.",
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.Propose(ctx, c)
		},
	})
}

// newCatalogUnproposeCmd builds `catalog unpropose`.
func newCatalogUnproposeCmd(o *catalogOpts) *cobra.Command {
	return newDraftOpCmd(o, draftOp{
		name: "unpropose", verb: "unproposed", short: "Take the proposed draft back to draft",
		long: "unpropose moves the object's proposed draft back to draft, for more work.",
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.Unpropose(ctx, c)
		},
	})
}

// newCatalogApproveCmd builds `catalog approve`.
func newCatalogApproveCmd(o *catalogOpts) *cobra.Command {
	return newDraftOpCmd(o, draftOp{
		name: "approve", verb: "approved", short: "Publish the proposed draft as the next revision",
		long: `approve publishes the object's proposed draft: it becomes the next numbered
revision, immutable from then on, recording the approver: the token's name
with --server, local:<operating-system user> ($USER) with --dsn, an offline
action no token authenticated. Only a proposed draft can be approved.`,
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.Approve(ctx, catalog.ApproveParams{Ref: c.Ref, Version: c.Version, Approver: localPrincipal()})
		},
	})
}

// newCatalogRejectCmd builds `catalog reject`.
func newCatalogRejectCmd(o *catalogOpts) *cobra.Command {
	var reason string
	return newDraftOpCmd(o, draftOp{
		name: "reject", verb: "rejected", short: "Send the proposed draft back to draft with a reason",
		long: "reject sends the object's proposed draft back to draft, recording --reason as\nthe " +
			catalog.AnnotationRejectReason + " annotation (approve removes it).",
		flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&reason, "reason", "", "why the draft is rejected (required)")
		},
		check: func(obj revision.Object) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("reject %s: --reason is required", obj)
			}
			return nil
		},
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.Reject(ctx, catalog.RejectParams{Ref: c.Ref, Version: c.Version, Reason: reason})
		},
	})
}

// publishedOp is a lifecycle change of a published revision.
type publishedOp struct {
	name, short, long, verb string
	apply                   func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error)
}

// newPublishedOpCmd builds a command that changes published revision
// --revision at --version.
func newPublishedOpCmd(o *catalogOpts, op publishedOp) *cobra.Command {
	var (
		version int64
		number  int
	)
	cmd := &cobra.Command{
		Use:   op.name + " KIND/NAME --revision N --version V",
		Short: op.short,
		Long:  op.long + "\n" + catalogExitHelp,
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("revision") {
				return usagef("%s %s: --revision is required: the published revision number (see `reconciler catalog list --name %s`)", op.name, obj, obj.Name)
			}
			if err := checkRevisionFlag(cmd, number); err != nil {
				return err
			}
			if err := requireVersion(cmd, obj, version); err != nil {
				return err
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				cur, err := s.svc.GetRevision(ctx, obj, number)
				if err != nil {
					return err
				}
				r, err := op.apply(ctx, s, catalog.Change{Ref: cur.Ref(), Version: version})
				if err != nil {
					return err
				}
				return s.changed(op.verb, r)
			})
		},
	}
	versionFlag(cmd, &version)
	revisionFlag(cmd, &number, "the published revision number (required)")
	return cmd
}

// newCatalogProposeDeleteCmd builds `catalog propose-delete`.
func newCatalogProposeDeleteCmd(o *catalogOpts) *cobra.Command {
	return newPublishedOpCmd(o, publishedOp{
		name: "propose-delete", verb: "proposed deletion of", short: "Mark a published revision for deletion",
		long: "propose-delete marks published revision --revision for deletion: new work\nstops using it, work that pinned it keeps it. delete then removes it;\nundo-propose-delete restores it.",
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.ProposeDelete(ctx, c)
		},
	})
}

// newCatalogUndoProposeDeleteCmd builds `catalog undo-propose-delete`.
func newCatalogUndoProposeDeleteCmd(o *catalogOpts) *cobra.Command {
	return newPublishedOpCmd(o, publishedOp{
		name: "undo-propose-delete", verb: "restored", short: "Return a revision marked for deletion to published",
		long: "undo-propose-delete returns revision --revision, marked for deletion, to published.",
		apply: func(ctx context.Context, s *catalogSession, c catalog.Change) (ports.Revision, error) {
			return s.svc.UndoProposeDelete(ctx, c)
		},
	})
}

// newCatalogDeleteCmd builds `catalog delete`.
func newCatalogDeleteCmd(o *catalogOpts) *cobra.Command {
	var (
		version int64
		number  int
	)
	cmd := &cobra.Command{
		Use:   "delete KIND/NAME [--revision N] --version V",
		Short: "Delete the open draft, or a revision marked for deletion",
		Long: `delete removes the object's open draft (draft or proposed), or with
--revision N published revision N once it is marked for deletion
(propose-delete). A published revision is never deleted directly.
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
			if err := requireVersion(cmd, obj, version); err != nil {
				return err
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				var cur ports.Revision
				var err error
				if number > 0 {
					cur, err = s.svc.GetRevision(ctx, obj, number)
				} else {
					cur, err = s.openDraft(ctx, obj)
				}
				if err != nil {
					return err
				}
				if err := s.svc.Delete(ctx, catalog.Change{Ref: cur.Ref(), Version: version}); err != nil {
					return err
				}
				if s.json {
					return writeJSON(s.out, deleted{Kind: cur.Kind, Name: cur.Name, ID: cur.ID, Revision: cur.Revision, Deleted: true})
				}
				cur.Version = version
				_, err = fmt.Fprintf(s.out, "deleted %s: %s\n", obj, describe(cur))
				return err
			})
		},
	}
	versionFlag(cmd, &version)
	revisionFlag(cmd, &number, "delete published revision N (marked for deletion) instead of the open draft")
	return cmd
}

// deleted is the JSON report of a deletion.
type deleted struct {
	Kind     revision.Kind `json:"kind"`
	Name     string        `json:"name"`
	ID       string        `json:"id"`
	Revision int           `json:"revision"`
	Deleted  bool          `json:"deleted"`
}

// newCatalogLabelCmd builds `catalog label`.
func newCatalogLabelCmd(o *catalogOpts) *cobra.Command {
	var (
		version int64
		number  int
	)
	cmd := &cobra.Command{
		Use:   "label KIND/NAME key=value... [key-...] [--revision N] --version V",
		Short: "Set or remove labels of a revision, in any lifecycle",
		Long: `label sets (key=value) or removes (key-) labels of the revision get shows
by default (the open draft, else the latest published), or with --revision N
of published revision N. Labels change in every lifecycle; other labels are
kept.
` + catalogExitHelp,
		Args: argsUsage(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := parseObject(args[0])
			if err != nil {
				return err
			}
			set, remove, err := parseLabels(args[1:])
			if err != nil {
				return err
			}
			if err := checkRevisionFlag(cmd, number); err != nil {
				return err
			}
			if err := requireVersion(cmd, obj, version); err != nil {
				return err
			}
			return o.run(cmd, obj, func(ctx context.Context, s *catalogSession) error {
				cur, err := s.target(ctx, obj, number)
				if err != nil {
					return err
				}
				if cur.Version != version {
					// The merge below starts from what was read; the service's
					// compare-and-swap would refuse it too.
					return ports.CatalogConflict("revision %s changed: expected version %d, stored %d", cur.Ref(), version, cur.Version)
				}
				labels := make(map[string]string, len(cur.Labels)+len(set))
				maps.Copy(labels, cur.Labels)
				maps.Copy(labels, set)
				for _, k := range remove {
					delete(labels, k)
				}
				r, err := s.svc.UpdateMetadata(ctx, catalog.MetadataParams{Ref: cur.Ref(), Version: version, Labels: labels})
				if err != nil {
					return err
				}
				return s.changed("labelled", r)
			})
		},
	}
	versionFlag(cmd, &version)
	revisionFlag(cmd, &number, "label published revision N instead of the default")
	return cmd
}

// parseLabels reads key=value (set) and key- (remove) arguments.
func parseLabels(args []string) (set map[string]string, remove []string, err error) {
	set = map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case ok && k != "":
			set[k] = v
		case !ok && len(a) > 1 && strings.HasSuffix(a, "-"):
			remove = append(remove, strings.TrimSuffix(a, "-"))
		default:
			return nil, nil, usagef("label %q: want key=value to set or key- to remove", a)
		}
	}
	for _, k := range remove {
		if _, ok := set[k]; ok {
			return nil, nil, usagef("label %q: both set and removed", k)
		}
	}
	return set, remove, nil
}
