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
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gpugate/gpugate/cachetrust"
	"github.com/gpugate/gpugate/ghclient"
	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/internal/ghaction"
)

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
	fs.Func("require", "with -tree: a doublestar pattern, relative to the tree, that must match at least one non-empty file (repeatable)", appendTo(&treeRules.Required))
	fs.Func("exclude", "with -tree: a doublestar pattern, relative to the tree, that nothing in it may match: what the installer leaves out before caching (**/*.a, bin/**, **/stubs/**; repeatable)", appendTo(&treeRules.Excluded))
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
	switch {
	case *tree != "":
		return checkTree(*tree, treeRules, *asJSON, gha, stdout, stderr, annotations)
	case *find != "":
		return findArtifact(*find, *repo, *trusted, *asJSON, getenv, gha, stdout, fail)
	case *key || *embeds:
		spec, err := cachetrust.KeySpecFile(*specFile)
		if err != nil {
			return fail(err)
		}
		if *toolchain != "" {
			spec.Toolchain = *toolchain
		}
		if *embeds {
			return checkEmbeds(*dir, spec, *asJSON, stdout, fail)
		}
		return printKey(*dir, spec, *explain, *asJSON, gha, stdout, stderr, fail)
	}
	n, findings, err := cachetrust.CheckRepo(*dir, *rulesFile)
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		if findings == nil {
			findings = []cachetrust.Finding{} // an empty result is [], not null
		}
		printJSON(stdout, findings)
	} else {
		for _, f := range findings {
			fmt.Fprintln(stdout, f)
		}
		fmt.Fprintf(stdout, "%d file(s) checked, %d finding(s)\n", n, len(findings))
	}
	code := 0
	for _, f := range findings {
		if !f.Warning {
			code = 1 // warnings (what cannot be proven) alone fail nothing
		}
		if gha.Actions {
			fmt.Fprintln(annotations, f.Annotation())
		}
	}
	return code
}

// checkTree checks a restored or freshly installed runtime tree: a
// library stored twice is a warning, an incomplete tree exit 1.
func checkTree(tree string, rules cachetrust.TreeRules, asJSON bool, gha ghaction.Env, stdout, stderr, annotations io.Writer) int {
	rep, err := cachetrust.CheckTree(tree, rules)
	for _, group := range rep.Copies {
		gha.Warn(stdout, stderr, fmt.Sprintf("cachecheck: %s stores one library %d times (%s): keep soname links and lib/lib64 aliases as links, or every copy is cached and transferred again", tree, len(group), strings.Join(group, ", ")))
	}
	if asJSON {
		printJSON(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, err) // one line per problem: the restore is rejected and rebuilt
		if gha.Actions {
			ghaction.Error(annotations, fmt.Sprintf("cachecheck: %s is incomplete: reject it and install afresh", tree))
		}
		return 1
	}
	if !asJSON {
		fmt.Fprintf(stdout, "%s is complete: %d file(s), %d symlink(s) all resolving inside it, every required pattern matched, nothing excluded\n", tree, rep.Files, rep.Symlinks)
	}
	return 0
}

// checkEmbeds fails when a file compiled into a binary is not an input of
// the key.
func checkEmbeds(dir string, spec cachetrust.KeySpec, asJSON bool, stdout io.Writer, fail func(error) int) int {
	es, err := cachetrust.Embeds(os.DirFS(dir))
	if err == nil {
		err = cachetrust.CheckEmbeds(spec, es)
	}
	if err != nil {
		return fail(err)
	}
	if asJSON {
		if es == nil {
			es = []cachetrust.Embed{} // none is [], not null
		}
		printJSON(stdout, es)
	} else {
		fmt.Fprintf(stdout, "%d embedded file(s), all inputs of the key\n", len(es))
	}
	return 0
}

// printKey prints the content key (the step output key) and, with explain,
// what makes it differ from an earlier one.
func printKey(dir string, spec cachetrust.KeySpec, explain string, asJSON bool, gha ghaction.Env, stdout, stderr io.Writer, fail func(error) int) int {
	k, err := cachetrust.KeyDir(dir, spec)
	if err != nil {
		return fail(err)
	}
	if asJSON {
		printJSON(stdout, k)
	} else {
		fmt.Fprintf(stdout, "key=%s\n", k.Key)
	}
	// A misspelt include glob leaves the files it meant out of the key;
	// a repository without benches/ is fine. Said where a reviewer sees
	// it, never as a failure.
	for _, g := range k.Unmatched {
		gha.Note(stdout, stderr, fmt.Sprintf("cachecheck: include glob %q covers no file of the key: if it is misspelt, the files it meant are not inputs, and changing them would keep the key", g))
	}
	if explain != "" {
		old, err := cachetrust.ReadArchiveKey(explain)
		if err != nil {
			return fail(fmt.Errorf("cachecheck: -explain: %w", err))
		}
		diffs := cachetrust.Explain(old, k)
		if len(diffs) == 0 {
			fmt.Fprintf(stderr, "the key is unchanged from %s\n", explain)
		}
		for _, d := range diffs {
			fmt.Fprintln(stderr, d)
		}
	}
	if err := gha.SetOutputs([2]string{"key", k.Key}); err != nil {
		return fail(err)
	}
	return 0
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
	art, source := cachetrust.FindRepoArtifact(ctx, client, owner, name, strings.Split(trusted, ","), key)
	id, run := "", ""
	if art != nil {
		id, run = strconv.FormatInt(art.ID, 10), strconv.FormatInt(art.RunID, 10)
	}
	if asJSON {
		printJSON(stdout, map[string]string{"artifact_id": id, "artifact_run_id": run, "source": source})
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

// appendTo is a repeatable flag's Set: each value is appended to list.
func appendTo(list *[]string) func(string) error {
	return func(v string) error { *list = append(*list, v); return nil }
}

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) {
	out, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(w, string(out))
}
