package ports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// RevisionRef names one revision of a catalog object.
type RevisionRef struct {
	Kind revision.Kind `json:"kind"`
	Name string        `json:"name"`
	ID   string        `json:"id"`
}

// Object returns the catalog object the revision belongs to.
func (r RevisionRef) Object() revision.Object {
	return revision.Object{Kind: r.Kind, Name: r.Name}
}

// String renders the ref as kind/name@id.
func (r RevisionRef) String() string { return string(r.Kind) + "/" + r.Name + "@" + r.ID }

// Revision is one stored revision of a workflow template or policy.
type Revision struct {
	Kind revision.Kind `json:"kind"`
	Name string        `json:"name"`
	// ID identifies the revision within its object; it never changes.
	ID string `json:"id"`
	// Revision is the number given at publication; 0 while unpublished.
	Revision  int                `json:"revision"`
	Lifecycle revision.Lifecycle `json:"lifecycle"`
	// Content is the object's document, a JSON object kept byte for byte.
	Content     json.RawMessage   `json:"content"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Version is the compare-and-swap token: every write bumps it.
	Version int64 `json:"version"`
	// ApprovedBy names who approved the publication; empty until then.
	ApprovedBy string `json:"approved_by,omitempty"`
	// CreatedBy names who created the revision; EditedBy who last changed
	// its content (empty until an edit).
	CreatedBy   string    `json:"created_by,omitempty"`
	EditedBy    string    `json:"edited_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	PublishedAt time.Time `json:"published_at,omitzero"`
}

// Ref returns the revision's ref.
func (r Revision) Ref() RevisionRef { return RevisionRef{Kind: r.Kind, Name: r.Name, ID: r.ID} }

// Object returns the catalog object the revision belongs to.
func (r Revision) Object() revision.Object {
	return revision.Object{Kind: r.Kind, Name: r.Name}
}

// CatalogUpdateParams is one compare-and-swap write of a stored revision.
// Nil or empty fields keep what is stored; a non-nil empty map clears.
type CatalogUpdateParams struct {
	Ref             RevisionRef
	ExpectedVersion int64
	// Lifecycle, when set, moves the revision along an edge of
	// revision.Edges.
	Lifecycle revision.Lifecycle
	// Content, when set, replaces the content of an open draft.
	Content     json.RawMessage
	Labels      map[string]string
	Annotations map[string]string
	// ApprovedBy is recorded when the write publishes (Proposed →
	// Published), where it is required; other writes ignore it.
	ApprovedBy string
	// EditedBy is recorded when the write changes the content; other
	// writes ignore it.
	EditedBy string
}

// CatalogListParams filters a listing; zero fields match everything.
type CatalogListParams struct {
	Kind revision.Kind
	Name string
	// Lifecycles keeps revisions in any of these states.
	Lifecycles []revision.Lifecycle
	// Revision keeps the revision with this published number.
	Revision int
}

// Catalog stores the revisions of workflow templates and policies.
//
// Invariants (checked by porttest.Catalog):
//   - Revisions are created only as Draft, at version 1 and number 0; an
//     object holds at most one open draft (Draft or Proposed), and a second
//     one is a conflict.
//   - Every write is a compare-and-swap on Version and bumps it; a stale
//     version is a conflict and changes nothing, so of two writes with the
//     same version exactly one wins. A missing revision is ErrNotFound.
//   - Every write obeys revision.CheckUpdate: lifecycle changes follow
//     revision.Edges (ErrInvalidTransition), published content never changes
//     (ErrImmutable), publishing names the approver.
//   - Publishing assigns revision.NextNumber of the highest number the object
//     ever had, so numbers strictly increase and are never reused, and
//     records ApprovedBy and PublishedAt.
//   - Published revisions are never deleted; other deletions are CAS too.
//   - Conflicts are *revision.ConflictError wrapping ErrConflict, so
//     errors.Is matches both revision.ErrConflict and ErrConflict.
//   - Bad input is a *revision.ValidationError naming the field.
//   - CatalogLatestPublishedAll agrees with CatalogLatestPublished for every
//     object of the kind.
type Catalog interface {
	// CatalogCreate stores a new Draft revision (an empty Lifecycle means
	// Draft); the caller's number, version, approver and times are ignored.
	CatalogCreate(ctx context.Context, rev Revision) (Revision, error)
	// CatalogGet reads one revision.
	CatalogGet(ctx context.Context, ref RevisionRef) (Revision, error)
	// CatalogList returns the matching revisions ordered by kind, name,
	// then published ones by number, then open drafts.
	CatalogList(ctx context.Context, p CatalogListParams) ([]Revision, error)
	// CatalogUpdate applies one compare-and-swap write and returns the
	// stored result.
	CatalogUpdate(ctx context.Context, p CatalogUpdateParams) (Revision, error)
	// CatalogDelete removes a Draft, Proposed or DeletionProposed revision
	// whose version is expectedVersion.
	CatalogDelete(ctx context.Context, ref RevisionRef, expectedVersion int64) error
	// CatalogLatestPublished returns the highest-numbered revision of the
	// object in the Published state (DeletionProposed ones are on their way
	// out), or ErrNotFound.
	CatalogLatestPublished(ctx context.Context, kind revision.Kind, name string) (Revision, error)
	// CatalogLatestPublishedAll returns, for every object of kind that has
	// a Published revision, its CatalogLatestPublished revision, by name.
	CatalogLatestPublishedAll(ctx context.Context, kind revision.Kind) ([]Revision, error)
	// CatalogTryLock takes the exclusive lock on key without waiting: a held
	// key is a conflict "another change to <key> is in progress". The lock
	// excludes every holder of the same store, across processes where the
	// store is shared. unlock releases it; calling it again does nothing.
	CatalogTryLock(ctx context.Context, key string) (unlock func(), err error)
}

