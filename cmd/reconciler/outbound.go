package main

import (
	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/internal/netguard"
)

// outboundOptions configure where serve's outbound clients may connect.
type outboundOptions struct {
	allow []string
	guard *netguard.Guard
}

// outboundFlags binds --outbound-allow.
func outboundFlags(f *pflag.FlagSet, o *outboundOptions) {
	f.StringSliceVar(&o.allow, "outbound-allow", nil,
		"a CIDR, address or host name the job agents, verification providers, workflow webhook tasks and the code host may reach although it is loopback, private, link-local, CGNAT, unspecified or multicast (repeatable, or comma-separated); every other such address is refused after DNS resolution")
}

// check builds the guard, naming the flag on a bad entry.
func (o *outboundOptions) check() error {
	g, err := netguard.New(o.allow...)
	if err != nil {
		return usagef("%v", err)
	}
	o.guard = g
	return nil
}
