// Package secret holds the string type that keeps credentials out of logs,
// errors, summaries and artifacts: every way of printing or encoding it
// yields "[redacted]"; only Reveal returns the value.
package secret

import (
	"fmt"
	"log/slog"
	"strings"
)

// Redacted is what a Secret prints as.
const Redacted = "[redacted]"

// Secret is a credential (API key, token, JIT runner config, startup
// command). fmt verbs, %#v, slog and JSON/text encoding all print Redacted.
type Secret string

// Reveal returns the value, for the one place that must send it.
func (s Secret) Reveal() string { return string(s) }

// String returns Redacted.
func (s Secret) String() string { return Redacted }

// Format prints Redacted for every verb, %#v and %x included.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// LogValue makes slog print Redacted.
func (s Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON encodes Redacted.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText encodes Redacted (YAML, XML, map keys).
func (s Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Scrub replaces every occurrence of each non-empty secret in text with
// Redacted, for messages that come back from outside (an API echoing a
// request, say).
func Scrub(text string, secrets ...Secret) string {
	for _, s := range secrets {
		if len(s) >= 4 {
			text = strings.ReplaceAll(text, string(s), Redacted)
		}
	}
	return text
}
