package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/adapters/kubernetesjob"
	"github.com/reconcilerhq/reconciler/adapters/webhookagent"
	"github.com/reconcilerhq/reconciler/ports"
)

// TestEveryIntegrationHasAConfigValidator keeps the validators in step
// with what serve registers: a config of every external type can be
// checked before it is stored.
func TestEveryIntegrationHasAConfigValidator(t *testing.T) {
	t.Parallel()
	in := newIntegrations(nil, nil, nil, time.Minute, nil, kubernetesjob.Limits{})
	defer in.close()
	for typ, a := range in.agents {
		require.Equal(t, typ, a.Type())
		if typ != webhookagent.Type { // push: the receiver reports, nothing to follow
			require.NotNil(t, ports.ResumerOf(a), "%s resumes its jobs after a restart", typ)
			require.Equal(t, time.Minute, ports.JobLeaseOf(a), typ)
		}
		v, ok := agentConfigValidators[typ]
		require.True(t, ok, "no config validator for job agent type %s", typ)
		require.ErrorContains(t, v(map[string]any{}), "job_agent_config.", typ)
	}
	for typ, p := range in.verifiers {
		require.Equal(t, typ, p.Type())
		v, ok := providerConfigValidators[typ]
		require.True(t, ok, "no config validator for provider type %s", typ)
		require.ErrorContains(t, v(map[string]any{}), "provider.config.", typ)
	}
	require.Len(t, agentConfigValidators, len(in.agents))
	require.Len(t, providerConfigValidators, len(in.verifiers))
}
