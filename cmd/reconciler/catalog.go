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

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/policy"
	decision "github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// The exit statuses of the catalog commands (0 is success, 2 is usageError).
const (
	exitInternal = 1
	exitInvalid  = 2
	exitConflict = 3
	exitNotFound = 4
)

// catalogExitHelp documents the exit statuses in every catalog command's help.
const catalogExitHelp = `
Exit status:
  0  success
  1  internal error (database unreachable, ...)
  2  bad input: unknown kind, bad name or flag, a document that fails
     validation (every problem is listed, naming its field), or a lifecycle
     move that is not allowed (e.g. approving a draft that was not proposed)
  3  conflict: --version is stale, or another change to the object is in
     progress; re-read with "reconciler catalog get" and retry
  4  not found: no such object, revision or open draft
  5  unauthorized (with --server: no, unknown or revoked token, or a scope it lacks)
  6  database not migrated: run "reconciler migrate up"`

// catalogError is a failed catalog command: its message and the exit
// status its kind of failure maps to.
type catalogError struct {
	code int
	msg  string
	err  error
}

func (e *catalogError) Error() string { return e.msg }
func (e *catalogError) Unwrap() error { return e.err }
func (e *catalogError) ExitCode() int { return e.code }

// classify maps a catalog failure onto its exit status: conflict 3, bad
// input or lifecycle move 2, not found 4, anything else 1. Errors that carry
// a status already (usage errors) pass through. obj names the object for the
// conflict hint.
func classify(obj revision.Object, err error) error {
	if err == nil {
		return nil
	}
	var ec exitCoder
	if errors.As(err, &ec) {
		return err
	}
	var ve *revision.ValidationError
	switch {
	case errors.Is(err, revision.ErrConflict), errors.Is(err, ports.ErrConflict):
		hint := "re-read it with `reconciler catalog get` and retry"
		if obj.Kind != "" {
			hint = fmt.Sprintf("re-read it with `reconciler catalog get %s` and retry with the version shown", obj)
		}
		return &catalogError{exitConflict, "conflict: " + err.Error() + "\n" + hint, err}
	case errors.As(err, &ve):
		return &catalogError{exitInvalid, listProblems(err.Error(), ve), err}
	case errors.Is(err, revision.ErrInvalidTransition), errors.Is(err, revision.ErrImmutable):
		return &catalogError{exitInvalid, err.Error() + nextOps(err), err}
	case errors.Is(err, ports.ErrNotFound):
		return &catalogError{exitNotFound, err.Error(), err}
	}
	return &catalogError{exitInternal, err.Error(), err}
}

// nextOps names the commands that do apply to the revision a refused
// lifecycle move started from, read from revision.Edges.
func nextOps(err error) string {
	var te *revision.TransitionError
	if !errors.As(err, &te) || !te.From.Valid() {
		return ""
	}
	var ops []string
	for _, e := range revision.Edges {
		if e.From == te.From {
			ops = append(ops, string(e.Op))
		}
	}
	return fmt.Sprintf("\na %s revision can only be: %s", te.From, strings.Join(ops, ", "))
}

