package revision

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinel errors of the catalog; match them with errors.Is.
var (
	// ErrConflict is a change that lost a race or collides with another
	// object: a stale version, a held lock, a second open draft.
	ErrConflict = errors.New("conflict")
	// ErrInvalidTransition is a lifecycle change that is not an edge.
	ErrInvalidTransition = errors.New("invalid lifecycle transition")
	// ErrImmutable is a content change of a published revision.
	ErrImmutable = errors.New("immutable")
	// ErrValidation is input that fails validation.
	ErrValidation = errors.New("validation failed")
)

// ConflictError is a conflict with a message saying what collided. It
// matches ErrConflict and also whatever Err it wraps (stores wrap
// ports.ErrConflict so every catalog conflict satisfies both).
type ConflictError struct {
	Message string
	Err     error
}

// Conflict returns a *ConflictError with a formatted message.
func Conflict(format string, args ...any) error {
	return &ConflictError{Message: fmt.Sprintf(format, args...)}
}

// Error returns the message.
func (e *ConflictError) Error() string {
	if e.Message == "" {
		return ErrConflict.Error()
	}
	return e.Message
}

// Is matches ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the wrapped error, if any.
func (e *ConflictError) Unwrap() error { return e.Err }

// TransitionError is a refused lifecycle change: op (when known) from From
// would not lead to To. It matches ErrInvalidTransition.
type TransitionError struct {
	From Lifecycle
	To   Lifecycle
	Op   Op
}

// Error says which change was refused.
func (e *TransitionError) Error() string {
	switch {
	case e.Op != "" && e.To == Absent && e.From == Absent:
		return fmt.Sprintf("%s: cannot %s a revision that does not exist", ErrInvalidTransition, e.Op)
	case e.Op != "" && e.To == Absent:
		return fmt.Sprintf("%s: cannot %s a %s revision", ErrInvalidTransition, e.Op, e.From)
	case e.Op != "":
		return fmt.Sprintf("%s: cannot %s a %s revision to %s", ErrInvalidTransition, e.Op, e.From, e.To)
	}
	return fmt.Sprintf("%s: %s → %s is not allowed", ErrInvalidTransition, e.From, e.To)
}

// Is matches ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// ValidationError carries every problem found in one input. It matches
// ErrValidation and unwraps to each problem.
type ValidationError struct {
	Problems []error
}

// Invalid returns a *ValidationError of the non-nil problems, flattening
// nested ValidationErrors, or nil when there are none.
func Invalid(problems ...error) error {
	var ps []error
	for _, p := range problems {
		if p == nil {
			continue
		}
		if ve, ok := p.(*ValidationError); ok {
			ps = append(ps, ve.Problems...)
			continue
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Problems: ps}
}

// Error lists the problems.
func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return ErrValidation.Error() + ": " + strings.Join(msgs, "; ")
}

// Is matches ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// Unwrap returns the problems.
func (e *ValidationError) Unwrap() []error { return e.Problems }
