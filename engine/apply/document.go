// Package apply is declarative configuration: documents in the
// Kubernetes style (apiVersion, kind, metadata, spec) describe objects of
// the release store's simple kinds, and Apply makes the store match them,
// all or nothing, reporting per object whether it was created, changed,
// unchanged or (with prune) deleted.
//
// Invariants: All or nothing per call (one `ports.Transactor` transaction: a
// dry run is the same transaction rolled back, without effects); every
// document is decoded strictly and validated before anything is written, a
// refusal is a `*release.FieldError` naming `documents[i].FIELD`; references
// (parents, a deployment's job agent) resolve against the store plus the
// input minus the pruned; environment progressions form no cycle; an
// unchanged object is not written; prune deletes only systems, variable
// sets, resources, environments and deployments of the given workspace whose
// kind the input holds, children first, targets before their object, never
// job agents or policies; `Get` prints what `Apply` takes back unchanged
// (`TestApplyRoundTrip`, rapid); results in kind order (parents first), then
// name
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// APIVersion is the apiVersion every document carries (as workflow
// templates do).
const APIVersion = "reconciler.dev/v1"

// DeprecatedAPIVersion is the group documents carried before
// reconciler.dev/v1 (another project's domain). It is still accepted, with
// a warning in the response (Response.Warnings).
const DeprecatedAPIVersion = "ctrlplane.dev/v1"

// Document is one object of a declarative configuration. Spec holds the
// object's fields as the API writes them (snake_case JSON), without its
// id and parent, which are metadata.
type Document struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind" enum:"Workspace,System,VariableSet,Deployment,Environment,Resource,RelationshipRule,JobAgent,Policy"`
	Metadata   Metadata `json:"metadata"`
	// Spec is the object's fields; absent is none.
	Spec map[string]any `json:"spec,omitempty"`
}

// Metadata names a document's object and its parent.
type Metadata struct {
	// Name is the object's id.
	Name string `json:"name"`
	// Workspace is the parent of a System, a Resource or a RelationshipRule.
	Workspace string `json:"workspace,omitempty"`
	// System is the parent of a Deployment, an Environment or a
	// VariableSet.
	System string `json:"system,omitempty"`
}

// parent returns the metadata field naming the parent kind p.
func (m *Metadata) parent(p string) string {
	switch p {
	case "workspace":
		return m.Workspace
	case "system":
		return m.System
	}
	return ""
}

// stored is an object as read from the store: its value as a JSON object,
// id, parent and compare-and-swap version.
type stored struct {
	id, parent string
	version    int64
	value      any // *T
}

// kindDef is how apply handles one kind; def builds it from the store's
// ports.Kind.
type kindDef struct {
	// Kind is the document kind ("JobAgent"); name the store's ("job agent").
	Kind, name string
	// rank orders writes (parents first) and the output.
	rank int
	// parentMeta is the metadata field of the parent ("workspace",
	// "system", "" for a top-level kind) and parentField its JSON field in
	// the spec's type ("workspace_id").
	parentMeta, parentField string
	// pruned kinds belong to a workspace, so prune may delete them.
	pruned bool

	decode func(raw []byte) (any, error)
	check  func(v any) error
	// of returns a value of the kind's type (T or *T) as stored.
	of   func(v any) (stored, bool)
	get  func(ctx context.Context, a *Applier, id string) (stored, error)
	list func(ctx context.Context, a *Applier, parent string) ([]stored, error)
	put  func(ctx context.Context, a *Applier, v any, expected int64) error
	del  func(ctx context.Context, a *Applier, id string, expected int64) error
}

// def builds the kindDef of k.
func def[T any](kind string, rank int, k *ports.Kind[T], parentField string, pruned bool, objs func(*Applier) ports.Objects[T]) *kindDef {
	toStored := func(s ports.Stored[T]) stored {
		v := s.Value
		return stored{id: k.ID(&v), parent: k.ParentOf(&v), version: s.Version, value: &v}
	}
	return &kindDef{
		Kind: kind, name: k.Name, rank: rank, parentMeta: k.ParentKind, parentField: parentField, pruned: pruned,
		decode: func(raw []byte) (any, error) {
			var v T
			if err := strictjson.Decode(raw, &v); err != nil {
				return nil, err
			}
			return &v, nil
		},
		check: func(v any) error { return k.Validate(v.(*T)) },
		of: func(v any) (stored, bool) {
			switch x := v.(type) {
			case T:
				return toStored(ports.Stored[T]{Value: x}), true
			case *T:
				return toStored(ports.Stored[T]{Value: *x}), true
			}
			return stored{}, false
		},
		get: func(ctx context.Context, a *Applier, id string) (stored, error) {
			s, err := objs(a).Get(ctx, id)
			if err != nil {
				return stored{}, err
			}
			return toStored(s), nil
		},
		list: func(ctx context.Context, a *Applier, parent string) ([]stored, error) {
			all, err := ports.ListAll(ctx, objs(a), parent)
			if err != nil {
				return nil, err
			}
			out := make([]stored, len(all))
			for i := range all {
				out[i] = toStored(all[i])
			}
			return out, nil
		},
		put: func(ctx context.Context, a *Applier, v any, expected int64) error {
			_, err := objs(a).Put(ctx, *v.(*T), expected)
			return err
		},
		del: func(ctx context.Context, a *Applier, id string, expected int64) error {
			return objs(a).Delete(ctx, id, expected)
		},
	}
}

