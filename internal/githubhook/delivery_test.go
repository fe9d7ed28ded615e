package githubhook

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	// The example of GitHub's "Validating webhook deliveries" page.
	const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	secret := []byte("It's a Secret to Everybody")
	require.True(t, VerifySignature(secret, []byte("Hello, World!"), sig))
	require.Equal(t, sig, Sign(secret, []byte("Hello, World!")))
	require.False(t, VerifySignature(secret, []byte("Hello, World?"), sig))
	require.False(t, VerifySignature(secret, []byte("Hello, World!"), "sha1=abc"))
	require.False(t, VerifySignature(secret, []byte("Hello, World!"), "sha256=zz"))
	require.False(t, VerifySignature(nil, []byte("x"), Sign(nil, []byte("x"))), "an empty secret verifies nothing")
}

func TestPayloadReadsBothContentTypes(t *testing.T) {
	t.Parallel()
	event := `{"action":"completed","workflow_run":{"id":42}}`
	form := "payload=" + url.QueryEscape(event)
	for _, tc := range []struct {
		name, contentType, body, want, err string
	}{
		{name: "json", contentType: "application/json", body: event, want: event},
		{name: "json with charset", contentType: "application/json; charset=utf-8", body: event, want: event},
		{name: "no content type", body: event, want: event},
		{name: "form", contentType: "application/x-www-form-urlencoded", body: form, want: event},
		{name: "form without payload", contentType: "application/x-www-form-urlencoded", body: "x=1", err: "no single payload"},
		{name: "form with two payloads", contentType: "application/x-www-form-urlencoded", body: form + "&" + form, err: "no single payload"},
		{name: "bad form", contentType: "application/x-www-form-urlencoded", body: "payload=%zz", err: "form body"},
		{name: "other type", contentType: "text/plain", body: event, err: `"text/plain"`},
		{name: "bad type", contentType: "a/b; =", body: event, err: "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := Payload(tc.contentType, []byte(tc.body))
			if tc.err != "" {
				require.ErrorIs(t, err, ErrPayload)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}
