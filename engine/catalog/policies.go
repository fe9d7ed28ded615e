package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// Policies is the object-store view of the catalog's policies, the one way
// a direct write (the API's /policies routes, `reconciler apply`) reaches
// them: the catalog stays the one source of truth the chain reads
// (ports.EnabledPolicies).
//
//   - Get and List read each policy's latest published revision: its id is
//     the catalog name, its Version the revision number.
//   - Put publishes a new revision at once (draft, proposed, published,
//     approved by the writer), compare-and-swap on the latest published
//     number: 0 creates (refused while a revision is published), n > 0
//     replaces revision n. An open draft of the policy (from the catalog
//     commands) is a conflict: finish or delete it first.
//   - Delete proposes every published revision for deletion, newest last,
//     so the policy stops applying in one write; the revisions stay in the
//     catalog (UndoProposeDelete brings them back).
//
// Every operation holds the object's catalog lock (LockKey), as the
// Service's own operations do.
type Policies struct {
	s *Service
	// by is the approver of what Put publishes.
	by string
}

var _ ports.Objects[policy.Policy] = (*Policies)(nil)

// Policies returns the policies view whose writes are approved by by (an
// API token's name, the CLI user); by is required to write.
func (s *Service) Policies(by string) *Policies { return &Policies{s: s, by: by} }

// Get reads the policy's latest published revision.
func (p *Policies) Get(ctx context.Context, id string) (ports.Stored[policy.Policy], error) {
	r, err := p.s.store.CatalogLatestPublished(ctx, revision.KindPolicy, id)
	if err != nil {
		return ports.Stored[policy.Policy]{}, fmt.Errorf("get policy %s: %w", id, err)
	}
	return ports.PolicyOf(r)
}

// List reads one page of policies (their latest published revisions) in id
// order.
func (p *Policies) List(ctx context.Context, lp ports.ListParams) (ports.Page[policy.Policy], error) {
	after, limit, err := ports.ListCursor(&ports.PolicyKind, lp)
	if err != nil {
		return ports.Page[policy.Policy]{}, fmt.Errorf("list policies: %w", err)
	}
	revs, err := p.s.store.CatalogLatestPublishedAll(ctx, revision.KindPolicy)
	if err != nil {
		return ports.Page[policy.Policy]{}, fmt.Errorf("list policies: %w", err)
	}
	var page ports.Page[policy.Policy]
	for _, r := range revs {
		if r.Name <= after {
			continue
		}
		st, err := ports.PolicyOf(r)
		if err != nil {
			return ports.Page[policy.Policy]{}, fmt.Errorf("list policies: %w", err)
		}
		if !inWorkspace(st.Value.WorkspaceID, lp.Parent, lp.Workspace) {
			continue
		}
		if len(page.Items) == limit {
			page.Continue = ports.ContinueToken(page.Items[limit-1].Value.ID)
			break
		}
		page.Items = append(page.Items, st)
	}
	return page, nil
}

// inWorkspace reports whether a policy of workspace ws is kept by a
// listing's parent and workspace filters (for a policy, both name its
// workspace; empty keeps all).
func inWorkspace(ws, parent, workspace string) bool {
	return (parent == "" || ws == parent) && (workspace == "" || ws == workspace)
}

// Put publishes v as the policy's next revision if its latest published
// revision is expectedVersion (0: none), and returns the new revision
// number.
func (p *Policies) Put(ctx context.Context, v policy.Policy, expectedVersion int64) (int64, error) {
	fail := func(err error) (int64, error) { return 0, fmt.Errorf("put policy %s: %w", v.ID, err) }
	if expectedVersion < 0 {
		return fail(release.Invalid("expected_version", "must not be negative"))
	}
	if err := p.check(&v); err != nil {
		return fail(err)
	}
	content, err := json.Marshal(v)
	if err != nil {
		return fail(err)
	}
	if err := p.s.validateContent(revision.KindPolicy, content); err != nil {
		return fail(err)
	}
	obj := revision.Object{Kind: revision.KindPolicy, Name: v.ID}
	unlock, err := p.s.store.CatalogTryLock(ctx, LockKey(obj))
	if err != nil {
		return fail(err)
	}
	defer unlock()
	if err := p.expect(ctx, obj, expectedVersion); err != nil {
		return fail(err)
	}
	var pub ports.Revision
	err = p.s.policyWrite(ctx, obj.Name, func(ctx context.Context) error {
		d, err := p.s.store.CatalogCreate(ctx, ports.Revision{Kind: obj.Kind, Name: obj.Name, ID: p.s.newID(), Content: content, CreatedBy: p.by})
		if err != nil {
			return err
		}
		if pub, err = p.publish(ctx, d); err != nil {
			// Leave no draft behind (it never applied); in a
			// transaction the rollback does it.
			_ = p.s.store.CatalogDelete(ctx, d.Ref(), pub.Version)
			return err
		}
		return nil
	})
	if err != nil {
		return fail(asConflict(err))
	}
	return int64(pub.Revision), nil
}

