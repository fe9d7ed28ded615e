package ports

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// ErrInUse is returned (wrapped) when a delete is refused because other
// stored objects still depend on the object; the message names one of
// them. It wraps ErrConflict, so callers that only know "conflict" (409)
// handle it too.
var ErrInUse = fmt.Errorf("still in use: %w", ErrConflict)

// Kind describes one kind of the object store: how an adapter names,
// identifies, parents and validates its objects. Adapters implement the
// Objects port once, parameterised by a Kind.
type Kind[T any] struct {
	// Name is the kind's name in errors ("deployment"), Plural in lists.
	Name, Plural string
	// ID returns the object's id.
	ID func(*T) string
	// ParentKind is the name of the parent kind ("" for a top-level kind)
	// and Parent returns the object's parent id (nil for a top-level kind).
	ParentKind string
	Parent     func(*T) string
	// Validate is the domain type's Validate.
	Validate func(*T) error
}

// ParentOf returns v's parent id, "" for a top-level kind.
func (k *Kind[T]) ParentOf(v *T) string {
	if k.Parent == nil {
		return ""
	}
	return k.Parent(v)
}

// The kinds of the object store.
var (
	WorkspaceKind = Kind[release.Workspace]{Name: "workspace", Plural: "workspaces",
		ID: func(v *release.Workspace) string { return v.ID }, Validate: (*release.Workspace).Validate}
	SystemKind = Kind[release.System]{Name: "system", Plural: "systems",
		ID: func(v *release.System) string { return v.ID }, Validate: (*release.System).Validate,
		ParentKind: "workspace", Parent: func(v *release.System) string { return v.WorkspaceID }}
	DeploymentKind = Kind[release.Deployment]{Name: "deployment", Plural: "deployments",
		ID: func(v *release.Deployment) string { return v.ID }, Validate: (*release.Deployment).Validate,
		ParentKind: "system", Parent: func(v *release.Deployment) string { return v.SystemID }}
	EnvironmentKind = Kind[release.Environment]{Name: "environment", Plural: "environments",
		ID: func(v *release.Environment) string { return v.ID }, Validate: (*release.Environment).Validate,
		ParentKind: "system", Parent: func(v *release.Environment) string { return v.SystemID }}
	ResourceKind = Kind[release.Resource]{Name: "resource", Plural: "resources",
		ID: func(v *release.Resource) string { return v.ID }, Validate: (*release.Resource).Validate,
		ParentKind: "workspace", Parent: func(v *release.Resource) string { return v.WorkspaceID }}
	VariableSetKind = Kind[release.VariableSet]{Name: "variable set", Plural: "variable sets",
		ID: func(v *release.VariableSet) string { return v.ID }, Validate: (*release.VariableSet).Validate,
		ParentKind: "system", Parent: func(v *release.VariableSet) string { return v.SystemID }}
	JobAgentKind = Kind[release.JobAgent]{Name: "job agent", Plural: "job agents",
		ID: func(v *release.JobAgent) string { return v.ID }, Validate: (*release.JobAgent).Validate}
	RelationshipRuleKind = Kind[release.RelationshipRule]{Name: "relationship rule", Plural: "relationship rules",
		ID: func(v *release.RelationshipRule) string { return v.ID }, Validate: (*release.RelationshipRule).Validate,
		ParentKind: "workspace", Parent: func(v *release.RelationshipRule) string { return v.WorkspaceID }}
	PolicyKind = Kind[policy.Policy]{Name: "policy", Plural: "policies",
		ID: func(v *policy.Policy) string { return v.ID }, Validate: (*policy.Policy).Validate,
		ParentKind: "workspace", Parent: func(v *policy.Policy) string { return v.WorkspaceID }}
)

// Page sizes of Objects.List: DefaultListLimit when the caller gives none,
// at most MaxListLimit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListParams asks Objects.List for one page.
type ListParams struct {
	// Parent keeps the objects of this parent (a workspace or a system);
	// empty keeps all. A top-level kind refuses a non-empty Parent.
	Parent string
	// Workspace keeps the objects of this workspace: those whose parent is
	// it, or whose system is in it; empty keeps all. A kind with no parent
	// (and workspaces themselves) refuses a non-empty Workspace.
	Workspace string
	// Continue is the Page.Continue of the previous page; empty starts.
	Continue string
	// Limit is the most objects returned: 0 means DefaultListLimit, more
	// than MaxListLimit is refused.
	Limit int
}

