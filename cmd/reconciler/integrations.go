package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/adapters/argocd"
	"github.com/reconcilerhq/reconciler/adapters/argoworkflows"
	"github.com/reconcilerhq/reconciler/adapters/datadog"
	"github.com/reconcilerhq/reconciler/adapters/githubactions"
	"github.com/reconcilerhq/reconciler/adapters/httpprobe"
	"github.com/reconcilerhq/reconciler/adapters/kubernetesjob"
	"github.com/reconcilerhq/reconciler/adapters/prometheus"
	"github.com/reconcilerhq/reconciler/adapters/terraformcloud"
	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/adapters/webhookagent"
	"github.com/reconcilerhq/reconciler/engine/apply"
	"github.com/reconcilerhq/reconciler/engine/pull"
	"github.com/reconcilerhq/reconciler/internal/jobagent"
	"github.com/reconcilerhq/reconciler/internal/netguard"
	"github.com/reconcilerhq/reconciler/internal/outbound"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// integrations are the external job agents and verifiers serve registers,
// by type.
type integrations struct {
	agents    map[string]ports.JobAgent
	verifiers map[string]ports.Verifier
	closers   []func()
}

// newIntegrations builds the external agents, reporting through report
// and reading credentials through secrets only; their followers hold a
// lease of lease on each job (zero: none), so that a job whose follower
// died with its process is resumed by another (ports.JobResumer).
func newIntegrations(report ports.JobReporter, secrets ports.SecretResolver, log *slog.Logger, lease time.Duration, guard *netguard.Guard,
	kube kubernetesjob.Limits) *integrations {
	o := jobagent.Options{Logger: log, Lease: lease, HTTP: outbound.Options{Guard: guard}}
	gha := githubactions.New(report, secrets, githubactions.Options{Options: o})
	acd := argocd.New(report, secrets, o)
	tfc := terraformcloud.New(report, secrets, o)
	awf := argoworkflows.New(report, secrets, o)
	kjob := kubernetesjob.New(report, secrets, kubernetesjob.Options{Options: o, Limits: kube})
	hook := webhookagent.New(secrets, ports.SystemClock, outbound.Options{Guard: guard})
	return &integrations{
		agents: map[string]ports.JobAgent{githubactions.Type: gha, argocd.Type: acd, terraformcloud.Type: tfc,
			argoworkflows.Type: awf, webhookagent.Type: hook, kubernetesjob.Type: kjob},
		verifiers: map[string]ports.Verifier{
			datadog.Type:        datadog.New(secrets, datadog.Options{HTTP: outbound.Options{Guard: guard}}),
			prometheus.Type:     prometheus.New(secrets, prometheus.Options{HTTP: outbound.Options{Guard: guard}}),
			httpprobe.Type:      httpprobe.New(outbound.Options{Guard: guard}),
			terraformcloud.Type: terraformcloud.NewVerifier(secrets, outbound.Options{Guard: guard}),
		},
		closers: []func(){gha.Close, acd.Close, tfc.Close, awf.Close, hook.Close, kjob.Close},
	}
}

// agentConfigValidators check a job agent record's config by its type,
// before it is stored; each refusal names job_agent_config.<key>.
var agentConfigValidators = map[string]func(map[string]any) error{
	githubactions.Type:  githubactions.ValidateConfig,
	argocd.Type:         argocd.ValidateConfig,
	terraformcloud.Type: terraformcloud.ValidateConfig,
	argoworkflows.Type:  argoworkflows.ValidateConfig,
	webhookagent.Type:   webhookagent.ValidateConfig,
	kubernetesjob.Type:  kubernetesjob.ValidateConfig,
}

// providerConfigValidators check a verification metric's provider config
// by its type; each refusal names provider.config.<key>.
var providerConfigValidators = map[string]func(map[string]any) error{
	datadog.Type:        datadog.ValidateConfig,
	prometheus.Type:     prometheus.ValidateConfig,
	httpprobe.Type:      httpprobe.ValidateConfig,
	terraformcloud.Type: terraformcloud.ValidateProviderConfig,
}

// close stops following external runs.
func (in *integrations) close() {
	for _, c := range in.closers {
		c()
	}
}

// agentConfigValidator is every write path's check of a job agent's config
// by its type: the external agents' validators, the pull agents' and the
// test runner's; the workflow type takes any config; any other type is
// refused, naming "type", since serve runs no agent of it.
func agentConfigValidator() apply.AgentConfigValidator {
	return func(typ string, cfg map[string]any) error {
		switch {
		case typ == testrunner.Type:
			return testrunner.ValidateConfig(cfg)
		case release.IsPullAgentType(typ):
			return pull.ValidateConfig(cfg)
		case typ == release.WorkflowAgentType:
			return nil
		}
		if v, ok := agentConfigValidators[typ]; ok {
			return v(cfg)
		}
		return release.Invalid("type", fmt.Sprintf("unknown job agent type %q; want one of %s", typ, strings.Join(agentTypes(), ", ")))
	}
}

// hmacKeyRefs names, by job agent type, the config keys holding the
// reference of an HMAC key the daemon checks signatures with.
func hmacKeyRefs(typ string) []string {
	switch {
	case release.IsPullAgentType(typ):
		return []string{pull.ReportSecretKey}
	case typ == githubactions.Type:
		return []string{"webhookSecretRef"}
	}
	return nil
}

// withHMACKeys refuses, after v's check, a job agent config whose HMAC key
// reference resolves to an empty key: an empty key would let anyone sign.
// A reference that does not resolve yet passes (it is refused at verify
// time until it does).
func withHMACKeys(v apply.AgentConfigValidator, secrets ports.SecretResolver) apply.AgentConfigValidator {
	return func(typ string, cfg map[string]any) error {
		if err := v(typ, cfg); err != nil {
			return err
		}
		for _, key := range hmacKeyRefs(typ) {
			ref, _ := cfg[key].(string)
			if ref == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			secret, err := secrets.Resolve(ctx, release.SecretRef{Ref: ref})
			cancel()
			if err == nil && secret == "" {
				return release.Invalid("job_agent_config."+key, "the secret "+ref+" is empty: an HMAC key must not be empty")
			}
		}
		return nil
	}
}

// agentTypes are the job agent types serve runs, sorted.
func agentTypes() []string {
	types := []string{testrunner.Type, release.PullAgentType, release.APIAgentType, release.WorkflowAgentType}
	for t := range agentConfigValidators {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}
