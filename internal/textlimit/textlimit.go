// Package textlimit cuts text to a platform's size limit without splitting
// a character, and says that it did; ShortSHA is the one abbreviation of a
// commit SHA in messages, logs and summaries.
package textlimit

import "unicode/utf8"

// Cut returns s when it is at most max bytes long. Otherwise it returns a
// prefix of s, cut on a rune boundary, followed by note, the whole at most
// max bytes; when not even note fits, it returns "".
func Cut(s string, max int, note string) string {
	if len(s) <= max {
		return s
	}
	cut := max - len(note)
	if cut < 0 {
		return ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// ShortSHA abbreviates a commit SHA for people to read (git's default of
// seven characters); a shorter string is returned whole.
func ShortSHA(sha string) string { return sha[:min(len(sha), 7)] }
