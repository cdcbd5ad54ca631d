// Command cachecheck enforces the cache-trust contract in a repository:
//
//	cachecheck [-dir .] [-rules rules.yml]     # check .github/workflows/*.yml and action.yml; exit 1 on findings
//	cachecheck -key [-spec key.yml] [-toolchain "$(rustc -V)"]   # print key=<content key> (for $GITHUB_OUTPUT)
//	cachecheck -key -explain old-key.json       # why the key differs from an earlier -key -json (a cache miss)
//	cachecheck -embeds [-spec key.yml]         # fail when an embedded file is not an input of the key
//	cachecheck -find KEY [-repo o/r] [-trusted a.yml,b.yml]   # an earlier trusted run's artifact named KEY (GITHUB_TOKEN)
//	cachecheck -tree DIR -require 'lib/libcutensor.so.2' -require 'lib64/libcufft.so*'   # a restored runtime tree; exit 1 unless complete
//
// With no flags it checks the current repository with the bundled rules.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpugate/gpugate/cachetrust"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

// errNothingToCheck: the directory holds no workflow, so a clean result
// would mean nothing.
var errNothingToCheck = errors.New("nothing to check")

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cachecheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", ".", "repository root")
	rulesFile := fs.String("rules", "", "contract rules (YAML); default: the bundled rules")
	key := fs.Bool("key", false, "print the content key instead of checking workflows")
	embeds := fs.Bool("embeds", false, "check that every embedded file is an input of the key")
	specFile := fs.String("spec", "", "key spec (YAML); default: the Rust workspace spec")
	toolchain := fs.String("toolchain", "", "toolchain string hashed into the key (e.g. rustc -V)")
	asJSON := fs.Bool("json", false, "print JSON")
	explain := fs.String("explain", "", "with -key: an earlier -key -json output; print which inputs make the keys differ")
	find := fs.String("find", "", "look up an unexpired artifact named exactly this content key from a trusted run (outputs artifact_id, artifact_run_id; a miss is not an error)")
	repo := fs.String("repo", getenv("GITHUB_REPOSITORY"), "with -find: owner/name")
	trusted := fs.String("trusted", strings.Join(cachetrust.DefaultPolicy("", "", 0).TrustedWorkflows, ","), "with -find: comma-separated workflow paths whose runs may produce the artifact")
	tree := fs.String("tree", "", "check a restored or freshly installed runtime tree instead: every symlink resolves inside it, each -require pattern matches a non-empty file and nothing matches an -exclude pattern")
	var treeRules cachetrust.TreeRules
	fs.Func("require", "with -tree: a doublestar pattern, relative to the tree, that must match at least one non-empty file (repeatable)", func(v string) error {
		treeRules.Required = append(treeRules.Required, v)
		return nil
	})
	fs.Func("exclude", "with -tree: a doublestar pattern, relative to the tree, that nothing in it may match: what the installer leaves out before caching (**/*.a, bin/**, **/stubs/**; repeatable)", func(v string) error {
		treeRules.Excluded = append(treeRules.Excluded, v)
		return nil
	})
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	switch {
	case *tree == "" && len(treeRules.Required)+len(treeRules.Excluded) > 0:
		return cli.Status(cli.Refuse(fs, "-require and -exclude check a tree: give -tree DIR"))
	case *explain != "" && !*key:
		return cli.Status(cli.Refuse(fs, "-explain compares keys: give -key"))
	case *find != "":
		if err := cli.Require(fs, "repo"); err != nil {
			return cli.Status(err)
		}
		if _, _, err := cli.SplitRepo("cachecheck", *repo); err != nil {
			return cli.Status(cli.Refuse(fs, "-repo %q: want owner/name", *repo))
		}
	}
	gha := ghaction.FromEnv(getenv)
	gha.JSON = *asJSON // stdout carries only JSON: annotations go to stderr
	annotations := stdout
	if *asJSON {
		annotations = stderr
	}
	fail := func(err error) int { gha.Fail(stdout, stderr, err); return 1 }
	if *tree != "" {
		rep, err := cachetrust.CheckTree(*tree, treeRules)
		for _, group := range rep.Copies {
			gha.Warn(stdout, stderr, fmt.Sprintf("cachecheck: %s stores one library %d times (%s): keep soname links and lib/lib64 aliases as links, or every copy is cached and transferred again", *tree, len(group), strings.Join(group, ", ")))
		}
		if *asJSON {
			out, _ := json.MarshalIndent(rep, "", "  ")
			fmt.Fprintln(stdout, string(out))
		}
		if err != nil {
			// One line per problem: the restore is rejected and rebuilt.
			for _, line := range strings.Split(err.Error(), "\n") {
				fmt.Fprintln(stderr, line)
			}
			if gha.Actions {
				ghaction.Error(annotations, fmt.Sprintf("cachecheck: %s is incomplete: reject it and install afresh", *tree))
			}
			return 1
		}
		if !*asJSON {
			fmt.Fprintf(stdout, "%s is complete: %d file(s), %d symlink(s) all resolving inside it, every required pattern matched, nothing excluded\n", *tree, rep.Files, rep.Symlinks)
		}
		return 0
	}
	if *find != "" {
		return findArtifact(*find, *repo, *trusted, *asJSON, getenv, gha, stdout, fail)
	}
	if *key || *embeds {
		spec := cachetrust.RustWorkspaceSpec()
		if *specFile != "" {
			data, err := os.ReadFile(*specFile)
			if err != nil {
				return fail(fmt.Errorf("cachecheck: %w", err))
			}
			if spec, err = cachetrust.LoadKeySpec(data); err != nil {
				return fail(fmt.Errorf("cachecheck: %s: %w", *specFile, err))
			}
		}
		if *toolchain != "" {
			spec.Toolchain = *toolchain
		}
		if *embeds {
			es, err := cachetrust.Embeds(os.DirFS(*dir))
			if err == nil {
				err = cachetrust.CheckEmbeds(spec, es)
			}
			if err != nil {
				return fail(err)
			}
			if *asJSON {
				if es == nil {
					es = []cachetrust.Embed{} // none is [], not null
				}
				out, _ := json.MarshalIndent(es, "", "  ")
				fmt.Fprintln(stdout, string(out))
			} else {
				fmt.Fprintf(stdout, "%d embedded file(s), all inputs of the key\n", len(es))
			}
			return 0
		}
		k, err := cachetrust.Key(os.DirFS(*dir), spec)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			out, _ := json.MarshalIndent(k, "", "  ")
			fmt.Fprintln(stdout, string(out))
		} else {
			fmt.Fprintf(stdout, "key=%s\n", k.Key)
		}
		// A misspelt include glob leaves the files it meant out of the key;
		// a repository without benches/ is fine. Said where a reviewer sees
		// it, never as a failure.
		for _, g := range k.Unmatched {
			gha.Note(stdout, stderr, fmt.Sprintf("cachecheck: include glob %q covers no file of the key: if it is misspelt, the files it meant are not inputs, and changing them would keep the key", g))
		}
		if *explain != "" {
			var old cachetrust.ArchiveKey
			data, err := os.ReadFile(*explain)
			if err == nil {
				err = json.Unmarshal(data, &old)
			}
			if err != nil {
				return fail(fmt.Errorf("cachecheck: -explain %s: %w", *explain, err))
			}
			diffs := cachetrust.Explain(old, k)
			if len(diffs) == 0 {
				fmt.Fprintf(stderr, "the key is unchanged from %s\n", *explain)
			}
			for _, d := range diffs {
				if d.Path != "" {
					fmt.Fprintf(stderr, "%s: %s\n", d.Path, d.Change)
				} else {
					fmt.Fprintln(stderr, d.Change)
				}
			}
		}
		if err := gha.SetOutputs([2]string{"key", k.Key}); err != nil {
			return fail(err)
		}
		return 0
	}
	rules := cachetrust.ExampleRules
	if *rulesFile != "" {
		data, err := os.ReadFile(*rulesFile)
		if err != nil {
			return fail(fmt.Errorf("cachecheck: %w", err))
		}
		rules = data
	}
	r, err := cachetrust.LoadRules(rules)
	if err != nil {
		return fail(err)
	}
	files := map[string][]byte{}
	paths, _ := filepath.Glob(filepath.Join(*dir, ".github", "workflows", "*.y*ml"))
	paths = append(paths, filepath.Join(*dir, "action.yml"))
	// Local actions (uses: ./path): a workflow's steps are followed into
	// them, under the workflow's own triggers.
	paths = append(paths, localActions(*dir)...)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(fmt.Errorf("cachecheck: %w", err))
		}
		rel, _ := filepath.Rel(*dir, p)
		files[filepath.ToSlash(rel)] = data
	}
	if len(files) == 0 {
		return fail(fmt.Errorf("cachecheck: %w: %s has no .github/workflows/*.yml and no action.yml: run it at the repository root or pass -dir", errNothingToCheck, *dir))
	}
	// A local action may live anywhere in the repository: read the ones
	// the checked files use (uses: ./path), and the ones those use.
	for more := true; more; {
		more = false
		for _, ref := range localUses(files) {
			for _, name := range []string{"action.yml", "action.yaml"} {
				rel := path.Join(ref, name)
				if _, ok := files[rel]; ok {
					break
				}
				data, err := os.ReadFile(filepath.Join(*dir, filepath.FromSlash(rel)))
				if err == nil {
					files[rel], more = data, true
					break
				}
			}
		}
	}
	if *rulesFile == "" {
		r.KeyPairs = nil // the bundled pairs name the default files
	}
	findings := cachetrust.CheckWorkflows(files, r)
	if *rulesFile != "" {
		// The repository's own rules must name its own workflows.
		findings = append(findings, cachetrust.CheckRuleReferences(files, r)...)
	}
	if *asJSON {
		if findings == nil {
			findings = []cachetrust.Finding{} // an empty result is [], not null
		}
		out, _ := json.MarshalIndent(findings, "", "  ")
		fmt.Fprintln(stdout, string(out))
	} else {
		for _, f := range findings {
			fmt.Fprintln(stdout, f)
		}
		fmt.Fprintf(stdout, "%d file(s) checked, %d finding(s)\n", len(files), len(findings))
	}
	errs := 0
	for _, f := range findings {
		level := "error"
		if f.Warning {
			level = "warning"
		} else {
			errs++
		}
		if gha.Actions {
			fmt.Fprintf(annotations, "::%s file=%s,line=%d,col=%d,title=%s::%s\n", level, f.File, f.Line, f.Column, f.Rule, f.Message)
		}
	}
	if errs > 0 {
		return 1 // warnings (what cannot be proven) alone fail nothing
	}
	return 0
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

