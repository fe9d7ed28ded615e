package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
	yaml3 "go.yaml.in/yaml/v3"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/internal/strictjson"
	decision "github.com/reconcilerhq/reconciler/policy/plan"
)

// sourceDoc is one document read from a file: where it starts and its
// YAML node, to place the server's problems in the user's file.
type sourceDoc struct {
	file string
	line int
	node *yaml3.Node
}

// manifest is the documents read by apply -f, with their sources.
type manifest struct {
	docs    []apply.Document
	sources []sourceDoc
}

// readManifests reads each -f argument: a file, a directory (its *.yaml,
// *.yml and *.json files, by name) or "-" (stdin).
func readManifests(stdin io.Reader, args []string) (*manifest, error) {
	m := &manifest{}
	for _, arg := range args {
		files := []string{arg}
		if arg != "-" {
			st, err := os.Stat(arg)
			if err != nil {
				return nil, usageError{err}
			}
			if st.IsDir() {
				entries, err := os.ReadDir(arg)
				if err != nil {
					return nil, usageError{err}
				}
				files = files[:0]
				for _, e := range entries {
					switch strings.ToLower(filepath.Ext(e.Name())) {
					case ".yaml", ".yml", ".json":
						if !e.IsDir() {
							files = append(files, filepath.Join(arg, e.Name()))
						}
					}
				}
				if len(files) == 0 {
					return nil, usagef("%s: no *.yaml, *.yml or *.json file", arg)
				}
			}
		}
		for _, f := range files {
			src, err := readInput(stdin, f)
			if err != nil {
				return nil, err
			}
			name := f
			if f == "-" {
				name = "stdin"
			}
			if err := m.add(name, src); err != nil {
				return nil, err
			}
		}
	}
	if len(m.docs) == 0 {
		return nil, usagef("apply: the input holds no document")
	}
	if len(m.docs) > apply.MaxDocuments {
		return nil, usagef("apply: %d documents, at most %d per apply", len(m.docs), apply.MaxDocuments)
	}
	return m, nil
}

// add decodes the documents of one file: a YAML stream (documents
// separated by ---; JSON is YAML) whose documents are objects or lists of
// objects. Empty documents are skipped.
func (m *manifest) add(name string, src []byte) error {
	dec := yaml3.NewDecoder(strings.NewReader(string(src)))
	for {
		var n yaml3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return usagef("%s: %v", name, yamlSyntaxError(src, err))
		}
		if len(n.Content) == 0 {
			continue
		}
		root := n.Content[0]
		if root.Kind == yaml3.ScalarNode && root.Tag == "!!null" {
			continue // an empty document (two --- in a row)
		}
		items := []*yaml3.Node{root}
		if root.Kind == yaml3.SequenceNode {
			items = root.Content
		}
		for _, item := range items {
			if err := m.addNode(name, item); err != nil {
				return err
			}
		}
	}
}

// addNode decodes one document node strictly.
func (m *manifest) addNode(name string, n *yaml3.Node) error {
	if n.Kind != yaml3.MappingNode {
		return usagef("%s:%d: a document must be a mapping (apiVersion, kind, metadata, spec)", name, n.Line)
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return usagef("%s:%d: %v", name, n.Line, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return usagef("%s:%d: %v", name, n.Line, err)
	}
	var d apply.Document
	if err := strictjson.Decode(b, &d); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) {
			return usagef("%s:%d: %s: %s", name, nodeLine(n, se.Path), se.Path, se.Msg)
		}
		return usagef("%s:%d: %v", name, n.Line, err)
	}
	m.docs = append(m.docs, d)
	m.sources = append(m.sources, sourceDoc{file: name, line: n.Line, node: n})
	return nil
}

// nodeLine is the line of the field at path under n (its key's line),
// else n's.
func nodeLine(n *yaml3.Node, path string) int {
	key, val, ok := locateNode(n, path)
	switch {
	case !ok:
		return n.Line
	case key != nil:
		return key.Line
	}
	return val.Line
}

// docFieldRe splits a problem location "body.documents[3].spec.x".
// The field may hold any character, a line break included (a JSON key of
// the user's is echoed in it).
var docFieldRe = regexp.MustCompile(`^(?:body\.)?documents\[(\d+)\]\.?((?s:.*))$`)

// shownField is a problem's field as a message shows it: as is, or quoted
// when it holds a character that is not printable (a line break, an
// escape), which a terminal must not receive raw.
func shownField(f string) string {
	for _, r := range f {
		if !unicode.IsPrint(r) {
			return strconv.Quote(f)
		}
	}
	return f
}

// placed is a server problem placed in the user's file.
type placed struct {
	msg string
	err error
}

func (e *placed) Error() string { return e.msg }
func (e *placed) Unwrap() error { return e.err }

