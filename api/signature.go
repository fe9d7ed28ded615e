package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Signed requests: an agent sends X-Reconciler-Timestamp (Unix seconds)
// and X-Reconciler-Signature "sha256=" + 64 lowercase hex digits of
// HMAC-SHA256(secret, TIMESTAMP "\n" METHOD "\n" PATH "\n" BODY), where
// PATH is the request's escaped URL path as the server receives it (for
// example /api/v1/jobs/JOB_ID/report, no query) and secret is the value of
// its job agent's config.report_secret reference (env:NAME or file:/path,
// resolved by the daemon's secret resolver; never stored resolved).
const (
	TimestampHeader = "X-Reconciler-Timestamp"
	SignatureHeader = "X-Reconciler-Signature"
	// ReportSecretKey is the job agent config key holding the secret
	// reference.
	ReportSecretKey = "report_secret"
	// SignatureWindow is how far a signature's timestamp may be from now;
	// a signature is accepted once within it.
	SignatureWindow = 5 * time.Minute
	// signaturePrefix starts every signature header value.
	signaturePrefix = "sha256="
)

// SignedString describes the signed string, for the OpenAPI text.
const SignedString = "TIMESTAMP LF METHOD LF PATH LF BODY, LF being one newline byte"

// SignRequest returns the signature header value of a request: its method,
// escaped URL path (no query) and body, sent at ts. Method and path are
// signed, so a signature is good for that one route and subject only.
func SignRequest(secret string, ts time.Time, method, path string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10) + "\n" + method + "\n" + path + "\n"))
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}

// ParseSignature decodes a signature header value, which must be exactly
// "sha256=" and 64 lowercase hex digits: no whitespace, no upper case, no
// other prefix. It returns the 32-byte MAC.
func ParseSignature(v string) ([]byte, error) {
	h, ok := strings.CutPrefix(v, signaturePrefix)
	if !ok {
		return nil, errors.New(SignatureHeader + " must start with " + signaturePrefix)
	}
	if len(h) != 2*sha256.Size {
		return nil, errors.New(SignatureHeader + " must be " + signaturePrefix + " and 64 lowercase hex digits")
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, errors.New(SignatureHeader + " must be " + signaturePrefix + " and 64 lowercase hex digits")
		}
	}
	mac, err := hex.DecodeString(h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SignatureHeader, err)
	}
	return mac, nil
}

// verifySignedReport checks a signed report on job: its agent's secret,
// the timestamp window and that the signature was not used before. It
// returns the principal "agent:ID".
func (s *Server) verifySignedReport(ctx context.Context, job ports.JobRow, tsHeader, sig string, raw []byte) (Principal, error) {
	if job.JobAgentID == "" {
		return Principal{}, huma.NewError(http.StatusUnauthorized, "job "+job.ID+" has no agent that signs reports")
	}
	return s.verifyAgentSignature(ctx, job.JobAgentID, tsHeader, sig, raw)
}

// verifyAgentSignature checks a request signed by job agent agentID over
// the request's method, path (from the context's Principal) and raw body:
// the header's form, the agent's secret (never empty), the timestamp window
// and that the MAC was not used before, by any process, within the window.
// It returns the principal "agent:ID".
func (s *Server) verifyAgentSignature(ctx context.Context, agentID, tsHeader, sig string, raw []byte) (Principal, error) {
	unauthorized := func(msg string) (Principal, error) {
		return Principal{}, huma.NewError(http.StatusUnauthorized, msg)
	}
	mac, err := ParseSignature(sig)
	if err != nil {
		return unauthorized(err.Error())
	}
	sec, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil || strconv.FormatInt(sec, 10) != tsHeader {
		return unauthorized(TimestampHeader + " must be Unix seconds")
	}
	ts, now := time.Unix(sec, 0), s.o.Clock.Now()
	if ts.Before(now.Add(-SignatureWindow)) || ts.After(now.Add(SignatureWindow)) {
		return unauthorized("signature timestamp is outside the " + SignatureWindow.String() + " window")
	}
	if s.o.Secrets == nil {
		return unauthorized("job agent " + agentID + " does not sign requests")
	}
	agent, err := s.o.Releases.JobAgents().Get(ctx, agentID)
	if err != nil {
		return unauthorized("job agent " + agentID + " does not sign requests")
	}
	ref, _ := agent.Value.Config[ReportSecretKey].(string)
	if ref == "" {
		return unauthorized("job agent " + agent.Value.ID + " has no " + ReportSecretKey)
	}
	secret, err := s.o.Secrets.Resolve(ctx, release.SecretRef{Ref: ref})
	if err != nil {
		s.o.Logger.WarnContext(ctx, "api.report_secret", "agent", agent.Value.ID, "error", err)
		return unauthorized("job agent " + agent.Value.ID + "'s report secret cannot be resolved")
	}
	if secret == "" {
		s.o.Logger.WarnContext(ctx, "api.report_secret", "agent", agent.Value.ID, "error", "empty HMAC key")
		return unauthorized("job agent " + agent.Value.ID + "'s report secret is empty")
	}
	p := principal(ctx)
	want, _ := ParseSignature(SignRequest(secret, ts, p.SignedMethod, p.SignedPath, raw))
	if !hmac.Equal(want, mac) {
		return unauthorized("bad signature")
	}
	// The nonce is the decoded MAC: one MAC has one header spelling, so
	// the same signature cannot be sent again in another form.
	fresh, err := s.o.Tokens.NonceClaim(ctx, "report:"+hex.EncodeToString(mac), now, ts.Add(SignatureWindow))
	if err != nil {
		return Principal{}, s.fail(ctx, err)
	}
	if !fresh {
		return unauthorized("signature already used")
	}
	return Principal{Name: "agent:" + agent.Value.ID}, nil
}

// signedText describes a signed request in the OpenAPI document.
const signedText = "signed with the agent's report_secret (headers " + TimestampHeader + ": Unix seconds and " +
	SignatureHeader + ": exactly sha256= and 64 lowercase hex digits of HMAC-SHA256(secret, " + SignedString +
	"), PATH being the escaped URL path without the query, e.g. /api/v1/jobs/JOB_ID/report; " +
	"a signature is accepted once, within 5 minutes of its timestamp)"
