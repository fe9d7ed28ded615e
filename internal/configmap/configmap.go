// Package configmap reads typed fields out of the JSON-like config maps
// of job agents (job_agent_config) and verification providers
// (provider.config). Every refusal is a *release.FieldError naming the
// field by its full path, so the CLI and the API can point at it.
//
// Invariants: One start per job id in a process; reports follow `JobEdges`,
// at most one terminal; a follower's watch ends with it; with a `Lease` a
// follower renews its job's lease every third of it until the run ends or a
// renewal is refused as invalid (the job ended elsewhere); `Resume` keeps
// one follower per job in a process and starts following again once it ended
package configmap

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Reader reads one config map; the first refusal sticks in Err and later
// reads return zero values, so a parser reads every field and checks Err
// once.
type Reader struct {
	// Prefix is the path of the map ("job_agent_config").
	Prefix string
	Map    map[string]any
	Err    error
}

// Field is the full path of key.
func (r *Reader) Field(key string) string { return release.Field(r.Prefix, key) }

// Fail records a refusal of key (the first one wins).
func (r *Reader) Fail(key, msg string) {
	if r.Err == nil {
		r.Err = release.Invalid(r.Field(key), msg)
	}
}

// String reads an optional string; def when absent or null.
func (r *Reader) String(key, def string) string {
	v, ok := r.Map[key]
	if !ok || v == nil {
		return def
	}
	s, ok := v.(string)
	if !ok {
		r.Fail(key, fmt.Sprintf("want a string, got %s", typeName(v)))
		return def
	}
	return s
}

// Required reads a string that must be present and not blank.
func (r *Reader) Required(key string) string {
	s := r.String(key, "")
	if strings.TrimSpace(s) == "" {
		if _, ok := r.Map[key]; !ok || r.Err == nil {
			r.Fail(key, "is required")
		}
	}
	return s
}

// Bool reads an optional boolean.
func (r *Reader) Bool(key string, def bool) bool {
	v, ok := r.Map[key]
	if !ok || v == nil {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		r.Fail(key, fmt.Sprintf("want true or false, got %s", typeName(v)))
		return def
	}
	return b
}

// Int reads an optional whole number in [lo, hi]; def when absent or
// null.
func (r *Reader) Int(key string, def, lo, hi int) int {
	v, ok := r.Map[key]
	if !ok || v == nil {
		return def
	}
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case int:
		n = float64(x)
	case int64:
		n = float64(x)
	default:
		r.Fail(key, fmt.Sprintf("want a whole number, got %s", typeName(v)))
		return def
	}
	if n != float64(int(n)) || n < float64(lo) || n > float64(hi) {
		r.Fail(key, fmt.Sprintf("want a whole number from %d to %d, got %v", lo, hi, v))
		return def
	}
	return int(n)
}

// List reads an optional list of strings; nil when absent or null.
func (r *Reader) List(key string) []string {
	v, ok := r.Map[key]
	if !ok || v == nil {
		return nil
	}
	var out []string
	switch x := v.(type) {
	case []string:
		out = append(out, x...)
	case []any:
		out = make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				r.Fail(fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("want a string, got %s", typeName(e)))
				return nil
			}
			out = append(out, s)
		}
	default:
		r.Fail(key, fmt.Sprintf("want a list of strings, got %s", typeName(v)))
		return nil
	}
	return out
}

// Duration reads an optional non-negative Go duration string ("5m").
func (r *Reader) Duration(key string, def time.Duration) time.Duration {
	s := r.String(key, "")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		r.Fail(key, fmt.Sprintf("want a non-negative duration such as \"5m\", got %q", s))
		return def
	}
	return d
}

// URL reads an http(s) base URL without a trailing slash; def when
// absent; required when def is empty.
func (r *Reader) URL(key, def string) string {
	s := r.String(key, def)
	if s == "" {
		r.Fail(key, "is required")
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.Fail(key, fmt.Sprintf("want an http(s) URL such as \"https://host\", got %q", s))
		return ""
	}
	if u.User != nil {
		r.Fail(key, "must not carry credentials; use a secret reference")
		return ""
	}
	return strings.TrimRight(s, "/")
}

// Strings reads an optional object of scalar values as strings (numbers
// and booleans are formatted as JSON writes them).
func (r *Reader) Strings(key string) map[string]string {
	v, ok := r.Map[key]
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.Fail(key, fmt.Sprintf("want an object of strings, got %s", typeName(v)))
		return nil
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		switch x := e.(type) {
		case string:
			out[k] = x
		case bool:
			out[k] = strconv.FormatBool(x)
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case int:
			out[k] = strconv.Itoa(x)
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		default:
			r.Fail(key+"."+k, fmt.Sprintf("want a string, number or boolean, got %s", typeName(e)))
			return nil
		}
	}
	return out
}

// SecretRef reads a secret reference ("env:NAME" or "file:/path"); def
// when absent; required when def is empty. The value is the reference,
// never the secret.
func (r *Reader) SecretRef(key, def string) string {
	s := r.String(key, def)
	if s == "" {
		r.Fail(key, "is required: a secret reference such as \"env:RECONCILER_SECRET_TOKEN\"")
		return ""
	}
	if scheme, name, ok := strings.Cut(s, ":"); !ok || name == "" || (scheme != "env" && scheme != "file") {
		r.Fail(key, "want a secret reference env:NAME or file:/path, not the secret itself")
		return ""
	}
	return s
}

// Resolve resolves a secret reference read by SecretRef through secrets;
// a failure names the field and the reference, never a value.
func Resolve(ctx context.Context, secrets ports.SecretResolver, field, ref string) (string, error) {
	if secrets == nil {
		return "", release.Invalid(field, "no secret resolver is configured to read "+ref)
	}
	v, err := secrets.Resolve(ctx, release.SecretRef{Ref: ref})
	if err != nil {
		return "", &release.FieldError{Field: field, Msg: "secret " + ref + " cannot be read: " + err.Error(), Err: err}
	}
	return v, nil
}

// ResolveTo is Resolve for a secret about to be sent to dest (the URL the
// call goes to): a resolver that binds references to destinations
// (secretdest.Resolver) refuses a destination the operator did not bind to
// ref, and the refusal names the field.
func ResolveTo(ctx context.Context, secrets ports.SecretResolver, field, ref, dest string) (string, error) {
	return Resolve(ports.WithSecretDestination(ctx, dest), secrets, field, ref)
}

// typeName names a JSON value's type for messages.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// Secrets is a fixed ports.SecretResolver over a map from reference to
// value, for tests and embedders that hold their credentials in memory.
type Secrets map[string]string

var _ ports.SecretResolver = Secrets(nil)

// Resolve returns the value of ref.Ref, or an error naming the reference.
func (s Secrets) Resolve(_ context.Context, ref release.SecretRef) (string, error) {
	v, ok := s[ref.Ref]
	if !ok {
		return "", fmt.Errorf("secret %s is not set", ref.Ref)
	}
	return v, nil
}
