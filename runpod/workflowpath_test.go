package runpod

import (
	"testing"
)

func TestWorkflowPath(t *testing.T) {
	for in, want := range map[string][2]string{
		".github/workflows/gpu.yml":                        {".github/workflows/gpu.yml", ""},
		"o/r/.github/workflows/gpu.yml@refs/heads/main":    {".github/workflows/gpu.yml", "o/r"},
		"o/r/.github/workflows/gpu.yml@refs/pull/42/merge": {".github/workflows/gpu.yml", "o/r"},
		"octocat/octo-repo/.github/workflows/ci.yml@main":  {".github/workflows/ci.yml", "octocat/octo-repo"},
		"gpu.yml":                             {".github/workflows/gpu.yml", ""},
		"gpu.yml@main":                        {".github/workflows/gpu.yml", ""},
		"dynamic/github-code-scanning/codeql": {"dynamic/github-code-scanning/codeql", ""},
		"":                                    {"", ""},
	} {
		path, repo := workflowPath(in)
		if path != want[0] || repo != want[1] {
			t.Errorf("WorkflowPath(%q) = %q, %q; want %q, %q", in, path, repo, want[0], want[1])
		}
	}
}

// Whatever GitHub or a person writes, reducing it twice changes nothing.
func FuzzWorkflowPath(f *testing.F) {
	for _, s := range []string{"o/r/.github/workflows/gpu.yml@refs/heads/main", "gpu.yml", ".github/workflows/a.yml", "@", "a@b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		path, _ := workflowPath(name)
		again, repo := workflowPath(path)
		if again != path || repo != "" {
			t.Errorf("WorkflowPath(%q) = %q, but WorkflowPath(%q) = %q, %q", name, path, path, again, repo)
		}
	})
}
