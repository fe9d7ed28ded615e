package catalog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// Validator checks the content of one kind's object; it returns nil or the
// problems found (a *revision.ValidationError or any error).
type Validator = func(content []byte) error

// Config tunes a Service.
type Config struct {
	// Validators holds each kind's own validation, run after the schema
	// check on every content change and again on propose and approve. A
	// nil map means DefaultValidators (workflow's and policy's full checks);
	// a kind missing from a non-nil map gets the schema check only.
	Validators map[revision.Kind]func(content []byte) error
	// NewID returns a fresh revision id; nil means random hex ids.
	NewID func() string
	// PolicyChanged, when set, is called whenever a write changes which
	// revision of a policy is the latest published one (approve,
	// propose-delete, undo-propose-delete, a Policies write) with that
	// policy before and after (nil: none), inside the write's transaction
	// when Tx is set, so what it enqueues commits with the write. Its error
	// undoes the write.
	PolicyChanged func(ctx context.Context, before, after *policy.Policy) error
	// Tx makes a policy write and PolicyChanged one transaction; nil runs
	// them one after the other.
	Tx ports.Transactor
}

// Service runs the catalog's operations over a ports.Catalog.
type Service struct {
	store         ports.Catalog
	validators    map[revision.Kind]func(content []byte) error
	newID         func() string
	policyChanged func(ctx context.Context, before, after *policy.Policy) error
	tx            ports.Transactor
}

// New returns a service over store.
func New(store ports.Catalog, cfg Config) *Service {
	s := &Service{store: store, validators: cfg.Validators, newID: cfg.NewID, policyChanged: cfg.PolicyChanged, tx: cfg.Tx}
	if s.validators == nil {
		s.validators = DefaultValidators()
	}
	if s.newID == nil {
		s.newID = randomID
	}
	return s
}

// AnnotationRejectReason is the annotation Reject records its reason under;
// Approve removes it.
const AnnotationRejectReason = "catalog.reconciler.dev/reject-reason"

// LockKey is the try-lock key of an object: every mutation of any of its
// revisions holds it.
func LockKey(obj revision.Object) string { return "catalog/" + obj.String() }

// CreateParams describes a new draft.
type CreateParams struct {
	Kind revision.Kind
	Name string
	// Content is the draft's document. When empty, From names the published
	// revision whose content the draft starts from.
	Content json.RawMessage
	From    int
	// Labels and Annotations are the draft's metadata.
	Labels      map[string]string
	Annotations map[string]string
	// By names who creates the draft (recorded as its CreatedBy).
	By string
}

// Change names a revision and the version the caller last read.
type Change struct {
	Ref     ports.RevisionRef
	Version int64
}

// EditParams replaces the content of an open draft.
type EditParams struct {
	Ref     ports.RevisionRef
	Version int64
	Content json.RawMessage
	// By names who edits it (recorded as its EditedBy).
	By string
}

// ApproveParams publishes a proposed revision.
type ApproveParams struct {
	Ref      ports.RevisionRef
	Version  int64
	Approver string
}

// RejectParams sends a proposed revision back to draft with a reason.
type RejectParams struct {
	Ref     ports.RevisionRef
	Version int64
	Reason  string
}

// MetadataParams replaces labels and annotations; a nil map keeps the stored
// one, an empty map clears it.
type MetadataParams struct {
	Ref         ports.RevisionRef
	Version     int64
	Labels      map[string]string
	Annotations map[string]string
}

// Create opens a new Draft revision of an object that has no open draft.
func (s *Service) Create(ctx context.Context, p CreateParams) (ports.Revision, error) {
	obj := revision.Object{Kind: p.Kind, Name: p.Name}
	fail := func(err error) (ports.Revision, error) {
		return ports.Revision{}, fmt.Errorf("create %s: %w", obj, asConflict(err))
	}
	var src error
	switch {
	case len(p.Content) > 0 && p.From != 0:
		src = fmt.Errorf("from: must be empty when content is given")
	case len(p.Content) == 0 && p.From < 0:
		src = fmt.Errorf("from: %d is not a revision number", p.From)
	}
	if err := revision.Invalid(obj.Validate(), src, validateMetadata(p.Labels, p.Annotations)); err != nil {
		return fail(err)
	}
	unlock, err := s.store.CatalogTryLock(ctx, LockKey(obj))
	if err != nil {
		return fail(err)
	}
	defer unlock()

	content := p.Content
	if len(content) == 0 && p.From > 0 {
		base, err := s.GetRevision(ctx, obj, p.From)
		if err != nil {
			return fail(err)
		}
		content = base.Content
	}
	open, err := s.store.CatalogList(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name, Lifecycles: []revision.Lifecycle{revision.Draft, revision.Proposed}})
	if err != nil {
		return fail(err)
	}
	if len(open) > 0 {
		return fail(ports.CatalogConflict("%s already has an open draft %s (%s)", obj, open[0].ID, open[0].Lifecycle))
	}
	if err := s.validateContent(obj.Kind, content); err != nil {
		return fail(err)
	}
	rev, err := s.store.CatalogCreate(ctx, ports.Revision{
		Kind: obj.Kind, Name: obj.Name, ID: s.newID(), Lifecycle: revision.Draft,
		Content: content, Labels: p.Labels, Annotations: p.Annotations, CreatedBy: p.By,
	})
	if err != nil {
		return fail(err)
	}
	return rev, nil
}

