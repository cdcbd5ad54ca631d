package ghpage_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/internal/ghpage"
)

// pages serves n pages of one item each, page i holding i.
func pages(n int, asked *[]int) func(int) ([]int, *github.Response, error) {
	return func(page int) ([]int, *github.Response, error) {
		*asked = append(*asked, page)
		if page == 0 {
			page = 1
		}
		resp := &github.Response{}
		if page < n {
			resp.NextPage = page + 1
		}
		return []int{page}, resp, nil
	}
}

// Every page is read, in order, until GitHub names no next page; a
// listing past the bound is an error, never a silently shorter list.
func TestAll_EveryPageUpToOneBoundThenAnError(t *testing.T) {
	var asked []int
	got, err := ghpage.All(pages(3, &asked))
	if err != nil || !cmp.Equal(got, []int{1, 2, 3}) || !cmp.Equal(asked, []int{0, 2, 3}) {
		t.Errorf("%v %v, asked %v", got, err, asked)
	}
	asked = nil
	if got, err := ghpage.All(pages(ghpage.MaxPages, &asked)); err != nil || len(got) != ghpage.MaxPages {
		t.Errorf("exactly the bound: %d items, %v", len(got), err)
	}
	asked = nil
	if got, err := ghpage.All(pages(ghpage.MaxPages+1, &asked)); !errors.Is(err, ghpage.ErrTooManyPages) || got != nil {
		t.Errorf("past the bound: %d items, %v", len(got), err)
	}
	boom := errors.New("502")
	if _, err := ghpage.All(func(int) ([]int, *github.Response, error) { return nil, nil, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed page: %v", err)
	}
}

// A cursor listing is read page by page until its last page, a page that
// stops it, or the bound, which is ErrTooManyPages after the pages it read;
// a cursor that does not move on is an error.
func TestCursor_EveryPageUpToOneBoundThenAnError(t *testing.T) {
	listing := func(n int, stopAt string, read *[]string) func(string) (string, bool, error) {
		return func(cursor string) (string, bool, error) {
			*read = append(*read, cursor)
			if cursor == stopAt {
				return "more", true, nil
			}
			i := len(*read)
			if i >= n {
				return "", false, nil
			}
			return fmt.Sprint("c", i), false, nil
		}
	}
	var read []string
	if err := ghpage.Cursor(listing(3, "-", &read)); err != nil || !cmp.Equal(read, []string{"", "c1", "c2"}) {
		t.Errorf("three pages: read %q, %v", read, err)
	}
	read = nil
	if err := ghpage.Cursor(listing(10, "c2", &read)); err != nil || len(read) != 3 {
		t.Errorf("stopped at c2: read %q, %v", read, err)
	}
	read = nil
	if err := ghpage.Cursor(listing(ghpage.MaxPages+5, "-", &read)); !errors.Is(err, ghpage.ErrTooManyPages) || len(read) != ghpage.MaxPages {
		t.Errorf("past the bound: read %d pages, %v; want %d and ErrTooManyPages", len(read), err, ghpage.MaxPages)
	}
	if err := ghpage.Cursor(func(string) (string, bool, error) { return "same", false, nil }); err == nil {
		t.Error("a cursor that never moves on was followed")
	}
}