// place puts the file, line and object of each located detail of a
// problem about documents into the message; other errors pass.
func (m *manifest) place(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || len(ce.Errors) == 0 {
		return err
	}
	var lines []string
	for _, d := range ce.Errors {
		g := docFieldRe.FindStringSubmatch(d.Location)
		if g == nil {
			continue
		}
		i, _ := strconv.Atoi(g[1])
		if i >= len(m.sources) {
			continue
		}
		src, doc := m.sources[i], m.docs[i]
		msg := strings.TrimPrefix(d.Message, strings.TrimPrefix(d.Location, "body.")+": ")
		lines = append(lines, fmt.Sprintf("%s:%d: %s %q: %s: %s", src.file, nodeLine(src.node, g[2]), doc.Kind, doc.Metadata.Name, shownField(g[2]), msg))
	}
	if len(lines) == 0 {
		return err
	}
	return &placed{msg: strings.Join(lines, "\n"), err: err}
}

func newApplyCmd() *cobra.Command {
	var o releaseOpts
	var files []string
	var limit int
	var req apply.Request
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update workspaces, systems, variable sets, deployments, environments, resources, relationship rules, job agents and policies from documents",
		Long: `apply makes the release store match declarative documents, all or nothing:

  apiVersion: ` + apply.APIVersion + `
  kind: Deployment   # Workspace, System, VariableSet, Deployment, Environment, Resource, RelationshipRule, JobAgent, Policy
  metadata: {name: web, system: shop}   # name is the id; workspace (System, Resource, RelationshipRule) or
                                        # system (VariableSet, Deployment, Environment) is the parent
  spec: {name: Web, slug: web, resource_selector: 'resource.kind == "KubernetesCluster"'}

The spec holds the object's fields as the API writes them (snake_case; unknown
fields are refused). Versions are not declarative: push them with ` + "`reconciler versions create`" + `.

-f takes a file, a directory (its *.yaml, *.yml and *.json files, by name) or -
(stdin), and may be repeated; a file holds YAML documents separated by ---, or
JSON (an object or a list of them). Each object is created or updated by kind
and name, and one line per object says created, changed or unchanged (kind
order, then name). --dry-run prints the same with each change's fields and
writes nothing, then the plan: for each release target the change affects,
whether it is created or removed and the gating rules (approval, window,
progression, rollout, verification; as policy/rule, type and policy
revision) that start (+) or stop (-) applying to it, and its desired release
before (as stored) and after (decided by the release chain over the change:
"desired: v1 (release …) -> no release"). The plan is read whole,
page after page (an error if it changes between pages: run it again);
--limit N prints its first N targets (in key order) and
counts the rest (created, removed, gates changing, rules lifted, releases
moving). Policy documents are not written by
a dry run, so the plan shows what the other documents do; reconciler catalog
plan shows what publishing a policy revision would do. -o json or yaml prints
the answer of POST /api/v1/apply as is (the plan under "plan"). --prune also deletes the systems, variable sets, resources,
relationship rules, environments, deployments and policies of the workspace (--workspace, default the one the documents name)
whose kind the documents hold and whose name they do not (the dry run lists
them as deleted; like the policies it publishes, it does not plan a policy's
delete); job agents, which belong to no workspace, are never pruned.

Every document is checked before anything is written, and a bad one changes
nothing; the message names the file, the line and the field: CEL selectors must
compile and be boolean, RRULEs parse, environment progressions form no cycle,
parents and job agents exist, a job agent's config matches its type.

Policies are the catalog's: a Policy document publishes the policy's next
revision, approved by the caller (the token's name; with --dsn, local:<operating-system user>), so it
also needs scope approve, as PUT /api/v1/policies does. Any other change
that would take a gating rule off a release target that stays (e.g. renaming
the environment a policy's selector reads) needs scope approve too: with
write only it is refused (exit 5) naming the target and the rule, and
nothing is written. Removing or creating targets lifts nothing. See
docs/security.md, "Gates and the approve scope".

With --server it goes through that server's API (POST /api/v1/apply, token
scope write); with --dsn through the same API served in this process.

Exit status: 0 applied, 2 a bad document, 3 a conflict (an object changed
meanwhile, or one still in use would be pruned), 4 not found, 5 unauthorized.`,
		Example: `  reconciler apply -f config/ --server http://127.0.0.1:8080 --token "$RECONCILER_TOKEN"
  reconciler apply -f shop.yaml --dry-run --dsn "$RECONCILER_DSN"
  reconciler get deployments -o yaml --dsn "$RECONCILER_DSN" | reconciler apply -f - --dsn "$RECONCILER_DSN"`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return usagef("apply: -f FILE|DIR|- is required")
			}
			if req.Workspace != "" && !req.Prune {
				return usagef("--workspace: only with --prune")
			}
			if cmd.Flags().Changed("limit") && (!req.DryRun || limit < 1 || limit > 1000) {
				return usagef("--limit: a number of targets from 1 to 1000, with --dry-run only (got %d)", limit)
			}
			m, err := readManifests(cmd.InOrStdin(), files)
			if err != nil {
				return err
			}
			req.Documents = m.docs
			return clientCmd(&o, func(cmd *cobra.Command, ctx context.Context, c *client.Client, _ []string) error {
				var resp apply.Response
				var err error
				if limit > 0 {
					resp, err = c.ApplyPage(ctx, req, limit, "")
				} else {
					resp, err = c.Apply(ctx, req)
				}
				if err != nil {
					return m.place(err)
				}
				for _, w := range resp.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", m.placeText(w))
				}
				if ok, err := structured(cmd.OutOrStdout(), o.output, resp); ok {
					return err
				}
				return printApplied(cmd.OutOrStdout(), resp)
			})(cmd, nil)
		},
	}
	o.bind(cmd, true)
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "a file, a directory or - (stdin); repeatable")
	cmd.Flags().BoolVar(&req.DryRun, "dry-run", false, "print what would change, with the fields, and write nothing")
	cmd.Flags().IntVar(&limit, "limit", 0, "with --dry-run: print the plan's first N targets (1 to 1000) and how many more there are; default every target")
	cmd.Flags().BoolVar(&req.Prune, "prune", false, "delete the workspace's objects of the documents' kinds that they no longer name")
	cmd.Flags().StringVar(&req.Workspace, "workspace", "", "with --prune: the workspace it acts in (default: the one the documents name)")
	return cmd
}