// Edit replaces the content of a Draft or Proposed revision.
func (s *Service) Edit(ctx context.Context, p EditParams) (ports.Revision, error) {
	return s.change(ctx, "edit", Change{p.Ref, p.Version}, func(d *ports.Revision) error {
		if err := revision.CheckContentChange(d.Lifecycle); err != nil {
			return err
		}
		d.Content, d.EditedBy = p.Content, p.By
		return nil
	})
}

// Propose moves a Draft to Proposed, ready for review.
func (s *Service) Propose(ctx context.Context, c Change) (ports.Revision, error) {
	return s.change(ctx, "propose", c, s.lifecycle(revision.OpPropose, nil))
}

// Unpropose moves a Proposed revision back to Draft for rework.
func (s *Service) Unpropose(ctx context.Context, c Change) (ports.Revision, error) {
	return s.change(ctx, "unpropose", c, s.lifecycle(revision.OpUnpropose, nil))
}

// Approve publishes a Proposed revision: it gets the next number and records
// the approver.
func (s *Service) Approve(ctx context.Context, p ApproveParams) (ports.Revision, error) {
	if p.Approver == "" {
		return ports.Revision{}, fmt.Errorf("approve %s: %w", p.Ref, revision.Invalid(fmt.Errorf("approver: required")))
	}
	return s.change(ctx, "approve", Change{p.Ref, p.Version}, s.lifecycle(revision.OpApprove, func(d *ports.Revision) {
		d.ApprovedBy = p.Approver
		delete(d.Annotations, AnnotationRejectReason)
	}))
}

// Reject sends a Proposed revision back to Draft, recording the reason as
// the AnnotationRejectReason annotation.
func (s *Service) Reject(ctx context.Context, p RejectParams) (ports.Revision, error) {
	if p.Reason == "" {
		return ports.Revision{}, fmt.Errorf("reject %s: %w", p.Ref, revision.Invalid(fmt.Errorf("reason: required")))
	}
	return s.change(ctx, "reject", Change{p.Ref, p.Version}, s.lifecycle(revision.OpReject, func(d *ports.Revision) {
		d.Annotations[AnnotationRejectReason] = p.Reason
	}))
}

// ProposeDelete marks a Published revision for deletion.
func (s *Service) ProposeDelete(ctx context.Context, c Change) (ports.Revision, error) {
	return s.change(ctx, "propose-delete", c, s.lifecycle(revision.OpProposeDelete, nil))
}

// UndoProposeDelete returns a DeletionProposed revision to Published.
func (s *Service) UndoProposeDelete(ctx context.Context, c Change) (ports.Revision, error) {
	return s.change(ctx, "undo-propose-delete", c, s.lifecycle(revision.OpUndoProposeDelete, nil))
}

// UpdateMetadata replaces labels and annotations, in any lifecycle.
func (s *Service) UpdateMetadata(ctx context.Context, p MetadataParams) (ports.Revision, error) {
	if err := validateMetadata(p.Labels, p.Annotations); err != nil {
		return ports.Revision{}, fmt.Errorf("update metadata %s: %w", p.Ref, err)
	}
	return s.change(ctx, "update metadata", Change{p.Ref, p.Version}, func(d *ports.Revision) error {
		if p.Labels != nil {
			d.Labels = maps.Clone(p.Labels)
		}
		if p.Annotations != nil {
			d.Annotations = maps.Clone(p.Annotations)
		}
		return nil
	})
}

// Delete removes a Draft, Proposed or DeletionProposed revision.
func (s *Service) Delete(ctx context.Context, c Change) error {
	fail := func(err error) error { return fmt.Errorf("delete %s: %w", c.Ref, asConflict(err)) }
	cur, unlock, err := s.open(ctx, c)
	if err != nil {
		return fail(err)
	}
	defer unlock()
	if _, err := revision.Apply(cur.Lifecycle, revision.OpDelete); err != nil {
		return fail(err)
	}
	if err := s.store.CatalogDelete(ctx, c.Ref, c.Version); err != nil {
		return fail(err)
	}
	return nil
}

// Get reads one revision.
func (s *Service) Get(ctx context.Context, ref ports.RevisionRef) (ports.Revision, error) {
	r, err := s.store.CatalogGet(ctx, ref)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("get %s: %w", ref, err)
	}
	return r, nil
}