// kinds are the document kinds, in write order: parents first.
var kinds = []*kindDef{
	def("Workspace", 0, &ports.WorkspaceKind, "", false, func(a *Applier) ports.Objects[release.Workspace] { return a.Store.Workspaces() }),
	def("JobAgent", 1, &ports.JobAgentKind, "", false, func(a *Applier) ports.Objects[release.JobAgent] { return a.Store.JobAgents() }),
	def("System", 2, &ports.SystemKind, "workspace_id", true, func(a *Applier) ports.Objects[release.System] { return a.Store.Systems() }),
	def("VariableSet", 3, &ports.VariableSetKind, "system_id", true, func(a *Applier) ports.Objects[release.VariableSet] { return a.Store.VariableSets() }),
	def("Resource", 4, &ports.ResourceKind, "workspace_id", true, func(a *Applier) ports.Objects[release.Resource] { return a.Store.Resources() }),
	def("RelationshipRule", 5, &ports.RelationshipRuleKind, "workspace_id", true, func(a *Applier) ports.Objects[release.RelationshipRule] { return a.Store.RelationshipRules() }),
	def("Environment", 6, &ports.EnvironmentKind, "system_id", true, func(a *Applier) ports.Objects[release.Environment] { return a.Store.Environments() }),
	def("Deployment", 7, &ports.DeploymentKind, "system_id", true, func(a *Applier) ports.Objects[release.Deployment] { return a.Store.Deployments() }),
	def("Policy", 8, &ports.PolicyKind, "workspace_id", true, func(a *Applier) ports.Objects[policy.Policy] { return a.policies() }),
}

// KindNames lists the document kinds in write order.
func KindNames() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.Kind
	}
	return out
}

// kindOf finds a kind by its document name or, case-insensitively, by a
// name the CLI accepts: "deployment", "deployments", "job-agent",
// "jobagents", "policies".
func kindOf(name string) *kindDef {
	n := strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(name, "-", ""), "_", ""))
	for _, k := range kinds {
		base := strings.ToLower(k.Kind)
		plural := base + "s"
		if strings.HasSuffix(base, "y") {
			plural = strings.TrimSuffix(base, "y") + "ies"
		}
		if n == base || n == plural {
			return k
		}
	}
	return nil
}

// ParseKind returns the document kind named by name ("deployments",
// "job-agent", "Policy"), or an error listing the kinds.
func ParseKind(name string) (string, error) {
	if k := kindOf(name); k != nil {
		return k.Kind, nil
	}
	return "", release.Invalid("kind", fmt.Sprintf("unknown kind %q; want one of %s", name, strings.Join(KindNames(), ", ")))
}

// DocumentOf renders a domain object of a document kind
// (release.Workspace ... policy.Policy, a value or a pointer) as its
// document.
func DocumentOf(v any) (Document, error) {
	for _, k := range kinds {
		if s, ok := k.of(v); ok {
			return k.encode(s)
		}
	}
	return Document{}, fmt.Errorf("apply: %T is not of a document kind", v)
}