// listProblems renders a validation failure with more than one problem as
// one problem per line.
func listProblems(msg string, ve *revision.ValidationError) string {
	if len(ve.Problems) < 2 || !strings.HasSuffix(msg, ve.Error()) {
		return msg
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(msg, ve.Error()))
	fmt.Fprintf(&b, "%s: %d problems:", revision.ErrValidation, len(ve.Problems))
	for _, p := range ve.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// catalogOpts holds the flags every catalog subcommand shares.
type catalogOpts struct {
	remoteOpts
	dsn     string
	output  string
	migrate bool
}

// newCatalogCmd builds `reconciler catalog` and its subcommands.
func newCatalogCmd() *cobra.Command {
	o := &catalogOpts{}
	cmd := &cobra.Command{
		Use:   "catalog",
		Short: "Edit, review and publish workflow templates and policies",
		Long: `catalog manages the revisioned catalog of workflow templates and policies.

Objects are addressed as KIND/NAME, KIND being workflow-template or policy.
A change starts as a draft (create), is proposed for review (propose), and is
approved into a numbered, immutable published revision (approve) or sent back
to draft (reject, unpropose). A published revision is retired by
propose-delete then delete. An object has at most one open draft (draft or
proposed) next to its published revisions 1, 2, 3...

The release chain evaluates the latest published revision of each policy
(policy/NAME, known by the id NAME); drafts and proposals never count.

Every change names the --version of the revision it read (shown by get and
list): a stale version is refused as a conflict, so concurrent edits never
overwrite each other.

With --server URL and --token (or RECONCILER_SERVER, RECONCILER_TOKEN) they go
through that server's API (token scopes: read for list and get; a change
reads the revision first, so it needs read and write, approve and reject read
and approve; the approver is the token's name; with --dsn it is
local:<operating-system user>). Every subcommand works both ways.

Otherwise the catalog must outlive each command to be useful, so these
commands need PostgreSQL: set --dsn or RECONCILER_DSN. Without either they
refuse (exit 2) rather than edit an in-memory catalog that would vanish on
exit. Pending
migrations are applied first by the commands that change something, as serve
does; --migrate=false requires ` + "`reconciler migrate up`" + ` to have been run
instead. list and get never migrate: on a database that lacks migrations
they exit 6.
` + catalogExitHelp,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("catalog: want a subcommand: %s", strings.Join(catalogSubcommands, ", "))
			}
			return usagef("catalog: unknown subcommand %q: want one of %s", args[0], strings.Join(catalogSubcommands, ", "))
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.dsn, "dsn", "", "PostgreSQL connection string (env RECONCILER_DSN); this or --server is required")
	o.remoteOpts.bind(pf)
	pf.StringVarP(&o.output, "output", "o", "text", "output format: text or json (get also takes content)")
	pf.BoolVar(&o.migrate, "migrate", true, "apply pending database migrations first")
	cmd.AddCommand(
		newCatalogListCmd(o),
		newCatalogGetCmd(o),
		newCatalogCreateCmd(o),
		newCatalogEditCmd(o),
		newCatalogProposeCmd(o),
		newCatalogUnproposeCmd(o),
		newCatalogApproveCmd(o),
		newCatalogRejectCmd(o),
		newCatalogProposeDeleteCmd(o),
		newCatalogUndoProposeDeleteCmd(o),
		newCatalogDeleteCmd(o),
		newCatalogLabelCmd(o),
		newCatalogPlanCmd(o),
	)
	return cmd
}

// catalogSubcommands lists the subcommands for the usage messages.
var catalogSubcommands = []string{"list", "get", "create", "edit", "propose", "unpropose", "approve",
	"reject", "propose-delete", "undo-propose-delete", "delete", "label", "plan"}

// catalogSession is one command's open catalog: the service, where output
// goes and how.
type catalogSession struct {
	svc catalogService
	// remote is set on --server: the API acts as the token's name.
	remote bool
	out    io.Writer
	errOut io.Writer
	json   bool
	// plan is what publishing a policy revision would change.
	plan func(ctx context.Context, r ports.Revision) (decision.Diff, error)
}

