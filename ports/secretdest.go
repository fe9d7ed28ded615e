package ports

import "context"

// secretDestKey carries, in a context, where the secrets resolved under it
// are sent.
type secretDestKey struct{}

// selfAddressedSecret is the destination of a secret that names its own
// server.
const selfAddressedSecret = "\x00self"

// WithSecretDestination returns ctx saying that the secrets a
// SecretResolver resolves under it are sent to dest (the absolute URL of
// the call). A resolver may refuse a destination the operator did not bind
// to the reference (internal/secretdest); every caller that sends a
// resolved secret out says where.
func WithSecretDestination(ctx context.Context, dest string) context.Context {
	return context.WithValue(ctx, secretDestKey{}, dest)
}

// SelfAddressedSecret returns ctx saying that the secrets resolved under it
// name their own destination (a kubeconfig names its server), which no
// caller chooses.
func SelfAddressedSecret(ctx context.Context) context.Context {
	return context.WithValue(ctx, secretDestKey{}, selfAddressedSecret)
}

// SecretDestination is where ctx says the secrets resolved under it are
// sent: dest, or self when they name their own destination; ok is false
// when ctx says nothing.
func SecretDestination(ctx context.Context) (dest string, self, ok bool) {
	d, _ := ctx.Value(secretDestKey{}).(string)
	return d, d == selfAddressedSecret, d != ""
}