// Page is one page of a listing, in id (byte) order.
type Page[T any] struct {
	Items []Stored[T] `json:"items"`
	// Continue, when not empty, continues the listing after the last item;
	// empty means the listing is complete.
	Continue string `json:"continue,omitempty"`
}

// Objects is the store of one simple kind (see ObjectStore). Invariants
// (checked by porttest.Objects):
//   - Put is compare-and-swap: expectedVersion 0 creates (an existing id is
//     ErrConflict), n > 0 updates the object stored at version n (another
//     version is ErrConflict, a missing object ErrNotFound); negative is
//     invalid. Every write bumps Version and stamps UpdatedAt. A missing
//     parent is ErrNotFound.
//   - Put validates first (the kind's Validate, then the store's checks)
//     and refuses bad input with a *release.FieldError naming the field; a
//     refused write changes nothing.
//   - List is in id order, a page at a time; a page continues strictly
//     after the previous page's last id, so objects created or deleted
//     meanwhile never make a listing repeat or skip a survivor.
//   - Delete removes the object stored at expectedVersion (> 0): missing is
//     ErrNotFound, another version ErrConflict. It never cascades: while
//     dependents exist (see ObjectStore) it is refused with ErrInUse naming
//     one, and nothing changes.
//   - Reads return copies; times are UTC at microsecond precision.
type Objects[T any] interface {
	// Get reads one object.
	Get(ctx context.Context, id string) (Stored[T], error)
	// List reads one page of objects in id order.
	List(ctx context.Context, p ListParams) (Page[T], error)
	// Put creates (expectedVersion 0) or updates an object and returns its
	// new version.
	Put(ctx context.Context, v T, expectedVersion int64) (int64, error)
	// Delete removes the object stored at expectedVersion.
	Delete(ctx context.Context, id string, expectedVersion int64) error
}

// ObjectStore stores the simple kinds of the release chain, one Objects per
// kind (e.g. store.Deployments().Put(ctx, d, 0)).
//
// What a Delete refuses while it exists (ErrInUse):
//   - workspace: its systems, resources and relationship rules;
//   - system: its deployments, environments and variable sets;
//   - deployment: its versions and its release targets;
//   - environment, resource: their release targets;
//   - variable set, relationship rule: nothing depends on them;
//   - job agent: a deployment naming it.
//
// Policies are not among them: they are revisions of the catalog (a
// ReleaseStore is also the Catalog), and the chain evaluates each policy's
// latest published revision (EnabledPolicies).
//
// Release targets are removed by recomputing them (Targets.TargetsReplace)
// once the deployment, environment or resource no longer selects them.
type ObjectStore interface {
	// Workspaces are the top-level kind.
	Workspaces() Objects[release.Workspace]
	// Systems belong to a workspace.
	Systems() Objects[release.System]
	// Deployments belong to a system.
	Deployments() Objects[release.Deployment]
	// Environments belong to a system.
	Environments() Objects[release.Environment]
	// Resources belong to a workspace.
	Resources() Objects[release.Resource]
	// VariableSets belong to a system: they supply values to the
	// variables of its deployments (release.ResolveVariables).
	VariableSets() Objects[release.VariableSet]
	// JobAgents are top-level.
	JobAgents() Objects[release.JobAgent]
	// RelationshipRules belong to a workspace: they relate its resources,
	// for reference variables (release.ResolveReferences).
	RelationshipRules() Objects[release.RelationshipRule]
}

