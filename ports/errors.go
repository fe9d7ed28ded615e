package ports

import "errors"

// ErrConflict is returned when a compare-and-swap write lost the race or a
// try-lock is held: the caller re-reads and tries again. APIs map it to 409.
var ErrConflict = errors.New("conflict")
