package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reconcilerhq/reconciler/expr"
)

// ErrInvalid matches every validation failure of this package's types (and
// of the policy package's); use errors.Is(err, release.ErrInvalid).
var ErrInvalid = errors.New("invalid")

// FieldError is a validation failure at a field. Field is a dotted path such
// as "variables[2].values[0].selector". Line and Column locate a CEL syntax
// or type error inside the field's expression (1-based, zero when unknown).
type FieldError struct {
	Field  string
	Line   int
	Column int
	Msg    string
	// Err is the underlying error, e.g. an *expr.Error; may be nil.
	Err error
}

// Error renders "field: msg (line L, column C)".
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Field)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Line > 0 {
		b.WriteString(" (line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(", column ")
		b.WriteString(strconv.Itoa(e.Column))
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *FieldError) Unwrap() error { return e.Err }

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Invalid returns a *FieldError for field with message msg.
func Invalid(field, msg string) *FieldError { return &FieldError{Field: field, Msg: msg} }

// Field joins a path and a child name: Field("rules[0]", "rrule") is
// "rules[0].rrule"; an empty parent yields the child alone.
func Field(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

// Index renders "path[i]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// CheckSelector compiles src in the shared selector environment and reports
// a *FieldError naming field, with the CEL line and column, when it does not
// compile, or when its type is known and is not boolean (a string, a
// number: it could never select anything). An empty selector is valid when allowEmpty is set.
func CheckSelector(field, src string, allowEmpty bool) error {
	if src == "" {
		if allowEmpty {
			return nil
		}
		return Invalid(field, "selector is required")
	}
	if err := CheckExpr(SelectorEnv, field, src); err != nil {
		return err
	}
	if p, err := SelectorEnv.Compile(src); err == nil && !p.MayBeBool() {
		return Invalid(field, "invalid CEL: a selector must be a boolean expression; this one is of type "+p.ResultType())
	}
	return nil
}

// CheckExpr compiles src in env and wraps a compile failure in a *FieldError
// naming field.
func CheckExpr(env *expr.Env, field, src string) error {
	if _, err := env.Compile(src); err != nil {
		fe := &FieldError{Field: field, Msg: err.Error(), Err: err}
		var ee *expr.Error
		if errors.As(err, &ee) {
			fe.Msg = "invalid CEL: " + ee.Message
			fe.Line, fe.Column = ee.Line, ee.Column
		}
		return fe
	}
	return nil
}

// MaxIDLength and MaxNameLength bound ids (they are index keys: a longer
// one ended in a raw btree error) and names, tags and users.
const (
	MaxIDLength   = 255
	MaxNameLength = 1024
)

// checkID reports an empty ID, one longer than MaxIDLength, or one that
// holds a ':', white space or a control character (':' and white space
// would make target keys ambiguous).
func checkID(field, id string) error {
	if id == "" {
		return Invalid(field, "is required")
	}
	if len(id) > MaxIDLength {
		return Invalid(field, fmt.Sprintf("is %d bytes long; at most %d", len(id), MaxIDLength))
	}
	if strings.ContainsAny(id, ": \t\r\n\x00") {
		return Invalid(field, "must not contain ':', white space or NUL")
	}
	return checkControl(field, id)
}

// objectIDRe is the grammar of an object's own id, the same for every kind
// (and for run, workflow and catalog ids): it is a path segment, so never
// "/", "." or "..", and it starts with a letter or digit.
var objectIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ObjectIDRule is the id grammar in words, for help texts and errors.
const ObjectIDRule = "1-128 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit"

// CheckObjectID refuses an object id outside the grammar every kind
// shares, naming field.
func CheckObjectID(field, id string) error {
	if id == "" {
		return Invalid(field, "is required")
	}
	if !objectIDRe.MatchString(id) {
		return Invalid(field, fmt.Sprintf("%q is not a valid id: want %s", id, ObjectIDRule))
	}
	return nil
}

// checkRequired reports an empty string, one longer than MaxNameLength, or
// one holding a control character.
func checkRequired(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return Invalid(field, "is required")
	}
	return checkName(field, v)
}

// checkName reports a name, tag or user longer than MaxNameLength or
// holding a control character (an ANSI escape would be echoed raw); empty
// is allowed.
func checkName(field, v string) error {
	if len(v) > MaxNameLength {
		return Invalid(field, fmt.Sprintf("is %d bytes long; at most %d", len(v), MaxNameLength))
	}
	return checkControl(field, v)
}

// CheckControl refuses control characters (C0, DEL, C1) and invalid
// UTF-8 in v, naming field: for values that have no other rule (work keys,
// whose scope ids may hold ':').
func CheckControl(field, v string) error { return checkControl(field, v) }

// checkControl refuses control characters (C0, DEL, C1), bidirectional
// embedding, override and isolate characters (U+202A-U+202E,
// U+2066-U+2069: they make a name render other than it reads) and invalid
// UTF-8.
func checkControl(field, v string) error {
	if !utf8.ValidString(v) {
		return Invalid(field, "is not valid UTF-8")
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return Invalid(field, fmt.Sprintf("contains the control character %U at byte %d", r, i))
		}
		if (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return Invalid(field, fmt.Sprintf("contains the bidirectional formatting character %U at byte %d", r, i))
		}
	}
	return nil
}

// CheckText refuses a value holding a NUL character in any string or key:
// PostgreSQL can store none in text or jsonb, so every store refuses it
// alike, as invalid input naming the field. v is checked through its JSON
// encoding (what the stores keep).
func CheckText(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return nil // an encoding problem is the store's to report
	}
	return CheckTextJSON(b)
}

// CheckTextJSON is CheckText of a value already encoded as JSON, for a
// store that encodes what it keeps anyway.
func CheckTextJSON(b []byte) error {
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) != nil {
		return Invalid("", "contains a NUL character, which cannot be stored")
	}
	p, _ := nulPath(doc, "")
	return Invalid(p, "contains a NUL character, which cannot be stored")
}

// nulPath is the path of the first string or key holding a NUL in doc.
func nulPath(doc any, path string) (string, bool) {
	switch x := doc.(type) {
	case string:
		return path, strings.ContainsRune(x, 0)
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if strings.ContainsRune(k, 0) {
				return Field(path, strconv.Quote(k)), true
			}
			if p, ok := nulPath(x[k], Field(path, k)); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := nulPath(e, Index(path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// EncodeText encodes v as JSON for a store, refusing a NUL anywhere in it
// as CheckText does: one encoding serves both.
func EncodeText(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return b, CheckTextJSON(b)
}
