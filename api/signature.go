package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// Signed agent requests (a report, a pull agent's take and heartbeat): an
// agent sends X-Reconciler-Timestamp (Unix seconds) and
// X-Reconciler-Signature "sha256=" + the 64 lowercase hex digits of
// HMAC-SHA256(secret, TIMESTAMP + "." + METHOD + "." + PATH + "." + SUBJECT +
// "." + BODY), where PATH is the request's path as sent (escaped, without
// its query), SUBJECT
// the job id (the agent's id for a take), and secret the value of its job
// agent's config.report_secret reference (env:NAME or file:/path, resolved by
// the daemon's secret resolver; never stored resolved). The header is taken
// exactly as written: no other form of the same MAC is accepted, so a
// signature cannot be replayed by respelling it.
const (
	TimestampHeader = "X-Reconciler-Timestamp"
	SignatureHeader = "X-Reconciler-Signature"
	// ReportSecretKey is the job agent config key holding the secret
	// reference.
	ReportSecretKey = "report_secret"
	// SignatureWindow is how far a signature's timestamp may be from now;
	// a signature is accepted once within it.
	SignatureWindow = 5 * time.Minute
)

// SignRequest returns the signature header value of a request (method,
// path without query) with body about subject sent at ts: a report on (or a
// pull agent's heartbeat of) job subject, or a pull agent's take of its next
// job with its agent id as subject. Method, path and subject are signed
// too, so a signature is good for that one request only.
func SignRequest(secret string, ts time.Time, method, path, subject string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(requestMAC(secret, ts, method, path, subject, body))
}

// signaturePrefix starts every signature header value.
const signaturePrefix = "sha256="

func requestMAC(secret string, ts time.Time, method, path, subject string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10) + "." + method + "." + path + "." + subject + "."))
	m.Write(body)
	return m.Sum(nil)
}

// ParseSignature decodes a signature header value: exactly "sha256=" and
// 64 lowercase hex digits, nothing around them. It returns the MAC.
func ParseSignature(h string) ([]byte, bool) {
	hexPart, ok := strings.CutPrefix(h, signaturePrefix)
	if !ok || len(hexPart) != 2*sha256.Size {
		return nil, false
	}
	for i := 0; i < len(hexPart); i++ {
		c := hexPart[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, false
		}
	}
	mac, err := hex.DecodeString(hexPart)
	return mac, err == nil
}

// verifySignedReport checks a signed report on job: its agent's secret,
// the timestamp window and that the signature was not used before. It
// returns the principal "agent:ID".
func (s *Server) verifySignedReport(ctx context.Context, job ports.JobRow, tsHeader, sig string, raw []byte) (Principal, error) {
	if job.JobAgentID == "" {
		return Principal{}, huma.NewError(http.StatusUnauthorized, "job "+job.ID+" has no agent that signs reports")
	}
	return s.verifyAgentSignature(ctx, job.JobAgentID, job.ID, tsHeader, sig, raw)
}

// verifyAgentSignature checks a request signed by job agent agentID over
// subject (a job id, or for a pull agent's take its own id) and raw: the
// agent's secret, the timestamp window and that the signature was not
// used before. It returns the principal "agent:ID".
func (s *Server) verifyAgentSignature(ctx context.Context, agentID, subject, tsHeader, sig string, raw []byte) (Principal, error) {
	unauthorized := func(msg string) (Principal, error) {
		return Principal{}, huma.NewError(http.StatusUnauthorized, msg)
	}
	sec, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return unauthorized(TimestampHeader + " must be Unix seconds")
	}
	ts, now := time.Unix(sec, 0), s.o.Clock.Now()
	if ts.Before(now.Add(-SignatureWindow)) || ts.After(now.Add(SignatureWindow)) {
		return unauthorized("signature timestamp is outside the " + SignatureWindow.String() + " window")
	}
	// The header's form is checked before anything about the agent, so the
	// answer to a malformed one says nothing of which agents exist.
	mac, ok := ParseSignature(sig)
	if !ok {
		return unauthorized(SignatureHeader + " must be sha256= and 64 lowercase hex digits, nothing else")
	}
	// An unknown agent, one that does not sign and a wrong signature get
	// the same answer, so agent ids cannot be enumerated without a secret;
	// the log says which it was.
	badSignature := func(why string) (Principal, error) {
		s.o.Logger.DebugContext(ctx, "api.signature", "agent", agentID, "reason", why)
		return unauthorized("bad signature")
	}
	if s.o.Secrets == nil {
		return badSignature("signed requests are off")
	}
	agent, err := s.o.Releases.JobAgents().Get(ctx, agentID)
	if err != nil {
		return badSignature("no such job agent")
	}
	ref, _ := agent.Value.Config[ReportSecretKey].(string)
	if ref == "" {
		return badSignature("the agent has no " + ReportSecretKey)
	}
	secret, err := s.o.Secrets.Resolve(ctx, release.SecretRef{Ref: ref})
	if err != nil {
		s.o.Logger.WarnContext(ctx, "api.report_secret", "agent", agent.Value.ID, "error", err)
		return unauthorized("bad signature")
	}
	if secret == "" {
		return badSignature("the agent's report secret is empty")
	}
	p := principal(ctx)
	if !hmac.Equal(requestMAC(secret, ts, p.method, p.path, subject, raw), mac) {
		return badSignature("the signature does not match")
	}
	// The nonce is the MAC itself, so no spelling of the header makes a
	// second use of one signature.
	fresh, err := s.o.Tokens.NonceClaim(ctx, "report:"+agent.Value.ID+":"+hex.EncodeToString(mac), now, ts.Add(SignatureWindow))
	if err != nil {
		return Principal{}, s.fail(ctx, err)
	}
	if !fresh {
		return unauthorized("signature already used")
	}
	return Principal{Name: "agent:" + agent.Value.ID}, nil
}
