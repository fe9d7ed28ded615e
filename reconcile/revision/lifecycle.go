package revision

import (
	"fmt"
	"regexp"
)

// Lifecycle is the state of one revision of a catalog object.
type Lifecycle string

// The lifecycle states. Absent is the pseudo-state of a revision that does
// not exist (before it is created, after it is deleted); it is never stored.
const (
	Absent           Lifecycle = ""
	Draft            Lifecycle = "draft"
	Proposed         Lifecycle = "proposed"
	Published        Lifecycle = "published"
	DeletionProposed Lifecycle = "deletion-proposed"
)

// Lifecycles lists the stored lifecycle states in their natural order.
var Lifecycles = []Lifecycle{Draft, Proposed, Published, DeletionProposed}

// Valid reports whether l is a stored lifecycle state (Absent is not).
func (l Lifecycle) Valid() bool {
	switch l {
	case Draft, Proposed, Published, DeletionProposed:
		return true
	}
	return false
}

// Open reports whether a revision in l is an open draft: Draft or Proposed,
// unpublished, its content still editable. An object has at most one.
func (l Lifecycle) Open() bool { return l == Draft || l == Proposed }

// IsPublished reports whether a revision in l has been published: Published
// or DeletionProposed. Such a revision has a number and frozen content.
func (l Lifecycle) IsPublished() bool { return l == Published || l == DeletionProposed }

// String returns the lifecycle's name, "absent" for Absent.
func (l Lifecycle) String() string {
	if l == Absent {
		return "absent"
	}
	return string(l)
}

// Kind is the kind of a catalog object.
type Kind string

// The catalog kinds.
const (
	KindWorkflowTemplate Kind = "workflow-template"
	KindPolicy           Kind = "policy"
)

// Kinds lists the catalog kinds.
var Kinds = []Kind{KindWorkflowTemplate, KindPolicy}

// Valid reports whether k is a catalog kind.
func (k Kind) Valid() bool { return k == KindWorkflowTemplate || k == KindPolicy }

// MaxNameLen is the longest object name accepted.
const MaxNameLen = 253

// nameRe is the shape of an object name: lower-case letters, digits, '-' and
// '.', starting and ending with a letter or digit (as workflow templates).
var nameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Object names one catalog object: every revision of a kind and name.
type Object struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
}

// String renders the object as kind/name.
func (o Object) String() string { return string(o.Kind) + "/" + o.Name }

// Validate checks the kind and the name, naming the field that is wrong.
func (o Object) Validate() error {
	var ps []error
	if !o.Kind.Valid() {
		ps = append(ps, fmt.Errorf("kind: %q is not a catalog kind (workflow-template or policy)", o.Kind))
	}
	switch {
	case o.Name == "":
		ps = append(ps, fmt.Errorf("name: required"))
	case len(o.Name) > MaxNameLen || !nameRe.MatchString(o.Name):
		ps = append(ps, fmt.Errorf("name: %q is not a valid name (lower-case letters, digits, '-' and '.', at most %d)", o.Name, MaxNameLen))
	}
	return Invalid(ps...)
}
