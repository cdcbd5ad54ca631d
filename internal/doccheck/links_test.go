package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// link is a Markdown inline link: its target (empty for a link inside the
// same file) and its #fragment.
var link = regexp.MustCompile(`\]\(([^)#\s]*)(?:#([^)\s]*))?\)`)

// anchors are the fragments GitHub gives a Markdown file's headings:
// lowercased, punctuation dropped, spaces turned into hyphens (a repeated
// heading's -1, -2 suffixes included).
func anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if fenced || !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		slug := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(title))
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestEveryRelativeLinkInTheDocsResolves(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "CONTRIBUTING.md")}, docs...)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, fragment := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || target == "" && fragment == "" {
				continue
			}
			checked++
			path := f
			if target != "" {
				path = filepath.Join(filepath.Dir(f), filepath.FromSlash(target))
			}
			linked, err := os.ReadFile(path)
			if err != nil {
				if info, serr := os.Stat(path); serr != nil || !info.IsDir() {
					t.Errorf("%s links to %s, which does not exist", rel, target)
				}
				continue
			}
			if fragment != "" && strings.HasSuffix(path, ".md") && !anchors(string(linked))[fragment] {
				t.Errorf("%s links to %s#%s, a heading that file does not have", rel, target, fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pattern no longer matches the docs")
	}
}

func TestAnchorsAreGitHubs(t *testing.T) {
	got := anchors("# gpugate\n## 5. Development through the same queue\n### The GPU job on the pod\n```sh\n# not a heading\n```\n## `cachecheck` and `-json`\n## Setup\n## Setup\n")
	for _, want := range []string{"gpugate", "5-development-through-the-same-queue", "the-gpu-job-on-the-pod", "cachecheck-and--json", "setup", "setup-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became a heading")
	}
}