// ListAll reads every object of parent (all when empty), page by page.
func ListAll[T any](ctx context.Context, objs Objects[T], parent string) ([]Stored[T], error) {
	var out []Stored[T]
	p := ListParams{Parent: parent, Limit: MaxListLimit}
	for {
		page, err := objs.List(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		p.Continue = page.Continue
	}
}

// EnabledPolicies reads the policies the release chain evaluates: the
// latest published revision of every policy in the catalog (drafts and
// proposals never count), the enabled ones, ordered as the rules are
// evaluated: priority highest first, then id. A policy's id is its catalog
// name, its Version the revision number and UpdatedAt the publication time.
func EnabledPolicies(ctx context.Context, cat Catalog) ([]Stored[policy.Policy], error) {
	revs, err := cat.CatalogLatestPublishedAll(ctx, revision.KindPolicy)
	if err != nil {
		return nil, fmt.Errorf("enabled policies: %w", err)
	}
	out := make([]Stored[policy.Policy], 0, len(revs))
	for _, r := range revs {
		p, err := PolicyOf(r)
		if err != nil {
			return nil, fmt.Errorf("enabled policies: %w", err)
		}
		if p.Value.Enabled {
			out = append(out, p)
		}
	}
	SortPolicies(out)
	return out, nil
}

// PolicyOf decodes a published policy revision (validated when it was
// published) as the chain reads it: its id is the catalog name, its
// Version the revision number.
//
// Decoding is memoized by content (policyMemo): the chain reads the same
// few policies with every target, and a rule's strict decoding costs far
// more than a lookup. Each call gets its own Rules slice.
func PolicyOf(r Revision) (Stored[policy.Policy], error) {
	p, ok := policyMemo.get(r.Content)
	if !ok {
		if err := json.Unmarshal(r.Content, &p); err != nil {
			return Stored[policy.Policy]{}, fmt.Errorf("policy %s revision %d: %w", r.Name, r.Revision, err)
		}
		policyMemo.put(r.Content, p)
	}
	p.Rules = slices.Clone(p.Rules)
	p.ID = r.Name
	return Stored[policy.Policy]{Value: p, Version: int64(r.Revision), UpdatedAt: r.PublishedAt.UTC()}, nil
}

// policyMemoSize bounds the policy documents policyMemo keeps; when it is
// full it starts over.
const policyMemoSize = 1024

// policyMemo is the decoding of recently read policy documents, by their
// bytes: the same bytes always decode to the same policy, so an entry is
// never stale. Safe for concurrent use.
var policyMemo = policyDecodings{m: map[string]policy.Policy{}}

// policyDecodings maps policy documents to their decoding.
type policyDecodings struct {
	mu sync.Mutex
	m  map[string]policy.Policy
}

// get is doc's decoding, if kept.
func (c *policyDecodings) get(doc []byte) (policy.Policy, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[string(doc)]
	return v, ok
}

// put keeps v as doc's decoding.
func (c *policyDecodings) put(doc []byte, v policy.Policy) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= policyMemoSize {
		clear(c.m)
	}
	c.m[string(doc)] = v
}

// SortPolicies orders policies by priority, highest first, then id.
func SortPolicies(ps []Stored[policy.Policy]) {
	slices.SortStableFunc(ps, func(a, b Stored[policy.Policy]) int {
		if c := cmp.Compare(b.Value.Priority, a.Value.Priority); c != 0 {
			return c
		}
		return strings.Compare(a.Value.ID, b.Value.ID)
	})
}

// continuePrefix marks continue tokens, so a token of another listing (or
// a made-up one) is refused rather than silently misread.
const continuePrefix = "o1:"

// ContinueToken is the Page.Continue that resumes a listing after id.
func ContinueToken(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(continuePrefix + id))
}

// ListCursor checks p for kind k and returns the id the page starts after
// ("" from the start) and the page size.
func ListCursor[T any](k *Kind[T], p ListParams) (after string, limit int, err error) {
	if p.Parent != "" && k.Parent == nil {
		return "", 0, release.Invalid("parent", "a "+k.Name+" has no parent")
	}
	if p.Workspace != "" && k.Parent == nil {
		return "", 0, release.Invalid("workspace", "a "+k.Name+" is in no workspace")
	}
	switch {
	case p.Limit < 0:
		return "", 0, release.Invalid("limit", "must not be negative")
	case p.Limit > MaxListLimit:
		return "", 0, release.Invalid("limit", fmt.Sprintf("must be at most %d", MaxListLimit))
	case p.Limit == 0:
		limit = DefaultListLimit
	default:
		limit = p.Limit
	}
	if p.Continue == "" {
		return "", limit, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(p.Continue)
	if err != nil || !strings.HasPrefix(string(b), continuePrefix) || !utf8.Valid(b) || len(b) == len(continuePrefix) {
		return "", 0, release.Invalid("continue", "is not a continue token")
	}
	return strings.TrimPrefix(string(b), continuePrefix), limit, nil
}

// CheckDelete checks a delete's expected version.
func CheckDelete(expectedVersion int64) error {
	if expectedVersion <= 0 {
		return release.Invalid("expected_version", "must be the stored version (> 0)")
	}
	return nil
}
