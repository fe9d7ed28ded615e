package release

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSensitiveNeverPrints(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-plaintext"
	s := NewSensitive(secret)
	require.Equal(t, secret, s.Reveal())

	holder := struct {
		Token Sensitive
		M     map[string]any
	}{Token: s, M: map[string]any{"nested": s}}

	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		outputs = append(outputs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, holder), fmt.Sprintf(verb, &holder))
	}
	outputs = append(outputs, s.String(), fmt.Sprint(s), fmt.Sprintln(holder))
	j, err := json.Marshal(holder)
	require.NoError(t, err)
	outputs = append(outputs, string(j))
	txt, err := s.MarshalText()
	require.NoError(t, err)
	outputs = append(outputs, string(txt))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "token", s, "holder", holder)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "token", s)
	outputs = append(outputs, buf.String())

	for _, out := range outputs {
		require.NotContains(t, out, secret)
		require.NotContains(t, out, fmt.Sprintf("%x", secret))
	}
	require.Contains(t, string(j), Redacted)
}

func TestSecretRefHidesCiphertext(t *testing.T) {
	t.Parallel()
	r := SecretRef{Ciphertext: "c1ph3r"}
	for _, out := range []string{r.String(), fmt.Sprintf("%v %+v %#v", r, r, r)} {
		require.NotContains(t, out, "c1ph3r")
	}
	require.Contains(t, SecretRef{Ref: "vault:x"}.String(), "vault:x")
	// The stored form keeps the ciphertext so it can be decrypted later.
	b, err := json.Marshal(Value{Sensitive: &r})
	require.NoError(t, err)
	require.JSONEq(t, `{"sensitive":{"ciphertext":"c1ph3r"}}`, string(b))
}
