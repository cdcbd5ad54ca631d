// Package ghpage is the one pagination loop of gpugate's go-github v66
// calls, with one bound: a listing is read page by page (All, by page
// number; Cursor, by cursor) until GitHub names no next page, and one
// longer than MaxPages is an error, never silently cut.
package ghpage

import (
	"errors"
	"fmt"

	"github.com/google/go-github/v66/github"
)

// PerPage is the page size every listing asks for (GitHub's maximum).
const PerPage = 100

// MaxPages bounds every listing: 100 pages of 100.
const MaxPages = 100

// ErrTooManyPages means the listing goes on past MaxPages.
var ErrTooManyPages = fmt.Errorf("the listing has more than %d pages", MaxPages)

// All calls fetch for each page (0, the first, then GitHub's next page)
// and returns every item in order. fetch sets the page in its options and
// returns the page's items and GitHub's response; its error is returned
// as it is.
func All[T any](fetch func(page int) ([]T, *github.Response, error)) ([]T, error) {
	var out []T
	page := 0
	for range MaxPages {
		items, resp, err := fetch(page)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if resp == nil || resp.NextPage == 0 {
			return out, nil
		}
		if resp.NextPage <= page {
			return nil, errors.New("GitHub named a next page that does not follow the last one")
		}
		page = resp.NextPage
	}
	return nil, ErrTooManyPages
}

// Cursor reads a cursor-paginated listing (GitHub's webhook deliveries),
// bounded like All: fetch reads and handles the page at cursor ("" for the
// first) and returns the next cursor ("" after the last) or done to stop
// early. A listing longer than MaxPages pages is ErrTooManyPages, after
// the first MaxPages pages were handled: a caller may take what it read.
func Cursor(fetch func(cursor string) (next string, done bool, err error)) error {
	cursor := ""
	for range MaxPages {
		next, done, err := fetch(cursor)
		if err != nil || done || next == "" {
			return err
		}
		if next == cursor {
			return errors.New("GitHub named the same page as the next one")
		}
		cursor = next
	}
	return ErrTooManyPages
}