// run opens the catalog named by --dsn (or RECONCILER_DSN), runs fn on it
// and maps its failure onto an exit status. Only --dsn falls back to the
// environment: a stray RECONCILER_VERSION must never stand in for the
// --version a change has to name.
func (o *catalogOpts) run(cmd *cobra.Command, obj revision.Object, fn func(ctx context.Context, s *catalogSession) error) error {
	dsnGiven := cmd.Flag("dsn") != nil && cmd.Flag("dsn").Changed
	for name, p := range map[string]*string{"dsn": &o.dsn, "server": &o.server, "token": &o.token} {
		if f := cmd.Flag(name); f != nil && !f.Changed && (name == "dsn" || !dsnGiven) {
			if v := os.Getenv("RECONCILER_" + strings.ToUpper(name)); v != "" {
				*p = v
			}
		}
	}
	if o.output != "text" && o.output != "json" && (o.output != "content" || cmd.Name() != "get") {
		want := "text or json"
		if cmd.Name() == "get" {
			want = "text, json or content"
		}
		return usagef("--output: want %s, got %q", want, o.output)
	}
	if o.server != "" {
		if f := cmd.Flag("dsn"); f != nil && f.Changed {
			return usagef("--server and --dsn: give one (the server has its own database)")
		}
		if f := cmd.Flag("migrate"); f != nil && f.Changed {
			return usagef("--migrate: not with --server (the server migrates its own database)")
		}
		c, err := o.remote()
		if err != nil {
			return err
		}
		s := &catalogSession{svc: remoteCatalog{c}, remote: true, out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), json: o.output == "json",
			plan: func(ctx context.Context, r ports.Revision) (decision.Diff, error) {
				return c.PlanRevision(ctx, r.Name, r.ID)
			}}
		return remoteExit(obj, fn(cmd.Context(), s))
	}
	if o.dsn == "" {
		return noDatabase("catalog "+cmd.Name(), "the catalog is stored in PostgreSQL; set --dsn or RECONCILER_DSN "+
			"(e.g. postgres://user@localhost:5432/reconciler); there is no in-memory catalog for these commands: "+
			"it would vanish when the command exits")
	}
	ctx := cmd.Context()
	// Reads never migrate: list and get on an unmigrated database say so.
	var be *backend
	var err error
	if read := cmd.Name() == "list" || cmd.Name() == "get"; read {
		be, err = openForRead(ctx, o.dsn)
	} else {
		be, err = openBackend(ctx, o.dsn, o.migrate, ports.SystemClock)
		if err == nil && !o.migrate {
			if err = requireMigrated(ctx, be, "run `reconciler migrate up` first, or drop --migrate=false"); err != nil {
				be.close()
			}
		}
	}
	if err != nil {
		return err
	}
	defer be.close()
	s := &catalogSession{
		svc:    catalog.New(be.catalog, be.catalogConfig()),
		out:    cmd.OutOrStdout(),
		errOut: cmd.ErrOrStderr(),
		json:   o.output == "json",
		plan: func(ctx context.Context, r ports.Revision) (decision.Diff, error) {
			p, err := ports.PolicyOf(r)
			if err != nil {
				return decision.Diff{}, usageError{err}
			}
			// The chain only decides here (DecideManyWith): it writes and
			// enqueues nothing.
			ch := &chain.Chain{Store: be.releases, Queue: be.queue, Clock: ports.SystemClock, Logger: slog.New(slog.DiscardHandler)}
			return gate.Publishing(ctx, be.tx, be.releases, p.Value, func(ps []ports.Stored[policy.Policy]) gate.Decider { return ch.DecideManyWith(ps) })
		},
	}
	return classify(obj, fn(ctx, s))
}

// parseObject reads a KIND/NAME argument.
func parseObject(arg string) (revision.Object, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok {
		return revision.Object{}, usagef("%q: want KIND/NAME, e.g. workflow-template/deploy or policy/prod-gate", arg)
	}
	obj := revision.Object{Kind: revision.Kind(kind), Name: name}
	if err := obj.Validate(); err != nil {
		return revision.Object{}, usageError{fmt.Errorf("%q: %w", arg, err)}
	}
	return obj, nil
}

// versionFlag binds the required --version of a change.
func versionFlag(cmd *cobra.Command, p *int64) {
	cmd.Flags().Int64Var(p, "version", 0, "the version of the revision you last read (required; see get or list)")
}

