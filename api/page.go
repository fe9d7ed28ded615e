package api

import (
	"encoding/base64"

	"github.com/danielgtaylor/huma/v2"
)

// Page is one page of a list; NextCursor, when set, continues it.
type Page[T any] struct {
	Items      []T    `json:"items" nullable:"false"`
	NextCursor string `json:"next_cursor,omitempty" doc:"pass as cursor for the next page; absent on the last page"`
}

// PageParams are the paging query parameters of every list.
type PageParams struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"most items returned"`
	Cursor string `query:"cursor" doc:"next_cursor of the previous page"`
}

// after decodes the cursor into the key the page continues after.
func (p *PageParams) after() (string, error) {
	if p.Cursor == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
	if err != nil || len(b) == 0 {
		return "", huma.Error400BadRequest("bad cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "not a cursor this API returned", Value: p.Cursor})
	}
	return string(b), nil
}

// limit is the page size (huma applies the default and bounds).
func (p *PageParams) limit() int {
	if p.Limit <= 0 {
		return 100
	}
	return p.Limit
}

// page builds a page of items fetched with one extra (limit+1): the extra
// one says there is a next page, continuing after key(last kept item).
func page[T any](items []T, limit int, key func(*T) string) Page[T] {
	if items == nil {
		items = []T{}
	}
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, NextCursor: base64.RawURLEncoding.EncodeToString([]byte(key(&items[limit-1])))}
}