// MaxRevisionIDLen is the longest revision id accepted.
const MaxRevisionIDLen = 128

// revisionIDRe is the shape of a revision id.
var revisionIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidateRevisionRef checks the kind, name and id of a ref, naming each
// field that is wrong.
func ValidateRevisionRef(ref RevisionRef) error {
	var idErr error
	switch {
	case ref.ID == "":
		idErr = fmt.Errorf("id: required")
	case len(ref.ID) > MaxRevisionIDLen || !revisionIDRe.MatchString(ref.ID):
		idErr = fmt.Errorf("id: %q is not a valid revision id (letters, digits, '.', '_' and '-', at most %d)", ref.ID, MaxRevisionIDLen)
	}
	return revision.Invalid(ref.Object().Validate(), idErr)
}

// ValidateRevisionContent checks that content is a JSON object; a syntax
// error names its line and column. No string (key or value) may hold a
// control character other than tab, newline and carriage return (which
// template strings legitimately hold): a NUL character (\u0000) because
// Postgres stores no NUL in text or jsonb, so such a revision could be
// stored by one store and never loaded or run by the other; the others
// (ESC and the rest of C0, DEL, C1) because they reach terminals and logs
// raw. The error names the field.
func ValidateRevisionContent(content json.RawMessage) error {
	if len(bytes.TrimSpace(content)) == 0 {
		return revision.Invalid(fmt.Errorf("content: required"))
	}
	var obj map[string]json.RawMessage
	err := json.Unmarshal(content, &obj)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset counts the bytes read up to and including the bad one.
		line, col := strictjson.Position(content, max(se.Offset-1, 0))
		return revision.Invalid(fmt.Errorf("content: syntax error at line %d, column %d: %s", line, col, se.Error()))
	case err != nil || obj == nil:
		return revision.Invalid(fmt.Errorf("content: must be a JSON object"))
	case !utf8.Valid(content):
		return revision.Invalid(fmt.Errorf("content: not valid UTF-8"))
	case mayHoldControl(content):
		// A cheap filter: only content that may hold one is walked.
		var doc any
		if err := json.Unmarshal(content, &doc); err == nil {
			if path, r, found := controlPath(doc, "content"); found {
				if r == 0 {
					return revision.Invalid(fmt.Errorf("%s: must not contain a NUL character (\\u0000)", path))
				}
				return revision.Invalid(fmt.Errorf("%s: must not contain the control character %U (only tab, newline and carriage return are allowed)", path, r))
			}
		}
	}
	return nil
}

// mayHoldControl reports whether JSON text may decode to a string with a
// refused control character: JSON holds C0 characters only escaped (\u,
// \b, \f), and DEL and C1 characters raw or escaped.
func mayHoldControl(content []byte) bool {
	if bytes.Contains(content, []byte(`\u`)) || bytes.Contains(content, []byte(`\b`)) ||
		bytes.Contains(content, []byte(`\f`)) || bytes.IndexByte(content, 0x7f) >= 0 {
		return true
	}
	for i := bytes.IndexByte(content, 0xc2); i >= 0 && i+1 < len(content); {
		if c := content[i+1]; c >= 0x80 && c <= 0x9f {
			return true // U+0080..U+009F in UTF-8
		}
		j := bytes.IndexByte(content[i+1:], 0xc2)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return false
}

// refusedControl returns the first control character of s other than tab,
// newline and carriage return.
func refusedControl(s string) (rune, bool) {
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return r, true
		}
	}
	return 0, false
}

// controlPath returns the path (content.spec.tasks[0].name) of the first
// string of v, key or value in key order, that holds a refused control
// character, and that character.
func controlPath(v any, path string) (string, rune, bool) {
	switch v := v.(type) {
	case string:
		r, found := refusedControl(v)
		return path, r, found
	case []any:
		for i, e := range v {
			if p, r, ok := controlPath(e, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, r, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if r, found := refusedControl(k); found {
				return fmt.Sprintf("%s (a key %q)", path, k), r, true
			}
			if p, r, ok := controlPath(v[k], path+"."+k); ok {
				return p, r, true
			}
		}
	}
	return "", 0, false
}

// CatalogConflict returns a *revision.ConflictError with a formatted message
// wrapping ErrConflict, the one shape of every catalog conflict.
func CatalogConflict(format string, args ...any) error {
	return &revision.ConflictError{Message: fmt.Sprintf(format, args...), Err: ErrConflict}
}

// CatalogLockConflict is the conflict CatalogTryLock returns for a held key.
func CatalogLockConflict(key string) error {
	return CatalogConflict("another change to %s is in progress", key)
}
