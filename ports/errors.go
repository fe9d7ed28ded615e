package ports

import "errors"

// ErrConflict is returned when a compare-and-swap write lost the race or a
// try-lock is held: the caller re-reads and tries again. APIs map it to 409.
var ErrConflict = errors.New("conflict")

// ErrLimitReached is returned when a write would take a capped resource over
// its cap (Jobs.JobCreate with MaxActiveInEnvironment): nothing was
// written; the caller waits for something to finish and tries again.
var ErrLimitReached = errors.New("limit reached")

// ErrBusy is returned when a call could not get a share of the store in
// its bounded wait (ports.LaneRead): nothing was read or written; the
// caller answers "busy, retry later" (HTTP 503 with Retry-After).
var ErrBusy = errors.New("busy")