// publish moves the draft d through Proposed to Published, approved by the
// writer; on failure it returns the draft as last stored.
func (p *Policies) publish(ctx context.Context, d ports.Revision) (ports.Revision, error) {
	prop, err := p.s.store.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: d.Ref(), ExpectedVersion: d.Version, Lifecycle: revision.Proposed})
	if err != nil {
		return d, err
	}
	pub, err := p.s.store.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: d.Ref(), ExpectedVersion: prop.Version,
		Lifecycle: revision.Published, ApprovedBy: p.by})
	if err != nil {
		return prop, err
	}
	return pub, nil
}

// Delete proposes every published revision of the policy for deletion if
// its latest is expectedVersion.
func (p *Policies) Delete(ctx context.Context, id string, expectedVersion int64) error {
	fail := func(err error) error { return fmt.Errorf("delete policy %s: %w", id, err) }
	if err := ports.CheckDelete(expectedVersion); err != nil {
		return fail(err)
	}
	obj := revision.Object{Kind: revision.KindPolicy, Name: id}
	if err := obj.Validate(); err != nil {
		return fail(release.Invalid("id", strings.TrimPrefix(err.Error(), "name: ")))
	}
	unlock, err := p.s.store.CatalogTryLock(ctx, LockKey(obj))
	if err != nil {
		return fail(err)
	}
	defer unlock()
	if err := p.expect(ctx, obj, expectedVersion); err != nil {
		return fail(err)
	}
	// Listed by number: the latest goes last, so until that write the
	// policy applies as it did, and after it not at all.
	pubs, err := p.s.store.CatalogList(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name, Lifecycles: []revision.Lifecycle{revision.Published}})
	if err != nil {
		return fail(err)
	}
	err = p.s.policyWrite(ctx, obj.Name, func(ctx context.Context) error {
		for _, r := range pubs {
			if _, err := p.s.store.CatalogUpdate(ctx, ports.CatalogUpdateParams{Ref: r.Ref(), ExpectedVersion: r.Version,
				Lifecycle: revision.DeletionProposed}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail(asConflict(err))
	}
	return nil
}

// check validates v as a policy stored under its id, and the approver.
func (p *Policies) check(v *policy.Policy) error {
	if err := v.Validate(); err != nil {
		return err
	}
	if err := (revision.Object{Kind: revision.KindPolicy, Name: v.ID}).Validate(); err != nil {
		return release.Invalid("id", strings.TrimPrefix(err.Error(), "name: "))
	}
	if p.by == "" {
		return release.Invalid("approver", "a policy write names who publishes it")
	}
	return nil
}

// expect checks that the policy's latest published revision is want (0:
// none).
func (p *Policies) expect(ctx context.Context, obj revision.Object, want int64) error {
	var have int64
	cur, err := p.s.store.CatalogLatestPublished(ctx, obj.Kind, obj.Name)
	switch {
	case err == nil:
		have = int64(cur.Revision)
	case !errors.Is(err, ports.ErrNotFound):
		return err
	}
	switch {
	case want == 0 && have > 0:
		return ports.CatalogConflict("policy %s exists (revision %d)", obj.Name, have)
	case want > 0 && have == 0:
		return fmt.Errorf("policy %s: %w", obj.Name, ports.ErrNotFound)
	case want != have:
		return ports.CatalogConflict("policy %s changed: expected revision %d, latest published %d", obj.Name, want, have)
	}
	return nil
}
