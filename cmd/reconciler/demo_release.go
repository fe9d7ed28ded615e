package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/chain"
	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// demoReleaseFile is the release demo's file inside the demo directory.
const demoReleaseFile = "release.yaml"

// demoWorkspace is the release demo as written in testdata/demo.
type demoWorkspace struct {
	Workspace    release.Workspace     `json:"workspace"`
	Systems      []release.System      `json:"systems"`
	VariableSets []release.VariableSet `json:"variable_sets"`
	Environments []release.Environment `json:"environments"`
	Resources    []release.Resource    `json:"resources"`
	JobAgents    []release.JobAgent    `json:"job_agents"`
	Deployments  []release.Deployment  `json:"deployments"`
	Policies     []policy.Policy       `json:"policies"`
	Versions     []demoVersion         `json:"versions"`
	Approvals    []release.Approval    `json:"approvals"`
	// WorkflowTemplates are files of the demo directory, published to
	// the catalog under their metadata.name (workspace templates).
	WorkflowTemplates []string `json:"workflow_templates"`

	templates []demoTemplate // checked, in WorkflowTemplates order
}

// demoTemplate is a checked workflow template of the demo.
type demoTemplate struct {
	file, name string
	doc        []byte // as JSON
}

// demoVersion is a version pushed After the demo starts.
type demoVersion struct {
	ID           string         `json:"id"`
	DeploymentID string         `json:"deployment_id"`
	Tag          string         `json:"tag"`
	Config       map[string]any `json:"config"`
	After        demoDelay      `json:"after"`
}

// demoDelay is a Go duration string ("15s").
type demoDelay time.Duration

func (d *demoDelay) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("want a duration such as \"15s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("want a non-negative duration such as \"15s\", got %q", s)
	}
	*d = demoDelay(v)
	return nil
}

// demoFS is where the demo files come from: dir on disk when set, else the
// copy of testdata/demo built into the binary.
func demoFS(dir string) (fs.FS, string, error) {
	if dir != "" {
		return os.DirFS(dir), dir, nil
	}
	sub, err := fs.Sub(reconciler.DemoFiles, "testdata/demo")
	return sub, "testdata/demo (built in)", err
}

// loadReleaseDemo reads and strictly decodes the release demo; an error
// names the file, the field and its line.
func loadReleaseDemo(fsys fs.FS, where string) (*demoWorkspace, error) {
	name := where + "/" + demoReleaseFile
	src, err := readInputFS(fsys, demoReleaseFile, name)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	doc, err := yamlToJSON(src)
	if err != nil {
		return nil, fmt.Errorf("demo %s: %w", name, err)
	}
	var w demoWorkspace
	if err := strictjson.Decode(doc, &w); err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			if key, val, ok := locateField(src, se.Path); ok {
				line := val.Line
				if key != nil {
					line = key.Line
				}
				return nil, fmt.Errorf("demo %s:%d: %s: %s", name, line, se.Path, se.Msg)
			}
		}
		return nil, fmt.Errorf("demo %s: %w", name, err)
	}
	if err := w.validate(src, name); err != nil {
		return nil, err
	}
	for _, file := range w.WorkflowTemplates {
		src, err := readInputFS(fsys, file, where+"/"+file)
		if err != nil {
			return nil, fmt.Errorf("demo %s: workflow_templates: %w", name, err)
		}
		t, err := workflow.Parse(src)
		if err == nil {
			err = catalog.CheckWorkflowTemplate(src, t.Metadata.Name)
		}
		var doc []byte
		if err == nil {
			doc, err = yamlToJSON(src)
		}
		if err != nil {
			return nil, fmt.Errorf("demo %s/%s: %w", where, file, err)
		}
		w.templates = append(w.templates, demoTemplate{file: file, name: t.Metadata.Name, doc: doc})
	}
	return &w, nil
}

// publishDemoTemplates publishes the demo's workflow templates, approved
// by "demo".
func publishDemoTemplates(ctx context.Context, cat ports.Catalog, w *demoWorkspace) error {
	for _, tpl := range w.templates {
		// An earlier start (serve --dsn --demo) may have stored it, or
		// part of the way: go on from where it is.
		rev, err := cat.CatalogGet(ctx, ports.RevisionRef{Kind: revision.KindWorkflowTemplate, Name: tpl.name, ID: "demo"})
		if errors.Is(err, ports.ErrNotFound) {
			rev, err = cat.CatalogCreate(ctx, ports.Revision{Kind: revision.KindWorkflowTemplate, Name: tpl.name, ID: "demo", Content: tpl.doc})
		}
		for _, to := range []revision.Lifecycle{revision.Proposed, revision.Published} {
			if err != nil || rev.Lifecycle == revision.Published || (to == revision.Proposed && rev.Lifecycle == revision.Proposed) {
				continue
			}
			rev, err = cat.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: rev.Ref(), ExpectedVersion: rev.Version, Lifecycle: to, ApprovedBy: "demo"})
		}
		if err != nil {
			return fmt.Errorf("demo template %s: %w", tpl.file, err)
		}
	}
	return nil
}

