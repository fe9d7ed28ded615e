package githubhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// Sign returns the X-Hub-Signature-256 value of body under secret, as
// GitHub computes it: "sha256=" and the hex HMAC-SHA256 of the raw body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// VerifySignature reports whether header, an X-Hub-Signature-256 value,
// signs body (the raw body as received, whatever its content type) under
// secret. The comparison takes constant time; an empty secret verifies
// nothing.
func VerifySignature(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// ErrPayload is wrapped by every error of Payload: the delivery's body
// holds no event a receiver can read (a 400).
var ErrPayload = errors.New("malformed delivery")

// Payload returns the event's JSON from a delivery's body by its
// Content-Type: the body itself for application/json (or no content
// type), the "payload" form field for application/x-www-form-urlencoded.
// Any other content type, a form without payload, or an unreadable form is
// an error wrapping ErrPayload. Verify the signature over the raw body
// first: GitHub signs the body as sent, form-encoded or not.
func Payload(contentType string, body []byte) ([]byte, error) {
	if contentType == "" {
		return body, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: Content-Type %q: %w", ErrPayload, contentType, err)
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("%w: form body: %w", ErrPayload, err)
		}
		p, ok := form["payload"]
		if !ok || len(p) != 1 {
			return nil, fmt.Errorf("%w: form body has no single payload field", ErrPayload)
		}
		return []byte(p[0]), nil
	default:
		return nil, fmt.Errorf("%w: Content-Type %q is neither application/json nor application/x-www-form-urlencoded", ErrPayload, mt)
	}
}
