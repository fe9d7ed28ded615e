package release

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"time"
)

// Release is what a target should run: a version with its variables
// resolved for the target. Its ID is ReleaseID of its content.
type Release struct {
	ID        string        `json:"id"`
	Target    ReleaseTarget `json:"target"`
	VersionID string        `json:"version_id"`
	// Variables are the deployment variables resolved for the target.
	// Sensitive ones hold a SecretRef, never plaintext.
	Variables map[string]Value `json:"variables,omitempty"`
	// Verification is the outcome of the release's verification.
	Verification VerificationStatus `json:"verification,omitempty"`
	// Policies are the policy revisions the decision that created the
	// release was made with (the policies applying to the target); not
	// part of the content hash, so a policy change alone never makes a new
	// release.
	Policies  []PolicyRevision `json:"policies,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
}

// PolicyRevision names one published revision of a catalog policy.
type PolicyRevision struct {
	ID       string `json:"id"`
	Revision int    `json:"revision"`
}

// String renders the revision as id@rN.
func (p PolicyRevision) String() string { return p.ID + "@r" + strconv.Itoa(p.Revision) }

// NewRelease builds a release with its content-hash ID.
func NewRelease(target ReleaseTarget, versionID string, vars map[string]Value, createdAt time.Time) Release {
	return Release{
		ID:        ReleaseID(target, versionID, vars),
		Target:    target,
		VersionID: versionID,
		Variables: vars,
		CreatedAt: createdAt,
	}
}

// Validate reports the first invalid field, including an ID that does not
// match the content.
func (r *Release) Validate() error {
	if err := r.validateFields(); err != nil {
		return err
	}
	return CheckText(r)
}

func (r *Release) validateFields() error {
	if _, err := ParseTargetKey(r.Target.Key()); err != nil {
		return Invalid("target", err.Error())
	}
	if err := checkID("version_id", r.VersionID); err != nil {
		return err
	}
	for _, k := range sortedKeys(r.Variables) {
		if err := r.Variables[k].validate(Field("variables", k)); err != nil {
			return err
		}
	}
	if want := ReleaseID(r.Target, r.VersionID, r.Variables); r.ID != want {
		return Invalid("id", "does not match the release content; want "+want)
	}
	if !r.Verification.Valid() {
		return Invalid("verification", "unknown verification status "+quote(string(r.Verification)))
	}
	return nil
}

// ReleaseID is the content hash of a release: the hex SHA-256 of a
// canonical, length-prefixed encoding of the target, the version ID and the
// variables in key order. Literals are encoded as canonical JSON (object keys
// sorted; 1 and 1.0 are equal), references by relation and path, sensitive
// values by their ciphertext or reference (never plaintext, which a SecretRef
// does not hold). Equal content always yields the same ID.
func ReleaseID(target ReleaseTarget, versionID string, vars map[string]Value) string {
	h := sha256.New()
	w := idWriter{h: h}
	w.str("release/v1")
	w.str(target.DeploymentID)
	w.str(target.EnvironmentID)
	w.str(target.ResourceID)
	w.str(versionID)
	w.num(uint64(len(vars)))
	for _, k := range sortedKeys(vars) {
		v := vars[k]
		w.str(k)
		switch v.Kind() {
		case ValueSensitive:
			w.str("s")
			w.str(v.Sensitive.Ciphertext)
			w.str(v.Sensitive.Ref)
		case ValueReference:
			w.str("r")
			w.str(v.Reference.Relation)
			w.num(uint64(len(v.Reference.Path)))
			for _, p := range v.Reference.Path {
				w.str(p)
			}
		default:
			w.str("l")
			w.str(canonicalLiteral(v.Literal))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalLiteral encodes a literal deterministically. JSON covers every
// value decoded from JSON; anything JSON cannot encode (NaN, channels) falls
// back to its Go type and fmt form, which is deterministic too.
func canonicalLiteral(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("!%T:%v", v, v)
	}
	return string(b)
}

type idWriter struct{ h hash.Hash }

func (w idWriter) num(n uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	w.h.Write(b[:])
}

func (w idWriter) str(s string) {
	w.num(uint64(len(s)))
	w.h.Write([]byte(s))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
