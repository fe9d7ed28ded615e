package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
)

// Field names the API adds to an object's own fields.
const (
	// VersionField is an object's compare-and-swap version (also its ETag).
	VersionField = "object_version"
	// UpdatedAtField is when the object was last written.
	UpdatedAtField = "updated_at"
)

// Object is how the API shows a stored object: the object's own fields,
// with its version (VersionField, also the response's ETag) and the time of
// its last write beside them, so what a GET returns can be edited and PUT
// back as it is (a PUT takes object_version as its If-Match when it has no
// header, and ignores updated_at).
type Object[T any] ports.Stored[T]

// MarshalJSON writes the object's fields, then object_version and
// updated_at.
func (o Object[T]) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(o.Value)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("object: %T does not encode as a JSON object", o.Value)
	}
	ts, err := json.Marshal(o.UpdatedAt)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Write(b[:len(b)-1])
	if len(b) > 2 {
		out.WriteByte(',')
	}
	fmt.Fprintf(&out, "%q:%d,%q:%s}", VersionField, o.Version, UpdatedAtField, ts)
	return out.Bytes(), nil
}

// UnmarshalJSON reads what MarshalJSON wrote (the object's fields leniently,
// for clients).
func (o *Object[T]) UnmarshalJSON(b []byte) error {
	var meta struct {
		Version   int64     `json:"object_version"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = Object[T]{Value: v, Version: meta.Version, UpdatedAt: meta.UpdatedAt}
	return nil
}

// Schema is T's schema with object_version and updated_at added, both
// always present in what the API returns.
func (o *Object[T]) Schema(r huma.Registry) *huma.Schema { return objectSchema[T](r, true) }

// objectSchema is T's schema with object_version and updated_at added;
// required says whether they always appear (a response) or may (a PUT's
// body).
func objectSchema[T any](r huma.Registry, required bool) *huma.Schema {
	base := r.Schema(reflect.TypeFor[T](), true, "")
	if base.Ref != "" {
		base = r.SchemaFromRef(base.Ref)
	}
	s := *base
	s.Properties = make(map[string]*huma.Schema, len(base.Properties)+2)
	for k, v := range base.Properties {
		s.Properties[k] = v
	}
	s.Properties[VersionField] = &huma.Schema{Type: huma.TypeInteger, Format: "int64",
		Description: "the compare-and-swap version (also the ETag); a PUT without If-Match takes it as the version it replaces"}
	s.Properties[UpdatedAtField] = &huma.Schema{Type: huma.TypeString, Format: "date-time", Description: "when the object was last written; ignored by PUT"}
	s.Required = append([]string(nil), base.Required...)
	if required {
		s.Required = append(s.Required, VersionField, UpdatedAtField)
	}
	s.PrecomputeMessages()
	return &s
}

// stripObjectFields returns the JSON object raw without its top-level
// object_version and updated_at members (every other member kept as
// written, duplicates too, for the strict decoder to judge), and the
// object_version it held (0 when absent).
func stripObjectFields(raw []byte) ([]byte, int64, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return raw, 0, nil // not an object: the strict decoder says why
	}
	var out bytes.Buffer
	out.WriteByte('{')
	var version int64
	first := true
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return raw, 0, nil
		}
		key, _ := kt.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return raw, 0, nil
		}
		switch key {
		case VersionField:
			if err := json.Unmarshal(val, &version); err != nil || version < 0 {
				return nil, 0, invalid("body."+VersionField, "want the object's version, a whole number ≥ 0")
			}
			continue
		case UpdatedAtField:
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		out.Write(val)
	}
	if _, err := dec.Token(); err != nil || len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return raw, 0, nil
	}
	out.WriteByte('}')
	return out.Bytes(), version, nil
}
