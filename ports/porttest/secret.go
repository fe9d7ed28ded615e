package porttest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// SecretFixture is one ports.SecretResolver under test, holding the secrets
// the suite asked for.
type SecretFixture struct {
	Resolver ports.SecretResolver
	// Ref returns the reference to the held secret name.
	Ref func(name string) release.SecretRef
	// Missing is a well-formed reference to a secret the resolver does not
	// hold.
	Missing release.SecretRef
}

// suiteSecrets are the secrets the SecretResolver suite asks a fixture to
// hold: values with spaces, separators, quotes and non-ASCII, and two that
// differ in one byte.
var suiteSecrets = map[string]string{
	"TOKEN":    "t0k3n-7f3a9c",
	"PASSWORD": "pa ss=wo:rd\"'$",
	"UNICODE":  "clé-秘密-🔑",
	"TWIN_A":   "twin-value-a",
	"TWIN_B":   "twin-value-b",
}

// SecretResolver is the conformance suite of ports.SecretResolver. setup
// returns a resolver holding the given secrets (name → value; values have
// no trailing newline); it is called once per subtest and subtests run in
// parallel.
//
// It checks that every held secret resolves to exactly its value, the
// same every time and under concurrent calls (run it with -race); that a
// reference to a secret not held, and malformed references (empty, no
// scheme, no name, unknown scheme, ciphertext the resolver cannot
// decrypt), are errors and never panic; that a destination in the
// context changes no value; that a missing reference's error
// names the reference; and that no error ever contains a secret value.
func SecretResolver(t *testing.T, setup func(t *testing.T, secrets map[string]string) SecretFixture) {
	t.Run("ResolvesEachSecretToItsValue", func(t *testing.T) {
		t.Parallel()
		f := setup(t, suiteSecrets)
		for name, want := range suiteSecrets {
			for range 2 {
				got, err := f.Resolver.Resolve(t.Context(), f.Ref(name))
				require.NoError(t, err, name)
				require.Equal(t, want, got, name)
			}
		}
	})
	t.Run("ADestinationChangesNoValue", func(t *testing.T) {
		// The destination in the context (ports.WithSecretDestination) is
		// for a binding resolver in front of this one; a store resolves
		// the same value whatever it says.
		t.Parallel()
		f := setup(t, suiteSecrets)
		for _, ctx := range []context.Context{ports.WithSecretDestination(t.Context(), "https://api.example.com/v1"),
			ports.SelfAddressedSecret(t.Context())} {
			got, err := f.Resolver.Resolve(ctx, f.Ref("TOKEN"))
			require.NoError(t, err)
			require.Equal(t, suiteSecrets["TOKEN"], got)
		}
	})
	t.Run("ConcurrentResolvesAgree", func(t *testing.T) {
		t.Parallel()
		f := setup(t, suiteSecrets)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Go(func() {
				name := []string{"TOKEN", "PASSWORD", "UNICODE", "TWIN_A", "TWIN_B"}[i%5]
				got, err := f.Resolver.Resolve(t.Context(), f.Ref(name))
				if err == nil && got != suiteSecrets[name] {
					err = &mismatch{name}
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
	t.Run("MissingSecretIsAnErrorNamingTheReference", func(t *testing.T) {
		t.Parallel()
		f := setup(t, suiteSecrets)
		require.NotEmpty(t, f.Missing.Ref, "the fixture names a missing secret by reference")
		got, err := f.Resolver.Resolve(t.Context(), f.Missing)
		require.Error(t, err)
		require.Empty(t, got)
		require.Contains(t, err.Error(), f.Missing.Ref, "the error names the reference")
		requireNoSecretIn(t, err.Error())
	})
	t.Run("MalformedReferencesAreErrors", func(t *testing.T) {
		t.Parallel()
		f := setup(t, suiteSecrets)
		held := f.Ref("TOKEN").Ref
		scheme, _, _ := strings.Cut(held, ":")
		for _, ref := range []release.SecretRef{
			{},
			{Ref: "TOKEN"},
			{Ref: scheme + ":"},
			{Ref: "no-such-scheme:TOKEN"},
			{Ref: ":" + held},
			{Ref: held + "\x00"},
			{Ciphertext: "AAAAbm90LWEtcmVhbC1jaXBoZXJ0ZXh0"},
		} {
			got, err := f.Resolver.Resolve(t.Context(), ref)
			require.Error(t, err, "%#v", ref)
			require.Empty(t, got, "%#v", ref)
			requireNoSecretIn(t, err.Error())
		}
	})
	t.Run("NamesAreExact", func(t *testing.T) {
		t.Parallel()
		f := setup(t, suiteSecrets)
		// A reference is its name, not a prefix or a case-folded form of it.
		for _, near := range []string{"TOKENX", "TOKE", "token", "TWIN_"} {
			ref := f.Ref(near)
			got, err := f.Resolver.Resolve(t.Context(), ref)
			require.Error(t, err, "%#v resolved to %q", ref, got)
			requireNoSecretIn(t, err.Error())
		}
		a, err := f.Resolver.Resolve(t.Context(), f.Ref("TWIN_A"))
		require.NoError(t, err)
		b, err := f.Resolver.Resolve(t.Context(), f.Ref("TWIN_B"))
		require.NoError(t, err)
		require.NotEqual(t, a, b, "two secrets keep their own values")
	})
}

// mismatch reports a secret resolved to a value other than its own,
// without printing either value.
type mismatch struct{ name string }

func (m *mismatch) Error() string { return "secret " + m.name + " resolved to another value" }

// requireNoSecretIn fails when msg contains any of the suite's values.
func requireNoSecretIn(t *testing.T, msg string) {
	t.Helper()
	for name, v := range suiteSecrets {
		require.NotContains(t, msg, v, "an error shows the value of %s", name)
	}
}