// localActions lists the action.yml and action.yaml files under dir's
// .github (where local actions live), skipping nothing readable.
func localActions(dir string) []string {
	var out []string
	root := filepath.Join(dir, ".github")
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
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

// findArtifact reports an earlier trusted run's artifact named key. Reuse is
// an optimisation: a miss, for whatever reason, exits 0 with empty outputs
// and the workflow builds afresh. Only a command that cannot look at all
// (no repository, no token) fails.
func findArtifact(key, repo, trusted string, asJSON bool, getenv func(string) string, gha ghaction.Env, stdout io.Writer, fail func(error) int) int {
	owner, name, err := cli.SplitRepo("cachecheck", repo)
	if err != nil {
		return fail(err)
	}
	ctx := context.Background()
	client, err := ghclient.New(ctx, getenv)
	if err != nil {
		return fail(fmt.Errorf("cachecheck: -find: %w", err))
	}
	var art *cachetrust.Artifact
	var source string
	p := cachetrust.Policy{Owner: owner, Repo: name, TrustedWorkflows: strings.Split(trusted, ",")}
	if r, _, err := client.Repositories.Get(ctx, owner, name); err != nil {
		// The trust rules need the repository's ID and default branch.
		source = fmt.Sprintf("miss: reading repository %s failed: %v", repo, err)
	} else {
		p.RepositoryID, p.DefaultBranch = r.GetID(), r.GetDefaultBranch()
		art, source = cachetrust.FindArtifact(ctx, client, p, key)
	}
	id, run := "", ""
	if art != nil {
		id, run = strconv.FormatInt(art.ID, 10), strconv.FormatInt(art.RunID, 10)
	}
	if asJSON {
		out, _ := json.MarshalIndent(map[string]string{"artifact_id": id, "artifact_run_id": run, "source": source}, "", "  ")
		fmt.Fprintln(stdout, string(out))
	} else {
		fmt.Fprintln(stdout, source)
	}
	if err := gha.SetOutputs([2]string{"artifact_id", id}, [2]string{"artifact_run_id", run}); err != nil {
		return fail(err)
	}
	if err := gha.AppendSummary("Archive `" + key + "`: " + ghaction.MarkdownCell(source) + "\n"); err != nil {
		return fail(err)
	}
	return 0
}
