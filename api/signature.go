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

// Signed job reports: an agent sends X-Reconciler-Timestamp (Unix seconds)
// and X-Reconciler-Signature "sha256=" + hex(HMAC-SHA256(secret, timestamp
// + "." + job id + "." + body)), where secret is the value of its job agent's
// config.report_secret reference (env:NAME or file:/path, resolved by the
// daemon's secret resolver; never stored resolved).
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

// SignReport returns the signature header value of a request body about
// subject sent at ts: a report on (or a pull agent's heartbeat of) job
// subject, or a pull agent's take of its next job with its agent id as
// subject. The subject is signed too, so a signature is good for it only.
func SignReport(secret string, ts time.Time, subject string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10) + "." + subject + "."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
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
	if !hmac.Equal([]byte(SignReport(secret, ts, subject, raw)), []byte(strings.TrimSpace(sig))) {
		return badSignature("the signature does not match")
	}
	fresh, err := s.o.Tokens.NonceClaim(ctx, "report:"+sig, now, ts.Add(SignatureWindow))
	if err != nil {
		return Principal{}, s.fail(ctx, err)
	}
	if !fresh {
		return unauthorized("signature already used")
	}
	return Principal{Name: "agent:" + agent.Value.ID}, nil
}
