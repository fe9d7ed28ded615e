package api

import (
	"encoding/base64"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/reconcilerhq/reconciler/ports"
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
	return Page[T]{Items: items, NextCursor: cursorOf(key(&items[limit-1]))}
}

// cursorOf is the cursor of a page that continues after key (after
// decodes it).
func cursorOf(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key))
}

// newestAfter decodes a cursor of a newest-first keyset listing (versions,
// jobs): the key of the last item of the previous page.
func (p *PageParams) newestAfter() (*ports.NewestKey, error) {
	after, err := p.after()
	if err != nil || after == "" {
		return nil, err
	}
	at, id, ok := strings.Cut(after, " ")
	t, terr := time.Parse(time.RFC3339Nano, at)
	if !ok || id == "" || terr != nil {
		return nil, huma.Error400BadRequest("bad cursor", &huma.ErrorDetail{Location: "query.cursor", Message: "not a cursor this API returned", Value: p.Cursor})
	}
	return &ports.NewestKey{CreatedAt: t, ID: id}, nil
}

// newestKey is the cursor key of an item at (createdAt, id) in a
// newest-first listing.
func newestKey(createdAt time.Time, id string) string {
	return createdAt.UTC().Format(time.RFC3339Nano) + " " + id
}

// newestPage reads one page of a newest-first keyset listing through
// fetch (the store's page read, capped at ports.MaxVersionPageSize): one
// more item than the page tells whether another page follows; at the cap,
// a second read of one item does.
func newestPage[T any](p *PageParams, fetch func(after *ports.NewestKey, limit int) ([]T, error), key func(*T) (time.Time, string)) (Page[T], error) {
	after, err := p.newestAfter()
	if err != nil {
		return Page[T]{}, err
	}
	limit := p.limit()
	keyOf := func(v *T) string { return newestKey(key(v)) }
	if limit < ports.MaxVersionPageSize {
		items, err := fetch(after, limit+1)
		if err != nil {
			return Page[T]{}, err
		}
		return page(items, limit, keyOf), nil
	}
	items, err := fetch(after, limit)
	if err != nil || len(items) < limit {
		return page(items, limit, keyOf), err
	}
	at, id := key(&items[len(items)-1])
	more, err := fetch(&ports.NewestKey{CreatedAt: at, ID: id}, 1)
	if err != nil {
		return Page[T]{}, err
	}
	return page(append(items, more...), limit, keyOf), nil
}
