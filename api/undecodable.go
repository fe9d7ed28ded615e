package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// UndecodableRequest says what is wrong with a request's path or query
// that no route can take: a NUL or another control character, invalid
// UTF-8, a path segment "." or ".." (no id is one; a router would
// redirect it elsewhere), or a query that does not decode. It returns ""
// for a request that is fine. No store keeps a NUL, so such input is refused before any
// handler runs, as bad input (400), never a 500.
func UndecodableRequest(r *http.Request) string {
	if msg := badText("path", r.URL.Path); msg != "" {
		return msg
	}
	for _, seg := range strings.Split(r.URL.Path, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("path: the segment %q is not allowed (no id is . or ..)", seg)
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "query: does not decode: " + err.Error()
	}
	for k, vs := range q {
		if msg := badText("query parameter name", k); msg != "" {
			return msg
		}
		for _, v := range vs {
			if msg := badText("query parameter "+k, v); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// badText names the first character of s no id, name or filter may hold.
func badText(where, s string) string {
	if !utf8.ValidString(s) {
		return where + ": invalid UTF-8"
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }); i >= 0 {
		return fmt.Sprintf("%s: the control character %U is not allowed", where, rune(s[i]))
	}
	return ""
}

// refuseUndecodable answers 400 problem+json to a request
// UndecodableRequest refuses, before any route sees it.
func refuseUndecodable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := UndecodableRequest(r); msg != "" {
			writeProblem(w, http.StatusBadRequest, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}
