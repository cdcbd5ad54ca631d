package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("rpa_SUPERSECRET")
	type holder struct {
		Key Secret
		Env map[string]Secret
	}
	h := holder{Key: s, Env: map[string]Secret{"RUNNER_JIT_CONFIG": s}}
	var outs []string
	for _, verb := range []string{"%v", "%s", "%q", "%x", "%X", "%#v", "%+v", "%d", "%10s"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h))
	}
	j, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "key", s, "h", h)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "key", s)
	outs = append(outs, logs.String())
	for _, o := range outs {
		if strings.Contains(o, "SUPERSECRET") {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if s.Reveal() != "rpa_SUPERSECRET" {
		t.Error("Reveal must return the value")
	}
}

func TestScrub(t *testing.T) {
	got := Scrub(`env.RUNNER_JIT_CONFIG "abcdef" is too long; key abcdef`, "abcdef", "", "ab")
	if got != `env.RUNNER_JIT_CONFIG "[redacted]" is too long; key [redacted]` {
		t.Errorf("Scrub = %q", got)
	}
}
