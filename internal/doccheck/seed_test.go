package doccheck

// Review tests: each is named after the rule it checks.

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	seedWord = regexp.MustCompile(`(?i)\bseeds?\b|\bseed's\b`)
	// The gateflow simulation's random seed (-seed N) is a real
	// parameter, not a reference to the project's founding issues.
	simulationSeed = regexp.MustCompile(`(?i)random seed|simulation seed|-seed\b|\bseed (\d|%d)|a seed gives|\(seed, ref|Seed\s+int64|seed int64`)
)

// No "seed" in user-facing text: state the rule itself. User-facing text
// is what an adopter reads: the README, the guides, the package docs
// (pkg.go.dev), the files the guides tell them to copy (the example
// policy, RunPod configuration, cache-trust rules, fleet file), the
// actions and the scripts and workflows they run.
func TestNoSeedInUserFacingText(t *testing.T) {
	var files []string
	add := func(pattern string) {
		m, _ := filepath.Glob(filepath.Join(reviewRoot, pattern))
		files = append(files, m...)
	}
	for _, p := range []string{"README.md", "CONTRIBUTING.md", "docs/*.md", "action.yml", "*/action.yml", "scripts/action.sh", "scripts/install.sh",
		"changepolicy/example_policy.yml", "runpod/example_config.yml", "cachetrust/*.yml", "smoke/tiers/*.yml", "spark/fleet/*.yml", "examples/workflows/*"} {
		add(p)
	}
	filepath.WalkDir(reviewRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) == "doc.go" {
			files = append(files, p)
		}
		return nil
	})
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		isGo := strings.HasSuffix(f, ".go")
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if isGo && strings.HasPrefix(line, "package ") {
				break // the package doc ends here
			}
			if seedWord.MatchString(line) && !simulationSeed.MatchString(line) {
				rel, _ := filepath.Rel(reviewRoot, f)
				t.Errorf("%s:%d: %s", rel, n, strings.TrimSpace(line))
			}
		}
	}
	// Package docs outside doc.go.
	for _, f := range []string{"spark/sparkgh/sparkgh.go"} {
		data, _ := os.ReadFile(filepath.Join(reviewRoot, f))
		doc, _, _ := strings.Cut(string(data), "\npackage ")
		for i, line := range strings.Split(doc, "\n") {
			if seedWord.MatchString(line) && !simulationSeed.MatchString(line) {
				t.Errorf("%s:%d: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

const reviewRoot = "../.."