// validate checks every object of the workspace as the store will when it
// is seeded, so a bad CEL expression or RRULE is refused before anything
// starts, naming the file, the line and column of the field (from src),
// the field's path and, for CEL, the position in the expression.
func (w *demoWorkspace) validate(src []byte, name string) error {
	type validated interface{ Validate() error }
	check := func(list string, i int, v validated) error {
		err := v.Validate()
		if err == nil {
			return nil
		}
		path := fmt.Sprintf("%s[%d]", list, i)
		var fe *release.FieldError
		if errors.As(err, &fe) && fe.Field != "" {
			path += "." + fe.Field
		}
		for p := path; p != ""; p = parentField(p) {
			if key, val, ok := locateField(src, p); ok {
				at := val
				if key != nil && p != path {
					at = key
				}
				return usagef("demo %s:%d:%d: %s: %v", name, at.Line, at.Column, path, err)
			}
		}
		return usagef("demo %s: %s: %v", name, path, err)
	}
	for i := range w.Systems {
		if err := check("systems", i, &w.Systems[i]); err != nil {
			return err
		}
	}
	for i := range w.VariableSets {
		if err := check("variable_sets", i, &w.VariableSets[i]); err != nil {
			return err
		}
	}
	for i := range w.Environments {
		if err := check("environments", i, &w.Environments[i]); err != nil {
			return err
		}
	}
	for i := range w.Resources {
		if err := check("resources", i, &w.Resources[i]); err != nil {
			return err
		}
	}
	for i := range w.JobAgents {
		if err := check("job_agents", i, &w.JobAgents[i]); err != nil {
			return err
		}
	}
	for i := range w.Deployments {
		if err := check("deployments", i, &w.Deployments[i]); err != nil {
			return err
		}
	}
	for i := range w.Policies {
		if err := check("policies", i, &w.Policies[i]); err != nil {
			return err
		}
	}
	return nil
}

// parentField strips the last field or index from a path ("" at the top).
func parentField(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// documents renders the demo's objects as the documents apply takes.
func (w *demoWorkspace) documents() ([]apply.Document, error) {
	objs := []any{w.Workspace}
	for _, list := range [][]any{anys(w.Systems), anys(w.VariableSets), anys(w.Environments), anys(w.Resources),
		anys(w.JobAgents), anys(w.Deployments), anys(w.Policies)} {
		objs = append(objs, list...)
	}
	docs := make([]apply.Document, 0, len(objs))
	for _, o := range objs {
		d, err := apply.DocumentOf(o)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
	return docs, nil
}

// anys converts a slice to []any.
func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

// seedReleaseDemo applies the demo workspace of the release chain (through
// apply, in one transaction, so a second start changes nothing) and pushes
// its versions: dev, staging and prod on three clusters; staging follows
// dev, prod follows staging and needs one approval. v1 is approved for
// prod, v2 is not, so v1 rolls out to every environment while v2 stops
// before prod, and the log says why. Jobs run on the built-in test runner.
// A template, version or approval already stored is kept: seeding a
// database twice (serve --dsn --demo) is a no-op.
func seedReleaseDemo(ctx context.Context, ch *chain.Chain, cat ports.Catalog, tx ports.Transactor, w *demoWorkspace) error {
	if err := publishDemoTemplates(ctx, cat, w); err != nil {
		return err
	}
	step := func(what, id string, err error) error {
		if err != nil {
			return fmt.Errorf("demo %s %s: %w", what, id, err)
		}
		return nil
	}
	docs, err := w.documents()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	applier := &apply.Applier{Store: ch.Store, Tx: tx, Effects: ch, AgentConfig: agentConfigValidator(),
		Policies: catalog.New(ch.Store, catalog.Config{}).Policies("demo")}
	if _, err := applier.Apply(ctx, apply.Request{Documents: docs}); err != nil {
		return fmt.Errorf("demo: apply the workspace: %w", err)
	}
	push := func(v demoVersion) error {
		if _, err := ch.Store.VersionGet(ctx, v.ID); err == nil {
			return nil // pushed by an earlier start
		}
		return ch.CreateVersion(ctx, release.DeploymentVersion{ID: v.ID, DeploymentID: v.DeploymentID, Tag: v.Tag, Config: v.Config})
	}
	var later []demoVersion
	for _, v := range w.Versions {
		if v.After > 0 {
			later = append(later, v)
			continue
		}
		if err := push(v); err != nil {
			return step("version", v.ID, err)
		}
	}
	for _, a := range w.Approvals {
		if _, err := ch.Approve(ctx, a); err != nil {
			return step("approval of", a.VersionID, err)
		}
	}
	for _, v := range later {
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(v.After)):
				if err := push(v); err != nil && ctx.Err() == nil {
					ch.Logger.Error("demo version", "version", v.ID, "error", err)
				}
			}
		}()
	}
	return nil
}
