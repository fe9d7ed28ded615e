package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// checkText refuses what encoding/json would silently change or drop in a
// syntactically valid document: invalid UTF-8 and lone UTF-16 surrogate
// escapes (both decode to U+FFFD), and a key repeated within one object
// (the last would win).
func checkText(data []byte) error {
	if err := checkEncoding(data); err != nil {
		return err
	}
	return checkDuplicateKeys(data)
}

// checkEncoding scans data's bytes for invalid UTF-8 and, inside strings,
// for a \u escape of a surrogate that is not one half of a pair.
func checkEncoding(data []byte) error {
	at := func(off int, msg string) error {
		line, col := Position(data, int64(off))
		return &Error{Line: line, Column: col, Msg: msg}
	}
	inString := false
	for i := 0; i < len(data); {
		c := data[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				return at(i, "invalid UTF-8")
			}
			i += n
			continue
		}
		switch {
		case c == '"':
			inString = !inString
		case inString && c == '\\' && i+1 < len(data):
			if data[i+1] != 'u' {
				i += 2
				continue
			}
			r1, ok := hex4(data, i+2)
			if !ok {
				i += 2
				continue
			}
			switch {
			case utf16.IsSurrogate(r1) && r1 < 0xdc00:
				r2, ok := rune(0), false
				if i+7 < len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
					r2, ok = hex4(data, i+8)
				}
				if !ok || utf16.DecodeRune(r1, r2) == utf8.RuneError {
					return at(i, fmt.Sprintf("lone UTF-16 surrogate \\u%04x", r1))
				}
				i += 12
				continue
			case utf16.IsSurrogate(r1):
				return at(i, fmt.Sprintf("lone UTF-16 surrogate \\u%04x", r1))
			}
			i += 6
			continue
		}
		i++
	}
	return nil
}

// hex4 decodes the four hex digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i+4 > len(data) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(data[i:i+4]), 16, 32)
	return rune(n), err == nil
}

// checkDuplicateKeys refuses an object that names a key twice, at the
// second one's path and place.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		keys   map[string]bool // nil for an array
		path   string
		index  int
		expect bool // an object expects a key next
	}
	var stack []*frame
	childPath := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			p := fmt.Sprintf("%s[%d]", f.path, f.index)
			f.index++
			return p
		}
		return f.path
	}
	var lastKey string
	for {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil // syntax is reported elsewhere; EOF ends the walk
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			k, _ := tok.(string)
			if top.keys[k] {
				line, col := Position(data, off+int64(bytes.IndexByte(data[off:], '"')))
				return &Error{Path: join(top.path, k), Line: line, Column: col, Msg: fmt.Sprintf("duplicate key %q", k)}
			}
			top.keys[k] = true
			top.expect = false
			lastKey = k
			continue
		}
		path := childPath()
		if top != nil && top.keys != nil {
			path = join(top.path, lastKey)
			top.expect = true
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, path: path, expect: true})
			case '[':
				stack = append(stack, &frame{path: path})
			case ']':
				stack = stack[:len(stack)-1]
			}
		}
	}
}
