// Package netguard keeps the daemon's outbound connections off the
// addresses a user-chosen URL must not reach: loopback, private (RFC 1918,
// unique local), carrier-grade NAT, link-local (cloud metadata at
// 169.254.169.254 among them), unspecified and multicast addresses, unless
// the operator allows them (serve --outbound-allow CIDR|host).
//
// Invariants: the check is on the address a connection is actually made
// to, after DNS resolution, so a name that resolves (or re-resolves) to a
// refused address is refused, and so is a redirect to one, since every
// connection is dialed through the guard; an allowed host name is matched
// before resolution, exactly and case-insensitively; a refusal names the
// address, why it is refused and the flag that would allow it.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Flag is the serve flag that allows an address; refusals name it.
const Flag = "--outbound-allow"

// ErrRefused is the error of a refused connection (errors.Is).
var ErrRefused = errors.New("outbound address refused")

// Guard decides which outbound addresses may be dialed. The zero value and
// nil refuse every class Refusal names and allow the rest.
type Guard struct {
	prefixes []netip.Prefix
	hosts    map[string]bool
}

// New returns a guard allowing, besides public addresses, each entry of
// allow: a CIDR ("10.0.0.0/8", "127.0.0.1/32"), an address ("127.0.0.1",
// "::1") or a host name ("argocd.internal"). An entry that is none of them
// is an error naming it.
func New(allow ...string) (*Guard, error) {
	g := &Guard{hosts: map[string]bool{}}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			return nil, fmt.Errorf("%s: an empty entry", Flag)
		case strings.Contains(a, "/"):
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("%s %q: not a CIDR: %w", Flag, a, err)
			}
			g.prefixes = append(g.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(a); err == nil {
				g.prefixes = append(g.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			if strings.ContainsAny(a, ":/ ") || strings.HasPrefix(a, ".") || strings.HasSuffix(a, ".") {
				return nil, fmt.Errorf("%s %q: want a CIDR, an address or a host name", Flag, a)
			}
			g.hosts[strings.ToLower(a)] = true
		}
	}
	return g, nil
}

// MustNew is New for allow lists known to be valid (tests, constants).
func MustNew(allow ...string) *Guard {
	g, err := New(allow...)
	if err != nil {
		panic(err)
	}
	return g
}

// Loopback allows loopback addresses only besides public ones: for tests
// against servers on this machine.
var Loopback = MustNew("127.0.0.0/8", "::1/128")

// Refusal says why ip may not be dialed ("loopback", "private", ...), or
// "" when it may.
func (g *Guard) Refusal(ip netip.Addr) string {
	ip = ip.Unmap()
	if g != nil {
		for _, p := range g.prefixes {
			if p.Contains(ip) {
				return ""
			}
		}
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	case ip.IsPrivate():
		return "private"
	case cgnat.Contains(ip):
		return "carrier-grade NAT"
	}
	return ""
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// allowsHost reports whether host (a name, not an address) is allowed by
// name.
func (g *Guard) allowsHost(host string) bool {
	return g != nil && g.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// check refuses the connection to address (IP:port) unless it may be made.
func (g *Guard) check(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRefused, address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is no address", ErrRefused, address)
	}
	if why := g.Refusal(ip); why != "" {
		return fmt.Errorf("%w: %s is a %s address; serve %s %s allows it", ErrRefused, address, why, Flag, ip.Unmap())
	}
	return nil
}

// DialContext dials like a net.Dialer with timeout, refusing a connection
// to an address the guard refuses (checked on the resolved address), unless
// addr's host is an allowed host name.
func (g *Guard) DialContext(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
		if host, _, err := net.SplitHostPort(addr); err != nil || !g.allowsHost(host) {
			d.Control = func(_, address string, _ syscall.RawConn) error { return g.check(address) }
		}
		return d.DialContext(ctx, network, addr)
	}
}

// Transport is an http.Transport like http.DefaultTransport whose every
// connection goes through the guard (proxies from the environment are not
// used: a proxy would make the connection, unchecked).
func (g *Guard) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = g.DialContext(30 * time.Second)
	return t
}