// printApplied prints one line per object, and a dry run's changes.
func printApplied(w io.Writer, resp apply.Response) error {
	suffix := ""
	if resp.DryRun {
		suffix = " (dry run)"
	}
	var b strings.Builder
	for _, r := range resp.Results {
		fmt.Fprintf(&b, "%s/%s %s%s\n", strings.ToLower(r.Kind), r.Name, r.Action, suffix)
		if resp.DryRun {
			for _, c := range slices.Clone(r.Changes) {
				fmt.Fprintf(&b, "  %s\n", c)
			}
		}
	}
	if resp.Plan != nil {
		printPlan(&b, resp.Plan)
		if sum := resp.PlanSummary; sum != nil && resp.PlanNextCursor != "" {
			fmt.Fprintf(&b, "plan: %d of %d targets shown (--limit); %d created, %d removed, %d with gates changing, %d rules lifted, %d releases moving in all\n",
				len(resp.Plan.Targets), sum.Targets, sum.Created, sum.Removed, sum.Gated, sum.Lifted, sum.Moved)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printPlan prints a dry run's decision diff: one line per affected
// target, then the rules that start (+) or stop (-) applying to it.
func printPlan(b *strings.Builder, d *decision.Diff) {
	if len(d.Targets) == 0 {
		b.WriteString("plan: no release target changes its gating rules or its desired release\n")
		return
	}
	b.WriteString("plan:\n")
	for _, t := range d.Targets {
		state := "changed"
		switch {
		case t.Created:
			state = "created"
		case t.Removed:
			state = "removed"
		}
		fmt.Fprintf(b, "  target %s %s\n", t.Key, state)
		switch c := t.Desired; {
		case c == nil:
		case c.Changed():
			fmt.Fprintf(b, "    desired: %s -> %s\n", desiredText(c.Before), desiredText(c.After))
		default:
			fmt.Fprintf(b, "    desired: %s (unchanged)\n", desiredText(c.After))
		}
		for _, r := range t.Starts {
			fmt.Fprintf(b, "    + %s\n", r)
		}
		for _, r := range t.Stops {
			fmt.Fprintf(b, "    - %s\n", r)
		}
	}
}

// desiredText renders a desired release: its version's tag, "no release",
// or "none" (not decided, or the target is gone).
func desiredText(d *decision.Desired) string {
	switch {
	case d == nil:
		return "none"
	case d.ReleaseID == "":
		return "no release"
	default:
		return d.Tag + " (release " + d.ReleaseID[:min(12, len(d.ReleaseID))] + ")"
	}
}

// placeText puts the file, line and object into a server warning that
// starts with "documents[i].FIELD: "; other text passes.
func (m *manifest) placeText(w string) string {
	loc, msg, ok := strings.Cut(w, ": ")
	g := docFieldRe.FindStringSubmatch(loc)
	if !ok || g == nil {
		return w
	}
	i, _ := strconv.Atoi(g[1])
	if i >= len(m.sources) {
		return w
	}
	src, doc := m.sources[i], m.docs[i]
	return fmt.Sprintf("%s:%d: %s %q: %s: %s", src.file, nodeLine(src.node, g[2]), doc.Kind, doc.Metadata.Name, shownField(g[2]), msg)
}
