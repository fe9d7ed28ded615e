package api_test

import (
	"crypto/hmac"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/api"
)

const goodSig = "sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// TestParseSignature: only "sha256=" and 64 lowercase hex digits pass.
func TestParseSignature(t *testing.T) {
	t.Parallel()
	mac, ok := api.ParseSignature(goodSig)
	require.True(t, ok)
	require.Len(t, mac, 32)
	for name, bad := range map[string]string{
		"empty":           "",
		"no prefix":       strings.TrimPrefix(goodSig, "sha256="),
		"upper prefix":    "SHA256=" + goodSig[7:],
		"upper hex":       strings.ToUpper(goodSig[:8]) + goodSig[8:],
		"short":           goodSig[:len(goodSig)-1],
		"long":            goodSig + "0",
		"trailing space":  goodSig + " ",
		"leading space":   " " + goodSig,
		"trailing nbsp":   goodSig + "\u00a0",
		"trailing nel":    goodSig + "\u0085",
		"trailing emsp":   goodSig + "\u2003",
		"trailing tab":    goodSig + "\t",
		"trailing crlf":   goodSig + "\r\n",
		"non-hex":         goodSig[:len(goodSig)-1] + "g",
		"sha1":            "sha1=" + goodSig[7:47],
		"two signatures":  goodSig + "," + goodSig,
		"prefix repeated": "sha256=" + goodSig,
	} {
		_, ok := api.ParseSignature(bad)
		require.False(t, ok, name)
	}
}

// TestSignRequestCoversMethodAndPath: the same body and time signed for
// another method or path gives another MAC.
func TestSignRequestCoversMethodAndPath(t *testing.T) {
	t.Parallel()
	at, body := time.Unix(1_700_000_000, 0), []byte(`{}`)
	base := api.SignRequest("k", at, http.MethodPost, "/api/v1/jobs/a/report", "a", body)
	for _, other := range []string{
		api.SignRequest("k", at, http.MethodPut, "/api/v1/jobs/a/report", "a", body),
		api.SignRequest("k", at, http.MethodPost, "/api/v1/jobs/b/report", "a", body),
		api.SignRequest("k", at, http.MethodPost, "/api/v1/job-agents/x/jobs/a/report", "a", body),
		api.SignRequest("k", at.Add(time.Second), http.MethodPost, "/api/v1/jobs/a/report", "a", body),
	} {
		require.False(t, hmac.Equal([]byte(base), []byte(other)))
	}
	require.NotEqual(t, base, api.SignRequest("k", at, http.MethodPost, "/api/v1/jobs/a/report", "b", body), "the subject is signed")
}
