package netguard_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/netguard"
)

// TestRefusal: each class of address a user-chosen URL must not reach is
// refused by default, public addresses are not, and an allowed CIDR lifts
// the refusal for its addresses only.
func TestRefusal(t *testing.T) {
	t.Parallel()
	var g *netguard.Guard
	for addr, want := range map[string]string{
		"127.0.0.1": "loopback", "::1": "loopback", "10.1.2.3": "private", "172.16.0.1": "private",
		"192.168.1.1": "private", "fd00::1": "private", "169.254.169.254": "link-local", "fe80::1": "link-local",
		"0.0.0.0": "unspecified", "::": "unspecified", "239.1.2.3": "multicast", "224.0.0.1": "link-local", "100.64.0.1": "carrier-grade NAT",
		"::ffff:127.0.0.1": "loopback", "93.184.216.34": "", "2606:4700::1": "",
	} {
		require.Equal(t, want, g.Refusal(netip.MustParseAddr(addr)), addr)
	}
	allow := netguard.MustNew("10.0.0.0/8", "192.168.1.7")
	require.Empty(t, allow.Refusal(netip.MustParseAddr("10.9.9.9")))
	require.Empty(t, allow.Refusal(netip.MustParseAddr("192.168.1.7")))
	require.Equal(t, "private", allow.Refusal(netip.MustParseAddr("192.168.1.8")))
	require.Equal(t, "loopback", allow.Refusal(netip.MustParseAddr("127.0.0.1")))
	for _, bad := range []string{"", "10.0.0.0/33", "a b", "http://x", ".example"} {
		_, err := netguard.New(bad)
		require.ErrorContains(t, err, netguard.Flag, "%q", bad)
	}
}

// TestDialRefusesAfterResolution: a URL whose host name resolves to
// loopback is refused when the connection is made, naming the address and
// the flag; the server never sees a request. Allowing the host by name, or
// loopback by CIDR, lets it through.
func TestDialRefusesAfterResolution(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	get := func(g *netguard.Guard, host string) error {
		c := &http.Client{Transport: g.Transport()}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/", nil)
		require.NoError(t, err)
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	err = get(nil, "localhost") // a name: resolved, then refused
	require.ErrorIs(t, err, netguard.ErrRefused)
	require.ErrorContains(t, err, "loopback")
	require.ErrorContains(t, err, "--outbound-allow")
	require.Error(t, get(nil, "127.0.0.1"))
	require.Zero(t, hits.Load(), "nothing reached the server")

	require.NoError(t, get(netguard.MustNew("localhost"), "localhost"))
	require.NoError(t, get(netguard.Loopback, "127.0.0.1"))
	require.EqualValues(t, 2, hits.Load())
	require.False(t, errors.Is(get(netguard.Loopback, "127.0.0.1"), netguard.ErrRefused))
}