// List returns the revisions matching p.
func (s *Service) List(ctx context.Context, p ports.CatalogListParams) ([]ports.Revision, error) {
	rs, err := s.store.CatalogList(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list revisions: %w", err)
	}
	return rs, nil
}

// LatestPublished returns the highest-numbered Published revision of the
// object, what new work should start from.
func (s *Service) LatestPublished(ctx context.Context, obj revision.Object) (ports.Revision, error) {
	r, err := s.store.CatalogLatestPublished(ctx, obj.Kind, obj.Name)
	if err != nil {
		return ports.Revision{}, fmt.Errorf("latest published %s: %w", obj, err)
	}
	return r, nil
}

// GetRevision returns the revision of obj published as number, Published or
// DeletionProposed: what in-flight work pins.
func (s *Service) GetRevision(ctx context.Context, obj revision.Object, number int) (ports.Revision, error) {
	if number <= 0 {
		return ports.Revision{}, fmt.Errorf("get %s revision %d: %w", obj, number,
			revision.Invalid(fmt.Errorf("revision: %d is not a revision number", number)))
	}
	rs, err := s.store.CatalogList(ctx, ports.CatalogListParams{Kind: obj.Kind, Name: obj.Name, Revision: number})
	if err != nil {
		return ports.Revision{}, fmt.Errorf("get %s revision %d: %w", obj, number, err)
	}
	if len(rs) == 0 {
		return ports.Revision{}, fmt.Errorf("get %s revision %d: %w", obj, number, ports.ErrNotFound)
	}
	return rs[0], nil
}

// lifecycle returns a mutation that moves the draft along the op's edge and
// then applies also, if any.
func (s *Service) lifecycle(op revision.Op, also func(d *ports.Revision)) func(d *ports.Revision) error {
	return func(d *ports.Revision) error {
		to, err := revision.Apply(d.Lifecycle, op)
		if err != nil {
			return err
		}
		d.Lifecycle = to
		if also != nil {
			also(d)
		}
		return nil
	}
}

// open validates the change's ref, takes the object's lock and reads the
// revision at the expected version. The caller must call unlock.
func (s *Service) open(ctx context.Context, c Change) (ports.Revision, func(), error) {
	if err := ports.ValidateRevisionRef(c.Ref); err != nil {
		return ports.Revision{}, nil, err
	}
	unlock, err := s.store.CatalogTryLock(ctx, LockKey(c.Ref.Object()))
	if err != nil {
		return ports.Revision{}, nil, err
	}
	cur, err := s.store.CatalogGet(ctx, c.Ref)
	if err != nil {
		unlock()
		return ports.Revision{}, nil, err
	}
	if cur.Version != c.Version {
		unlock()
		return ports.Revision{}, nil, ports.CatalogConflict("revision %s changed: expected version %d, stored %d", c.Ref, c.Version, cur.Version)
	}
	return cur, unlock, nil
}

// change is the draft-commit of every update: lock, read at the expected
// version, apply mutate to a working copy, validate, and commit the
// difference in one compare-and-swap write. Nothing is written unless every
// step before the write succeeds.
func (s *Service) change(ctx context.Context, op string, c Change, mutate func(d *ports.Revision) error) (ports.Revision, error) {
	fail := func(err error) (ports.Revision, error) {
		return ports.Revision{}, fmt.Errorf("%s %s: %w", op, c.Ref, asConflict(err))
	}
	cur, unlock, err := s.open(ctx, c)
	if err != nil {
		return fail(err)
	}
	defer unlock()

	d := cur
	d.Labels, d.Annotations = cloneOrEmpty(cur.Labels), cloneOrEmpty(cur.Annotations)
	if err := mutate(&d); err != nil {
		return fail(err)
	}
	contentChanged := !bytes.Equal(d.Content, cur.Content)
	revalidate := contentChanged || (d.Lifecycle != cur.Lifecycle && (d.Lifecycle == revision.Proposed || d.Lifecycle == revision.Published) && cur.Lifecycle.Open())
	var contentErr error
	if revalidate {
		contentErr = s.validateContent(d.Kind, d.Content)
	}
	if err := revision.Invalid(contentErr, validateMetadata(d.Labels, d.Annotations)); err != nil {
		return fail(err)
	}
	up := ports.CatalogUpdateParams{
		Ref: c.Ref, ExpectedVersion: c.Version, Lifecycle: d.Lifecycle,
		Labels: d.Labels, Annotations: d.Annotations, ApprovedBy: d.ApprovedBy, EditedBy: d.EditedBy,
	}
	if contentChanged {
		up.Content = d.Content
	}
	var out ports.Revision
	write := func(ctx context.Context) (err error) {
		out, err = s.store.CatalogUpdate(ctx, up)
		return err
	}
	if d.Kind == revision.KindPolicy && d.Lifecycle != cur.Lifecycle {
		err = s.policyWrite(ctx, d.Name, write)
	} else {
		err = write(ctx)
	}
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// policyWrite runs fn, a write that may change policy name's latest
// published revision, with the PolicyChanged hook in one transaction (see
// Config).
func (s *Service) policyWrite(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if s.policyChanged == nil {
		return fn(ctx)
	}
	run := func(ctx context.Context) error {
		before, err := s.latestPolicy(ctx, name)
		if err != nil {
			return err
		}
		if err := fn(ctx); err != nil {
			return err
		}
		after, err := s.latestPolicy(ctx, name)
		if err != nil {
			return err
		}
		if reflect.DeepEqual(before, after) {
			return nil
		}
		return s.policyChanged(ctx, before, after)
	}
	if s.tx == nil {
		return run(ctx)
	}
	return s.tx.InTx(ctx, run)
}

// latestPolicy reads the latest published revision of a policy; nil when
// none.
func (s *Service) latestPolicy(ctx context.Context, name string) (*policy.Policy, error) {
	r, err := s.store.CatalogLatestPublished(ctx, revision.KindPolicy, name)
	if errors.Is(err, ports.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := ports.PolicyOf(r)
	if err != nil {
		return nil, err
	}
	return &p.Value, nil
}

// validateContent runs the schema check, then the kind's validator.
func (s *Service) validateContent(kind revision.Kind, content []byte) error {
	if err := ports.ValidateRevisionContent(content); err != nil {
		return err
	}
	v := s.validators[kind]
	if v == nil {
		return nil
	}
	err := v(content)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, revision.ErrValidation):
		return revision.Invalid(err)
	}
	return revision.Invalid(fmt.Errorf("content: %w", err))
}