// requireVersion checks that --version was given and is positive.
func requireVersion(cmd *cobra.Command, obj revision.Object, v int64) error {
	if !cmd.Flags().Changed("version") {
		return usagef("%s %s: --version is required: the version you last read (`reconciler catalog get %s` shows it)", cmd.Name(), obj, obj)
	}
	if v <= 0 {
		return usagef("%s %s: --version must be positive, got %d", cmd.Name(), obj, v)
	}
	return nil
}

// revisionFlag binds --revision, a published revision number.
func revisionFlag(cmd *cobra.Command, p *int, usage string) {
	cmd.Flags().IntVar(p, "revision", 0, usage)
}

// checkRevisionFlag checks a --revision given on the command line.
func checkRevisionFlag(cmd *cobra.Command, n int) error {
	if cmd.Flags().Changed("revision") && n <= 0 {
		return usagef("%s: --revision must be a published revision number (1, 2, ...), got %d", cmd.Name(), n)
	}
	return nil
}

// objectRevisions lists every revision of obj, published by number first.
func (s *catalogSession) objectRevisions(ctx context.Context, obj revision.Object) ([]ports.Revision, error) {
	return s.svc.List(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name})
}

// openDraft returns the object's open draft (Draft or Proposed).
func (s *catalogSession) openDraft(ctx context.Context, obj revision.Object) (ports.Revision, error) {
	rs, err := s.svc.List(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name,
		Lifecycles: []revision.Lifecycle{revision.Draft, revision.Proposed}})
	if err != nil {
		return ports.Revision{}, err
	}
	if len(rs) == 0 {
		return ports.Revision{}, fmt.Errorf("%s has no open draft (start one with `reconciler catalog create %s -f FILE`): %w", obj, obj, ports.ErrNotFound)
	}
	return rs[0], nil
}

// shown picks the revision get shows by default: the open draft if any,
// else the latest Published revision, else the newest DeletionProposed one.
func shown(rs []ports.Revision) (ports.Revision, bool) {
	var pick *ports.Revision
	for i := range rs {
		r := &rs[i]
		switch {
		case r.Lifecycle.Open():
			return *r, true
		case pick == nil,
			r.Lifecycle == revision.Published && (pick.Lifecycle != revision.Published || r.Revision > pick.Revision),
			r.Lifecycle == pick.Lifecycle && r.Revision > pick.Revision:
			pick = r
		}
	}
	if pick == nil {
		return ports.Revision{}, false
	}
	return *pick, true
}

// target resolves the revision a command acts on: published revision n
// when n > 0, else the default of get.
func (s *catalogSession) target(ctx context.Context, obj revision.Object, n int) (ports.Revision, error) {
	if n > 0 {
		return s.svc.GetRevision(ctx, obj, n)
	}
	rs, err := s.objectRevisions(ctx, obj)
	if err != nil {
		return ports.Revision{}, err
	}
	r, ok := shown(rs)
	if !ok {
		return ports.Revision{}, fmt.Errorf("%s: no such object: %w", obj, ports.ErrNotFound)
	}
	return r, nil
}

// describe summarises a revision on one line.
func describe(r ports.Revision) string {
	var b strings.Builder
	if r.Revision > 0 {
		fmt.Fprintf(&b, "revision %d, %s", r.Revision, r.Lifecycle)
	} else {
		b.WriteString(r.Lifecycle.String())
	}
	fmt.Fprintf(&b, ", id %s, version %d", r.ID, r.Version)
	if r.ApprovedBy != "" {
		fmt.Fprintf(&b, ", approved by %s", r.ApprovedBy)
	}
	return b.String()
}

// changed reports a changed revision: the revision as JSON, or a line.
func (s *catalogSession) changed(verb string, r ports.Revision) error {
	if s.json {
		return writeJSON(s.out, r)
	}
	_, err := fmt.Fprintf(s.out, "%s %s: %s\n", verb, r.Object(), describe(r))
	return err
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
