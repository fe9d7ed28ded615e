// Package secretdest decides where a secret may be sent: the operator
// binds secret references to the destinations they may go to
// (`serve --secret-destination 'REF_PATTERN=URL_PREFIX'`), and a secret is
// resolved for an outbound call only when the call's destination matches a
// destination bound to its reference.
//
// The destination travels in the context (ports.WithSecretDestination); Resolver wraps
// the daemon's ports.SecretResolver and refuses a reference whose
// destination is not bound to it, or a resolution that names no
// destination at all, so a call site that forgets to say where the value
// goes fails closed. A kubeconfig names its own server, which the caller
// cannot choose (ports.SelfAddressedSecret).
//
// Invariants: a refusal names the reference, the destination and the flag,
// never a value; no rule, no resolution (without flags the vendor default
// hosts of DefaultRules hold); matching is by scheme, host and port (the
// scheme's default port filled in) and a path prefix on segment boundaries
// of the decoded, cleaned path, never by string prefix, so `https://api.github.com.evil.example` and
// `https://api.github.com@evil.example` do not match `https://api.github.com`.
package secretdest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Flag is the serve flag that binds references to destinations, named in
// every refusal.
const Flag = "--secret-destination"

// DefaultRules hold when the operator gives no binding: any secret may go
// to the vendors' own API hosts (GitHub, Terraform Cloud, Datadog's sites),
// whose answers never echo a credential back, and nowhere else.
var DefaultRules = []string{
	"*=https://api.github.com",
	"*=https://app.terraform.io",
	"*=https://api.datadoghq.com",
	"*=https://api.datadoghq.eu",
	"*=https://api.us3.datadoghq.com",
	"*=https://api.us5.datadoghq.com",
	"*=https://api.ap1.datadoghq.com",
	"*=https://api.ddog-gov.com",
}

// ErrRefused is wrapped by every refusal to resolve a secret for a
// destination.
var ErrRefused = errors.New("secret destination refused")

// Rule binds the references Pattern matches (a path.Match glob over the
// whole reference, e.g. "env:RECONCILER_SECRET_GH_*") to the destinations
// under Prefix.
type Rule struct {
	Pattern string
	Prefix  string
	prefix  target
}

// target is a parsed URL prefix or destination.
type target struct {
	scheme, host, port, path string
}

// Policy is the operator's bindings; the zero value refuses everything.
type Policy struct {
	rules []Rule
}

// Parse reads bindings "REF_PATTERN=URL_PREFIX"; none gives DefaultRules.
// An error names the flag and the binding.
func Parse(specs ...string) (*Policy, error) {
	if len(specs) == 0 {
		specs = DefaultRules
	}
	p := &Policy{}
	for _, s := range specs {
		pat, prefix, ok := strings.Cut(strings.TrimSpace(s), "=")
		if !ok || pat == "" || prefix == "" {
			return nil, fmt.Errorf("%s %q: want REF_PATTERN=URL_PREFIX, e.g. 'env:RECONCILER_SECRET_GH_*=https://api.github.com'", Flag, s)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("%s %q: bad reference pattern %q: %w", Flag, s, pat, err)
		}
		t, err := parse(prefix)
		if err == nil {
			u, _ := url.Parse(prefix)
			if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				err = fmt.Errorf("%q: a URL prefix has no user info, query or fragment", prefix)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", Flag, s, err)
		}
		p.rules = append(p.rules, Rule{Pattern: pat, Prefix: prefix, prefix: t})
	}
	return p, nil
}

// Rules are the policy's bindings, in order.
func (p *Policy) Rules() []Rule {
	if p == nil {
		return nil
	}
	return p.rules
}

// parse reads an absolute http(s) URL into a target (its user info, query
// and fragment play no part).
func parse(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("not a URL %q", raw)
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "http" && scheme != "https") || u.Host == "" || u.Opaque != "" {
		return target{}, fmt.Errorf("%q is not an http(s) URL with a host", raw)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	// The path decoded and cleaned, so "/api/../admin" and
	// "/api%2F..%2Fadmin" are not under "/api".
	clean := path.Clean("/" + u.Path)
	return target{scheme: scheme, host: strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")), port: port,
		path: strings.TrimSuffix(clean, "/")}, nil
}

// under reports whether d lies under prefix p: same scheme, host and port,
// and p's path a prefix of d's on a segment boundary.
func (p target) under(d target) bool {
	if p.scheme != d.scheme || p.host != d.host || p.port != d.port {
		return false
	}
	return p.path == "" || d.path == p.path || strings.HasPrefix(d.path, p.path+"/")
}

// Allow returns nil when the secret ref may be sent to dest, else an error
// wrapping ErrRefused that names the reference, the destination and the
// flag that would allow it.
func (p *Policy) Allow(ref, dest string) error {
	d, err := parse(dest)
	if err != nil {
		return fmt.Errorf("%w: secret %s may not be sent there: %w", ErrRefused, ref, err)
	}
	for _, r := range p.Rules() {
		if ok, _ := path.Match(r.Pattern, ref); ok && r.prefix.under(d) {
			return nil
		}
	}
	return fmt.Errorf("%w: secret %s is not bound to %s; serve %s '%s=%s' allows it", ErrRefused, ref, origin(d)+d.path, Flag, ref, origin(d))
}

// origin is d's scheme, host and port, as a binding would name it.
func origin(d target) string {
	host := d.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if (d.scheme == "https" && d.port == "443") || (d.scheme == "http" && d.port == "80") {
		return d.scheme + "://" + host
	}
	return d.scheme + "://" + net.JoinHostPort(d.host, d.port)
}

// Resolver is a ports.SecretResolver that resolves through Next only for a
// destination Policy binds to the reference.
type Resolver struct {
	Next   ports.SecretResolver
	Policy *Policy
}

var _ ports.SecretResolver = Resolver{}

// Resolve refuses, before Next reads anything, a reference whose context
// names no destination or one the policy does not bind to it.
func (r Resolver) Resolve(ctx context.Context, ref release.SecretRef) (string, error) {
	dest, self, ok := ports.SecretDestination(ctx)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: secret %s: the call names no destination to check against %s", ErrRefused, ref.Ref, Flag)
	case self:
	default:
		if err := r.Policy.Allow(ref.Ref, dest); err != nil {
			return "", err
		}
	}
	return r.Next.Resolve(ctx, ref)
}