// MaxMetadataKeyLen is the longest label or annotation key accepted;
// MaxLabelValueLen and MaxAnnotationValueLen the longest values.
const (
	MaxMetadataKeyLen     = 253
	MaxLabelValueLen      = 1024
	MaxAnnotationValueLen = 64 << 10
)

// validateMetadata checks label and annotation keys and values: keys and
// label values hold no control character, annotation values none but
// tab, newline and carriage return.
// labelKeyRe is the grammar of a label key (as Kubernetes label keys, with
// an optional prefix/): labels are selected on, so a key holds no space,
// '=' or '!'.
var labelKeyRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$`)

func validateMetadata(labels, annotations map[string]string) error {
	var ps []error
	for _, f := range []struct {
		field    string
		m        map[string]string
		maxValue int
		// multiline allows tab, newline and carriage return in values.
		multiline bool
	}{{"labels", labels, MaxLabelValueLen, false}, {"annotations", annotations, MaxAnnotationValueLen, true}} {
		for _, k := range slices.Sorted(maps.Keys(f.m)) {
			v := f.m[k]
			switch {
			case k == "" || len(k) > MaxMetadataKeyLen:
				ps = append(ps, fmt.Errorf("%s: key %q must be 1 to %d bytes", f.field, k, MaxMetadataKeyLen))
			case hasControl(k, false):
				ps = append(ps, fmt.Errorf("%s: key %q must not contain a control character", f.field, k))
			case f.field == "labels" && !labelKeyRe.MatchString(k):
				ps = append(ps, fmt.Errorf("%s: key %q must be letters, digits, '-', '_', '.' or '/', starting and ending with a letter or digit", f.field, k))
			case len(v) > f.maxValue:
				ps = append(ps, fmt.Errorf("%s.%s: the value is %d bytes long; at most %d", f.field, k, len(v), f.maxValue))
			case hasControl(v, f.multiline):
				ps = append(ps, fmt.Errorf("%s.%s: the value must not contain a control character", f.field, k))
			}
		}
	}
	return revision.Invalid(ps...)
}

// hasControl reports whether s is not valid UTF-8 or holds a control
// character (C0, DEL, C1), except tab, newline and carriage return when
// multiline.
func hasControl(s string, multiline bool) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unicode.IsControl(r) && !(multiline && (r == '\t' || r == '\n' || r == '\r')) {
			return true
		}
	}
	return false
}

// asConflict makes a conflict match both revision.ErrConflict and
// ports.ErrConflict, whichever side it came from.
func asConflict(err error) error {
	isPorts, isRev := errors.Is(err, ports.ErrConflict), errors.Is(err, revision.ErrConflict)
	switch {
	case isPorts && !isRev:
		return &revision.ConflictError{Message: err.Error(), Err: err}
	case isRev && !isPorts:
		return fmt.Errorf("%w (%w)", err, ports.ErrConflict)
	}
	return err
}

// cloneOrEmpty copies m into a non-nil map.
func cloneOrEmpty(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

// randomID returns 16 random hex digits.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
