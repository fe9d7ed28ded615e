package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/reconcilerhq/reconciler/adapters/argocd"
	"github.com/reconcilerhq/reconciler/adapters/argoworkflows"
	"github.com/reconcilerhq/reconciler/adapters/datadog"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/adapters/kubernetesjob"
	"github.com/reconcilerhq/reconciler/adapters/prometheus"
	"github.com/reconcilerhq/reconciler/adapters/terraformcloud"
	"github.com/reconcilerhq/reconciler/adapters/webhookagent"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/internal/kube"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/secretdest"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// outboundOptions configure where serve's outbound clients may connect,
// where they may send secrets and where kubernetes-job may run pods: what
// a token that writes job agents may make serve do.
type outboundOptions struct {
	allow       []string
	guard       *netguard.Guard
	secretDests []string
	secretDest  *secretdest.Policy
	kube        kubernetesjob.Limits
}

// outboundFlags binds --outbound-allow and --secret-destination.
func outboundFlags(f *pflag.FlagSet, o *outboundOptions) {
	f.StringSliceVar(&o.allow, "outbound-allow", nil,
		"a CIDR, address or host name the job agents, verification providers, workflow webhook tasks and the code host may reach although it is loopback, private, link-local, CGNAT, unspecified or multicast (repeatable, or comma-separated); every other such address is refused after DNS resolution")
	f.StringArrayVar(&o.secretDests, "secret-destination", nil,
		"REF_PATTERN=URL_PREFIX: the secret references the glob matches (env:RECONCILER_SECRET_GH_*, file:/secrets/argo/*) may be sent by job agents, verification providers and workflow tasks to URLs under the prefix (scheme://host[:port][/path]) (repeatable); a secret goes nowhere else. Without it: any secret to https://api.github.com, https://app.terraform.io and Datadog's API sites (https://api.datadoghq.com, .eu, us3, us5, ap1, ddog-gov) only")
	f.StringSliceVar(&o.kube.Namespaces, "kubernetes-namespace", nil,
		"a namespace kubernetes-job agents may create Jobs in (repeatable, or comma-separated); default: the namespace serve runs in, else default")
	f.StringSliceVar(&o.kube.ServiceAccounts, "kubernetes-service-account", nil,
		"a service account kubernetes-job pods may run as (repeatable, or comma-separated); default: default")
}

// netGuard is the guard, nil (public addresses only) when o is nil.
func (o *outboundOptions) netGuard() *netguard.Guard {
	if o == nil {
		return nil
	}
	return o.guard
}

// kubeLimits are kubernetes-job's limits, the defaults when o is nil.
func (o *outboundOptions) kubeLimits() kubernetesjob.Limits {
	if o == nil {
		return kubernetesjob.Limits{}
	}
	return o.kube
}

// check builds the guard and the secret destinations, naming the flag on a
// bad entry.
func (o *outboundOptions) check() error {
	g, err := netguard.New(o.allow...)
	if err != nil {
		return usagef("%v", err)
	}
	o.guard = g
	if o.secretDest, err = secretdest.Parse(o.secretDests...); err != nil {
		return usagef("%v", err)
	}
	for flag, names := range map[string][]string{"--kubernetes-namespace": o.kube.Namespaces, "--kubernetes-service-account": o.kube.ServiceAccounts} {
		for _, n := range names {
			if !kube.IsDNSLabel(n) {
				return usagef("%s %q: want a Kubernetes name (lower-case letters, digits and -)", flag, n)
			}
		}
	}
	return nil
}

// secrets wraps the daemon's resolver for the outbound clients: a secret
// resolves only for a destination --secret-destination binds to it.
func (o *outboundOptions) secrets(next ports.SecretResolver) ports.SecretResolver {
	return secretdest.Resolver{Next: next, Policy: o.secretDest}
}

// connection is where a job agent's or verification provider's config
// sends its secrets: the references under refKeys (refDefs[key] when
// absent) go to the URL under urlKey (def when absent).
type connection struct {
	urlKey, def string
	refKeys     []string
	refDefs     map[string]string
}

