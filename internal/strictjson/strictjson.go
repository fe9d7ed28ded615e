// Package strictjson decodes JSON into Go values strictly: unknown fields,
// type mismatches, trailing data and syntax errors are reported with the
// field's path and its line and column in the input, never a panic. Clone
// deep-copies a decoded value (the one copy the pure core and the adapters
// share).
//
// Invariant: Decode either fills v completely or returns an *Error; it never
// reports success for input with a field v does not declare.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Error is a decoding problem at a place in the input.
type Error struct {
	// Path is the dotted path of the field, e.g. "run.pr.checks" or
	// "spec.tasks[2].name"; empty for the document itself.
	Path string
	// Line and Column are 1-based; zero when unknown.
	Line, Column int
	Msg          string
}

// Error renders "path: msg (line L, column C)".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		fmt.Fprintf(&b, " (line %d, column %d)", e.Line, e.Column)
	}
	return b.String()
}

// Decode strictly decodes data into v, which must be a non-nil pointer.
// Besides unknown fields and type mismatches it refuses invalid UTF-8, a
// lone UTF-16 surrogate escape and a key repeated within one object, which
// encoding/json would silently replace or let the last one win.
func Decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &Error{Msg: "empty document"}
	}
	if !json.Valid(data) {
		var se *json.SyntaxError
		var x any
		err := json.Unmarshal(data, &x)
		if errors.As(err, &se) {
			// Offset counts the offending byte: point at it, not past it
			// (an unexpected end stays at the end).
			off := se.Offset
			if off > 0 && off < int64(len(data)) {
				off--
			}
			line, col := Position(data, off)
			return &Error{Line: line, Column: col, Msg: "syntax error: " + se.Error()}
		}
		return &Error{Msg: "syntax error: " + err.Error()}
	}
	if err := checkText(data); err != nil {
		return err
	}
	w := walker{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	w.dec.UseNumber()
	if err := w.value(reflect.TypeOf(v).Elem(), ""); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		line, col := Position(data, w.dec.InputOffset())
		return &Error{Line: line, Column: col, Msg: "unexpected data after the document"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			line, col := Position(data, te.Offset)
			return &Error{Path: te.Field, Line: line, Column: col,
				Msg: fmt.Sprintf("cannot use a JSON %s here; want %s", te.Value, typeName(te.Type))}
		}
		return &Error{Msg: err.Error()}
	}
	return nil
}

// Position converts a byte offset into a 1-based line and column.
func Position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// walker checks field names against the target type while streaming tokens.
type walker struct {
	data []byte
	dec  *json.Decoder
}

var (
	unmarshalerType     = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
)

func (w *walker) errAt(path string, offset int64, format string, args ...any) error {
	line, col := Position(w.data, offset)
	return &Error{Path: path, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// value consumes one JSON value, checking it against t.
func (w *walker) value(t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface {
		return w.skip()
	}
	start := w.dec.InputOffset()
	if reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil {
			return w.errAt(path, start, "%v", err)
		}
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return w.errAt(path, w.valueOffset(start), "%s", cleanMsg(err))
		}
		return nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		return w.errAt(path, start, "%v", err)
	}
	if tok == nil { // null is fine for any field
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return w.typeErr(path, start, tok, t)
		}
		fields := fieldsOf(t)
		for w.dec.More() {
			keyOff := w.dec.InputOffset()
			k, err := w.dec.Token()
			if err != nil {
				return w.errAt(path, keyOff, "%v", err)
			}
			key := k.(string)
			ft, ok := fields.lookup(key)
			child := join(path, key)
			if !ok {
				return w.errAt(child, w.keyOffset(keyOff), "unknown field %q", key)
			}
			if err := w.value(ft, child); err != nil {
				return err
			}
		}
		_, err = w.dec.Token() // '}'
		return err
	case reflect.Map:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return w.typeErr(path, start, tok, t)
		}
		for w.dec.More() {
			k, err := w.dec.Token()
			if err != nil {
				return err
			}
			if err := w.value(t.Elem(), join(path, k.(string))); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	case reflect.Slice, reflect.Array:
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return w.typeErr(path, start, tok, t)
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	default:
		if !scalarFits(tok, t) {
			return w.typeErr(path, start, tok, t)
		}
		return nil
	}
}

// scalarFits reports whether a scalar token can decode into t.
func scalarFits(tok json.Token, t reflect.Type) bool {
	switch v := tok.(type) {
	case json.Delim:
		return false
	case string:
		return t.Kind() == reflect.String
	case bool:
		return t.Kind() == reflect.Bool
	case json.Number:
		switch t.Kind() {
		case reflect.Float32, reflect.Float64:
			return true
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, err := v.Int64()
			return err == nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			_, err := strconv.ParseUint(v.String(), 10, 64)
			return err == nil
		}
		return false
	}
	return true
}

// typeErr reports a value of the wrong JSON type at its JSON path.
func (w *walker) typeErr(path string, start int64, tok json.Token, t reflect.Type) error {
	got := "null"
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			got = "object"
		} else {
			got = "array"
		}
	case string:
		got = "string"
	case bool:
		got = "boolean"
	case json.Number:
		got = "number " + v.String()
	}
	return w.errAt(path, w.valueOffset(start), "cannot use a JSON %s here; want %s", got, typeName(t))
}

// keyOffset moves from the end of the previous token to the key's quote.
func (w *walker) keyOffset(off int64) int64 {
	for off < int64(len(w.data)) && w.data[off] != '"' {
		off++
	}
	return off
}

// valueOffset moves from the end of the previous token past the separator
// and white space to the start of the value.
func (w *walker) valueOffset(off int64) int64 {
	for off < int64(len(w.data)) && strings.IndexByte(" \t\r\n:,", w.data[off]) >= 0 {
		off++
	}
	return off
}

// cleanMsg strips Go type names from a custom unmarshaler's error.
func cleanMsg(err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, "Time.UnmarshalJSON: ") || strings.HasPrefix(msg, "parsing time ") {
		return "want an RFC 3339 time like \"2026-01-02T15:04:05Z\": " + strings.TrimPrefix(msg, "Time.UnmarshalJSON: ")
	}
	return msg
}

// skip consumes one whole value.
func (w *walker) skip() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return w.skipRest()
	}
	return nil
}

// skipRest consumes the rest of an object or array whose opening delimiter
// was read.
func (w *walker) skipRest() error {
	depth := 1
	for depth > 0 {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldSet maps JSON names (and, as encoding/json does, their case-folded
// forms) to field types, flattening embedded structs.
type fieldSet struct {
	exact map[string]reflect.Type
	fold  map[string]reflect.Type
}

func (f fieldSet) lookup(key string) (reflect.Type, bool) {
	if t, ok := f.exact[key]; ok {
		return t, true
	}
	t, ok := f.fold[strings.ToLower(key)]
	return t, ok
}

var fieldCache sync.Map // reflect.Type -> fieldSet

func fieldsOf(t reflect.Type) fieldSet {
	if f, ok := fieldCache.Load(t); ok {
		return f.(fieldSet)
	}
	f := fieldSet{exact: map[string]reflect.Type{}, fold: map[string]reflect.Type{}}
	collect(t, f)
	fieldCache.Store(t, f)
	return f
}

func collect(t reflect.Type, f fieldSet) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collect(et, f)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		f.exact[name] = ft
		f.fold[strings.ToLower(name)] = ft
	}
}
