package cachetrust

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrNothingToCheck is matched when a directory holds neither a workflow
// nor an action.yml: a clean result there would mean nothing (the wrong
// directory, or a checkout step left out).
var ErrNothingToCheck = errors.New("cachetrust: nothing to check")

// ReadWorkflows reads what CheckWorkflows checks in the repository checked
// out at dir, keyed by their slash-separated paths under it: every
// .github/workflows/*.yml and *.yaml, the root action.yml, every local
// action under .github (action.yml or action.yaml), and every local action
// elsewhere that those files use (uses: ./path), followed to the ones
// those use in turn. A directory with no workflow and no action.yml is
// ErrNothingToCheck.
func ReadWorkflows(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	paths, _ := filepath.Glob(filepath.Join(dir, ".github", "workflows", "*.y*ml"))
	paths = append(paths, filepath.Join(dir, "action.yml"))
	paths = append(paths, dotGithubActions(dir)...)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cachetrust: %w", err)
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: %s has no .github/workflows/*.yml and no action.yml: run it at the repository root or pass -dir", ErrNothingToCheck, dir)
	}
	// A local action may live anywhere in the repository: read the ones
	// the files use, and the ones those use.
	for more := true; more; {
		more = false
		for _, ref := range localUses(files) {
			for _, name := range []string{"action.yml", "action.yaml"} {
				rel := path.Join(ref, name)
				if _, ok := files[rel]; ok {
					break
				}
				if data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel))); err == nil {
					files[rel], more = data, true
					break
				}
			}
		}
	}
	return files, nil
}

// localUses are the directories the files' uses: ./path name.
func localUses(files map[string][]byte) []string {
	var out []string
	for _, data := range files {
		for _, m := range usesLocal.FindAllStringSubmatch(string(data), -1) {
			dir := path.Clean(strings.Trim(m[1], `"'`))
			if !strings.HasPrefix(dir, "..") && !strings.HasSuffix(dir, ".yml") && !strings.HasSuffix(dir, ".yaml") {
				out = append(out, dir)
			}
		}
	}
	return out
}

var usesLocal = regexp.MustCompile(`(?m)\buses:\s*["']?\./([^\s"'#]*)`)

// dotGithubActions lists the action.yml and action.yaml files under dir's
// .github (where local actions live), skipping nothing readable.
func dotGithubActions(dir string) []string {
	var out []string
	filepath.WalkDir(filepath.Join(dir, ".github"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a missing .github has no local actions
		}
		if !d.IsDir() && (d.Name() == "action.yml" || d.Name() == "action.yaml") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// CheckRepo runs the workflow checker over the repository checked out at
// dir (ReadWorkflows) and returns how many files it read and what it
// found. rulesFile is the repository's own rules; with "", the bundled
// ExampleRules apply without their key pairs, which name the bundled
// workflows' files. A repository's own rules must also name only
// workflows it has (CheckRuleReferences).
func CheckRepo(dir, rulesFile string) (files int, findings []Finding, err error) {
	data := ExampleRules
	if rulesFile != "" {
		if data, err = os.ReadFile(rulesFile); err != nil {
			return 0, nil, fmt.Errorf("cachetrust: %w", err)
		}
	}
	r, err := LoadRules(data)
	if err != nil {
		return 0, nil, err
	}
	wf, err := ReadWorkflows(dir)
	if err != nil {
		return 0, nil, err
	}
	if rulesFile == "" {
		r.KeyPairs = nil
	}
	findings = CheckWorkflows(wf, r)
	if rulesFile != "" {
		findings = append(findings, CheckRuleReferences(wf, r)...)
	}
	return len(wf), findings, nil
}

// Annotation is the finding as a GitHub Actions workflow command: an
// ::error (a ::warning for what cannot be proven) on its file, line and
// column, titled with its rule.
func (f Finding) Annotation() string {
	level := "error"
	if f.Warning {
		level = "warning"
	}
	return fmt.Sprintf("::%s file=%s,line=%d,col=%d,title=%s::%s", level, f.File, f.Line, f.Column, f.Rule, f.Message)
}
