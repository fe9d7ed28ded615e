package secretdest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/configmap"
	"github.com/reconcilerhq/reconciler/internal/secretdest"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func TestAllowMatchesReferenceAndDestination(t *testing.T) {
	p, err := secretdest.Parse("env:RECONCILER_SECRET_GH_*=https://api.github.com",
		"file:/secrets/argo/*=https://argocd.internal:8443/api", "env:RECONCILER_SECRET_HOOK=http://127.0.0.1:9000")
	require.NoError(t, err)
	for _, tc := range []struct {
		name, ref, dest string
		ok              bool
	}{
		{"bound host", "env:RECONCILER_SECRET_GH_TOKEN", "https://api.github.com/repos/a/b/dispatches", true},
		{"default port spelled", "env:RECONCILER_SECRET_GH_TOKEN", "https://api.github.com:443", true},
		{"host case", "env:RECONCILER_SECRET_GH_TOKEN", "https://API.GitHub.com/x", true},
		{"other reference", "env:RECONCILER_SECRET_CANARY", "https://api.github.com", false},
		{"other host", "env:RECONCILER_SECRET_GH_TOKEN", "http://127.0.0.1:9000", false},
		{"host as prefix of another", "env:RECONCILER_SECRET_GH_TOKEN", "https://api.github.com.evil.example", false},
		{"user info trick", "env:RECONCILER_SECRET_GH_TOKEN", "https://api.github.com@evil.example/", false},
		{"scheme downgrade", "env:RECONCILER_SECRET_GH_TOKEN", "http://api.github.com", false},
		{"path under prefix", "file:/secrets/argo/token", "https://argocd.internal:8443/api/v1/applications", true},
		{"path prefix not on a segment", "file:/secrets/argo/token", "https://argocd.internal:8443/apix", false},
		{"path outside prefix", "file:/secrets/argo/token", "https://argocd.internal:8443/", false},
		{"dot-dot out of the prefix", "file:/secrets/argo/token", "https://argocd.internal:8443/api/../admin", false},
		{"encoded dot-dot out of the prefix", "file:/secrets/argo/token", "https://argocd.internal:8443/api%2F..%2Fadmin", false},
		{"other port", "file:/secrets/argo/token", "https://argocd.internal/api", false},
		{"glob stays in its directory", "file:/secrets/argo/x/token", "https://argocd.internal:8443/api", false},
		{"exact reference and port", "env:RECONCILER_SECRET_HOOK", "http://127.0.0.1:9000/hook", true},
		{"not a URL", "env:RECONCILER_SECRET_HOOK", "127.0.0.1:9000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Allow(tc.ref, tc.dest)
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, secretdest.ErrRefused)
			require.Contains(t, err.Error(), tc.ref)
		})
	}
}

func TestRefusalNamesReferenceDestinationAndFlag(t *testing.T) {
	p, err := secretdest.Parse()
	require.NoError(t, err)
	err = p.Allow("env:RECONCILER_SECRET_CANARY", "http://127.0.0.1:4567/api/v3?x=y")
	require.EqualError(t, err, "secret destination refused: secret env:RECONCILER_SECRET_CANARY is not bound to http://127.0.0.1:4567/api/v3; "+
		"serve --secret-destination 'env:RECONCILER_SECRET_CANARY=http://127.0.0.1:4567' allows it")
}

func TestDefaultsAreTheVendorHostsOnly(t *testing.T) {
	p, err := secretdest.Parse()
	require.NoError(t, err)
	for _, d := range []string{"https://api.github.com", "https://app.terraform.io/api/v2", "https://api.datadoghq.com", "https://api.datadoghq.eu"} {
		require.NoError(t, p.Allow("env:RECONCILER_SECRET_ANY", d), d)
	}
	for _, d := range []string{"http://127.0.0.1:8080", "https://github.example.com/api/v3", "http://169.254.169.254/latest"} {
		require.ErrorIs(t, p.Allow("env:RECONCILER_SECRET_ANY", d), secretdest.ErrRefused, d)
	}
}

func TestParseRefusesBadBindings(t *testing.T) {
	for _, s := range []string{"", "env:X", "=https://a", "env:X=", "env:[=https://a", "env:X=ftp://a", "env:X=https://", "env:X=https://u:p@a",
		"env:X=https://a?q=1", "env:X=a.example"} {
		_, err := secretdest.Parse(s)
		require.ErrorContains(t, err, "--secret-destination", s)
	}
}

func TestResolverResolvesOnlyForABoundDestination(t *testing.T) {
	p, err := secretdest.Parse("env:RECONCILER_SECRET_GH=https://api.github.com")
	require.NoError(t, err)
	r := secretdest.Resolver{Next: configmap.Secrets{"env:RECONCILER_SECRET_GH": "tok", "env:RECONCILER_SECRET_CANARY": "canary"}, Policy: p}
	ref := func(s string) release.SecretRef { return release.SecretRef{Ref: s} }

	v, err := r.Resolve(ports.WithSecretDestination(context.Background(), "https://api.github.com/repos"), ref("env:RECONCILER_SECRET_GH"))
	require.NoError(t, err)
	require.Equal(t, "tok", v)

	_, err = r.Resolve(ports.WithSecretDestination(context.Background(), "http://127.0.0.1:1234"), ref("env:RECONCILER_SECRET_CANARY"))
	require.ErrorIs(t, err, secretdest.ErrRefused)
	require.NotContains(t, err.Error(), "canary")

	_, err = r.Resolve(context.Background(), ref("env:RECONCILER_SECRET_GH"))
	require.ErrorIs(t, err, secretdest.ErrRefused, "no destination: fails closed")
	require.ErrorContains(t, err, "names no destination")

	v, err = r.Resolve(ports.SelfAddressedSecret(context.Background()), ref("env:RECONCILER_SECRET_CANARY"))
	require.NoError(t, err)
	require.Equal(t, "canary", v)
}
