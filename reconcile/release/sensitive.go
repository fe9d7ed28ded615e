package release

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// Redacted is what a secret prints as.
const Redacted = "[REDACTED]"

// Sensitive holds a secret's plaintext in memory, for the one place that
// must hand it to a job agent. Every way of printing or encoding it yields
// Redacted: String, GoString, every fmt verb (it is a fmt.Formatter, so %d
// and %+v cannot reach the field by reflection), MarshalJSON, MarshalText
// and slog's LogValue. Only Reveal returns the plaintext.
type Sensitive struct {
	plaintext string
}

// NewSensitive wraps a plaintext secret.
func NewSensitive(plaintext string) Sensitive { return Sensitive{plaintext: plaintext} }

// Reveal returns the plaintext. Call it only where the secret leaves the
// process for its legitimate consumer.
func (s Sensitive) Reveal() string { return s.plaintext }

// IsZero reports whether the secret is empty.
func (s Sensitive) IsZero() bool { return s.plaintext == "" }

// String returns Redacted.
func (Sensitive) String() string { return Redacted }

// GoString returns Redacted.
func (Sensitive) GoString() string { return Redacted }

// Format writes Redacted for every verb.
func (Sensitive) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, Redacted) }

// MarshalJSON writes "[REDACTED]".
func (Sensitive) MarshalJSON() ([]byte, error) { return json.Marshal(Redacted) }

// MarshalText writes [REDACTED].
func (Sensitive) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// LogValue makes slog print Redacted.
func (Sensitive) LogValue() slog.Value { return slog.StringValue(Redacted) }

// SecretRef is the stored form of a sensitive variable value: either the
// ciphertext (encrypted by a key the engine holds) or a reference to an
// external secret store. It holds no plaintext, so it may be stored and
// compared; decrypting or fetching it into a Sensitive is an adapter's job.
// Its String form names the reference but never prints the ciphertext.
type SecretRef struct {
	Ciphertext string `json:"ciphertext,omitempty"`
	Ref        string `json:"ref,omitempty"`
}

// String describes the secret without its ciphertext.
func (s SecretRef) String() string {
	if s.Ref != "" {
		return "secret(ref=" + s.Ref + ")"
	}
	return "secret(ciphertext)"
}

// GoString is String.
func (s SecretRef) GoString() string { return s.String() }

// LogValue logs only the reference.
func (s SecretRef) LogValue() slog.Value { return slog.StringValue(s.String()) }

func (s SecretRef) validate(path string) error {
	if (s.Ciphertext == "") == (s.Ref == "") {
		return Invalid(path, "exactly one of ciphertext and ref is required")
	}
	return nil
}
