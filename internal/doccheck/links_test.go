package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// link is a Markdown inline link's target, without its #fragment.
var link = regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)

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
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			if _, err := os.Stat(filepath.Join(filepath.Dir(f), filepath.FromSlash(target))); err != nil {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s links to %s, which does not exist", rel, target)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pattern no longer matches the docs")
	}
}