// agentConnections are the connections of the job agent types that send a
// secret to a URL their config names. kubernetes-job's kubeconfigRef names
// its own server; a pull agent's report_secret and github-actions'
// webhookSecretRef are keys serve checks signatures with, never sent.
var agentConnections = map[string]connection{
	githubactions.Type:  {urlKey: "baseURL", def: githubactions.DefaultBaseURL, refKeys: []string{"tokenRef"}},
	argocd.Type:         {urlKey: "server", refKeys: []string{"tokenRef"}},
	argoworkflows.Type:  {urlKey: "server", refKeys: []string{"tokenRef"}},
	terraformcloud.Type: {urlKey: "address", def: terraformcloud.DefaultAddress, refKeys: []string{"tokenRef"}},
	webhookagent.Type:   {urlKey: "url", refKeys: []string{"secretRef"}},
}

// providerConnections are the verification providers' connections (the
// http provider takes no secret reference).
var providerConnections = map[string]connection{
	datadog.Type: {urlKey: "address", def: datadog.DefaultAddress, refKeys: []string{"apiKeyRef", "appKeyRef"},
		refDefs: map[string]string{"apiKeyRef": datadog.DefaultAPIKeyRef, "appKeyRef": datadog.DefaultAppKeyRef}},
	prometheus.Type:     {urlKey: "address", refKeys: []string{"tokenRef", "passwordRef"}},
	terraformcloud.Type: {urlKey: "address", def: terraformcloud.DefaultAddress, refKeys: []string{"tokenRef"}},
}

// destination is the URL a job of agent type typ with config cfg sends its
// secrets to; empty when the type sends none to a URL or cfg names none.
func destination(typ string, cfg map[string]any) string {
	c, ok := agentConnections[typ]
	if !ok {
		return ""
	}
	if u, ok := cfg[c.urlKey].(string); ok && u != "" {
		return u
	}
	return c.def
}

// check refuses cfg (its fields named under prefix) when a secret
// reference it sends is not bound to its URL. defaults: the URL and the
// references left out take their defaults (a complete config); else a
// config that names no URL passes (another layer may name it).
func (c connection) check(p *secretdest.Policy, prefix string, cfg map[string]any, defaults bool) error {
	dest, _ := cfg[c.urlKey].(string)
	if dest == "" && defaults {
		dest = c.def
	}
	if dest == "" {
		return nil
	}
	for _, key := range c.refKeys {
		ref, _ := cfg[key].(string)
		if ref == "" && defaults {
			ref = c.refDefs[key]
		}
		if ref == "" {
			continue
		}
		if err := p.Allow(ref, dest); err != nil {
			return release.Invalid(prefix+"."+key, fmt.Sprintf("%v (%s.%s)", err, prefix, c.urlKey))
		}
	}
	return nil
}

// withOperatorLimits refuses, after v's check, a job agent config that
// names both a secret reference and, explicitly, a URL the secret may not
// be sent to (422 naming job_agent_config.<ref key>), and a kubernetes-job
// config outside --kubernetes-namespace and --kubernetes-service-account.
// A URL the config leaves to its default (or to a deployment's config) is
// checked when the merged config is, and at dispatch in any case.
func withOperatorLimits(v apply.AgentConfigValidator, o *outboundOptions) apply.AgentConfigValidator {
	return func(typ string, cfg map[string]any) error {
		if err := v(typ, cfg); err != nil {
			return err
		}
		if typ == kubernetesjob.Type {
			return o.kube.Check(cfg)
		}
		if c, ok := agentConnections[typ]; ok {
			return c.check(o.secretDest, "job_agent_config", cfg, false)
		}
		return nil
	}
}

// catalogValidators are the catalog's validators with the policy kind's
// extended: a verification metric whose provider would send a secret to a
// URL not bound to it is refused (422 naming
// rules[i].metrics[j].provider.config.<ref key>).
func (o *outboundOptions) catalogValidators() map[revision.Kind]func(content []byte) error {
	v := catalogValidators()
	base := v[revision.KindPolicy]
	v[revision.KindPolicy] = func(content []byte) error {
		if base != nil {
			if err := base(content); err != nil {
				return err
			}
		}
		pol, err := policy.Decode(content)
		if err != nil {
			return revision.Invalid(err)
		}
		for i, r := range pol.Rules {
			ver, ok := r.Spec.(policy.Verification)
			if !ok {
				continue
			}
			for j, m := range ver.Metrics {
				c, ok := providerConnections[m.Provider.Type]
				if !ok {
					continue
				}
				if err := c.check(o.secretDest, fmt.Sprintf("rules[%d].metrics[%d].provider.config", i, j), m.Provider.Config, true); err != nil {
					return revision.Invalid(err)
				}
			}
		}
		return nil
	}
	return v
}