// encode renders a stored object as the document apply accepts unchanged.
func (k *kindDef) encode(s stored) (Document, error) {
	b, err := json.Marshal(s.value)
	if err != nil {
		return Document{}, fmt.Errorf("encode %s %s: %w", k.name, s.id, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return Document{}, fmt.Errorf("encode %s %s: %w", k.name, s.id, err)
	}
	delete(m, "id")
	d := Document{APIVersion: APIVersion, Kind: k.Kind, Metadata: Metadata{Name: s.id}}
	switch k.parentMeta {
	case "workspace":
		d.Metadata.Workspace = s.parent
	case "system":
		d.Metadata.System = s.parent
	}
	if k.parentField != "" {
		delete(m, k.parentField)
	}
	d.Spec = m
	return d, nil
}

// object is a document decoded: its kind, id, parent and typed value.
type object struct {
	index      int // of the document
	kind       *kindDef
	id, parent string
	value      any // *T
}

// key names an object across kinds.
type key struct{ kind, id string }

func (o *object) key() key { return key{o.kind.Kind, o.id} }

// decodeDocument checks d and decodes it into its kind's type, validated.
// Errors are *release.FieldError naming the document's field
// ("metadata.name", "spec.resource_selector").
func decodeDocument(d *Document) (*object, error) {
	switch {
	case d.APIVersion == "":
		return nil, release.Invalid("apiVersion", "is required; want "+APIVersion)
	case d.APIVersion != APIVersion && d.APIVersion != DeprecatedAPIVersion:
		return nil, release.Invalid("apiVersion", fmt.Sprintf("unsupported apiVersion %q; want %q", d.APIVersion, APIVersion))
	case d.Kind == "":
		return nil, release.Invalid("kind", "is required; want one of "+strings.Join(KindNames(), ", "))
	}
	k := kindOf(d.Kind)
	if k == nil || k.Kind != d.Kind {
		return nil, release.Invalid("kind", fmt.Sprintf("unknown kind %q; want one of %s", d.Kind, strings.Join(KindNames(), ", ")))
	}
	if d.Metadata.Name == "" {
		return nil, release.Invalid("metadata.name", "is required")
	}
	for _, p := range []string{"workspace", "system"} {
		if p != k.parentMeta && d.Metadata.parent(p) != "" {
			return nil, release.Invalid("metadata."+p, "a "+d.Kind+" has no "+p)
		}
	}
	parent := d.Metadata.parent(k.parentMeta)
	if k.parentMeta != "" && parent == "" {
		return nil, release.Invalid("metadata."+k.parentMeta, "is required: the "+k.parentMeta+" the "+d.Kind+" belongs to")
	}
	spec := make(map[string]any, len(d.Spec)+2)
	for f, v := range d.Spec {
		spec[f] = v
	}
	for _, f := range []string{"id", k.parentField} {
		if _, ok := spec[f]; ok && f != "" {
			return nil, release.Invalid("spec."+f, "is set by metadata ("+k.fieldOwner(f)+"), not in the spec")
		}
	}
	spec["id"] = d.Metadata.Name
	if k.parentField != "" {
		spec[k.parentField] = parent
	}
	if _, ok := spec["name"]; !ok {
		spec["name"] = spec["id"]
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, release.Invalid("spec", err.Error())
	}
	v, err := k.decode(raw)
	if err == nil {
		err = k.check(v)
	}
	if err != nil {
		return nil, k.placeError(err)
	}
	return &object{kind: k, id: d.Metadata.Name, parent: parent, value: v}, nil
}

// fieldOwner names the metadata field that sets a spec field.
func (k *kindDef) fieldOwner(f string) string {
	if f == "id" {
		return "metadata.name"
	}
	return "metadata." + k.parentMeta
}

// placeError turns a decoding or validation error about the merged spec
// into a *release.FieldError naming the document's field.
func (k *kindDef) placeError(err error) error {
	var fe *release.FieldError
	var se *strictjson.Error
	switch {
	case errors.As(err, &fe):
		c := *fe
		c.Field = k.docField(fe.Field)
		return &c
	case errors.As(err, &se):
		return &release.FieldError{Field: k.docField(se.Path), Msg: se.Msg, Err: err}
	}
	return &release.FieldError{Field: "spec", Msg: err.Error(), Err: err}
}

// docField maps a field of the kind's type onto the document.
func (k *kindDef) docField(f string) string {
	head, _, _ := strings.Cut(f, ".")
	head, _, _ = strings.Cut(head, "[")
	switch {
	case f == "":
		return "spec"
	case head == "id":
		return "metadata.name"
	case k.parentField != "" && head == k.parentField:
		return "metadata." + k.parentMeta
	}
	return "spec." + f
}

// sortObjects orders objects by kind (write order), then id.
func sortObjects[T any](s []T, kindOf func(*T) *kindDef, id func(*T) string) {
	slices.SortStableFunc(s, func(a, b T) int {
		if c := kindOf(&a).rank - kindOf(&b).rank; c != 0 {
			return c
		}
		return strings.Compare(id(&a), id(&b))
	})
}
