package textlimit

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	if got := Cut("short", 5, "…"); got != "short" {
		t.Errorf("a text within the limit changed: %q", got)
	}
	if got := Cut("abcdefgh", 6, "+cut"); got != "ab+cut" {
		t.Errorf("%q", got)
	}
	// Never inside a character: "é" is two bytes.
	if got := Cut("aéé", 4, "!"); got != "aé!" {
		t.Errorf("%q", got)
	}
	if got := Cut("abcdef", 2, "long note"); got != "" {
		t.Errorf("a note longer than the limit: %q", got)
	}
}

func FuzzCut(f *testing.F) {
	f.Add("aéé", 4, "!")
	f.Add(strings.Repeat("語", 10), 7, "…")
	f.Fuzz(func(t *testing.T, s string, max int, note string) {
		if max < 0 || max > 1<<20 || !utf8.ValidString(s) {
			return
		}
		got := Cut(s, max, note)
		if len(got) > max || !utf8.ValidString(got) && utf8.ValidString(note) {
			t.Fatalf("Cut(%q, %d, %q) = %q", s, max, note, got)
		}
		if len(s) <= max && got != s {
			t.Fatalf("a text within the limit changed: %q", got)
		}
		if len(s) > max && got != "" && (!strings.HasSuffix(got, note) || !strings.HasPrefix(s, strings.TrimSuffix(got, note))) {
			t.Fatalf("Cut(%q, %d, %q) = %q: want a prefix of s and the note", s, max, note, got)
		}
	})
}

// One abbreviation of a commit SHA everywhere: git's seven characters;
// anything shorter is kept whole.
func TestShortSHA_IsGitsSevenCharacters(t *testing.T) {
	for in, want := range map[string]string{"7fc2a91c3b5e4d6f8a9b0c1d2e3f405162738495": "7fc2a91", "abc": "abc", "": ""} {
		if got := ShortSHA(in); got != want {
			t.Errorf("ShortSHA(%q) = %q, want %q", in, got, want)
		}
	}
}
