package api

import (
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// problem maps the domain's errors onto problem responses: invalid input
// is 422 with the field's location, a missing object 404, a conflict
// (stale version, held lock, taken id, full environment) 409; a lifecycle
// change the revision's state does not allow is invalid input (422). It returns
// nil for any other error, which is not the caller's fault.
func problem(err error) huma.StatusError {
	var inv *workflow.InvalidError
	var fe *release.FieldError
	var ve *revision.ValidationError
	var lift *gate.LiftError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &lift):
		details := make([]error, 0, len(lift.Lifts))
		for _, l := range lift.Lifts {
			details = append(details, &huma.ErrorDetail{Location: "target " + l.Target, Message: "would lift rule " + l.Rule.String()})
		}
		return huma.Error403Forbidden(lift.Error(), details...)
	case errors.As(err, &inv):
		details := make([]error, 0, len(inv.Problems))
		for _, p := range inv.Problems {
			details = append(details, &huma.ErrorDetail{Location: location(p.Path), Message: p.String()})
		}
		return huma.Error422UnprocessableEntity(err.Error(), details...)
	case errors.As(err, &fe):
		return huma.Error422UnprocessableEntity(err.Error(), &huma.ErrorDetail{Location: location(fe.Field), Message: fe.Error()})
	case errors.Is(err, release.ErrInvalid):
		return huma.Error422UnprocessableEntity(err.Error())
	case errors.As(err, &ve):
		details := make([]error, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			details = append(details, &huma.ErrorDetail{Location: "body", Message: p.Error()})
		}
		return huma.Error422UnprocessableEntity(err.Error(), details...)
	case errorsIsAny(err, revision.ErrInvalidTransition, revision.ErrImmutable):
		return huma.Error422UnprocessableEntity(err.Error())
	case errors.Is(err, revision.ErrConflict):
		return huma.Error409Conflict(err.Error())
	case errors.Is(err, ports.ErrNotFound):
		return huma.Error404NotFound(err.Error())
	case errorsIsAny(err, ports.ErrConflict, ports.ErrLimitReached):
		return huma.Error409Conflict(err.Error())
	}
	return nil
}

// StatusOf is the HTTP status and message the API answers for err: the
// problem of a domain error (404, 409, 422, ...), or 500 for any other
// error, which is not the caller's fault. The console maps errors the same
// way.
func StatusOf(err error) (int, string) {
	if p := problem(err); p != nil {
		return p.GetStatus(), p.Error()
	}
	return http.StatusInternalServerError, "internal error"
}

// location is the body location of a domain field path.
func location(field string) string {
	field = strings.TrimPrefix(field, ".")
	if field == "" {
		return "body"
	}
	return "body." + field
}

// invalid is a 422 naming one location.
func invalid(loc, msg string) huma.StatusError {
	return huma.Error422UnprocessableEntity(msg, &huma.ErrorDetail{Location: loc, Message: msg})
}

// requiredProperty matches huma's message for a missing required field,
// which it locates at the parent object.
var requiredProperty = regexp.MustCompile(`^expected required property (\S+) to be present$`)

// init makes huma locate a missing required field at the field itself
// (body.deployment_id rather than body), so every invalid-input problem
// names the field's path. huma.NewError is huma's documented hook for
// shaping errors.
func init() {
	base := huma.NewError
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		for _, e := range errs {
			var d *huma.ErrorDetail
			if errors.As(e, &d) {
				if m := requiredProperty.FindStringSubmatch(d.Message); m != nil {
					d.Location += "." + m[1]
				}
			}
		}
		return base(status, msg, errs...)
	}
}
