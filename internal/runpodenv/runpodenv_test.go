package runpodenv

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/ghclient"
)

// A real run is refused for its RunPod key first, then for its GitHub
// credentials, then for its other settings, each said with the command's
// name; with all three it gets both clients.
func TestClients_TheKeyThenGitHubThenTheSettings(t *testing.T) {
	errSettings := errors.New("tool: -repo is required")
	for name, tc := range map[string]struct {
		env      map[string]string
		settings error
		want     error
		msg      string
	}{
		"nothing":        {map[string]string{}, errSettings, ErrNoAPIKey, "tool: RUNPOD_API_KEY is not set (or use -simulate)"},
		"no GitHub":      {map[string]string{"RUNPOD_API_KEY": "rpa_x"}, errSettings, ghclient.ErrNoToken, ""},
		"no settings":    {map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_TOKEN": "ghs_x"}, errSettings, errSettings, "tool: -repo is required"},
		"everything set": {map[string]string{"RUNPOD_API_KEY": "rpa_x", "GITHUB_TOKEN": "ghs_x"}, nil, nil, ""},
	} {
		api, gh, err := Clients(context.Background(), func(k string) string { return tc.env[k] }, "tool", "lookups need GitHub", tc.settings)
		switch {
		case tc.want == nil && (err != nil || api == nil || gh == nil):
			t.Errorf("%s: %v, %v, %v; want both clients", name, api, gh, err)
		case tc.want != nil && (!errors.Is(err, tc.want) || api != nil || gh != nil):
			t.Errorf("%s: %v; want %v and no client", name, err, tc.want)
		case tc.msg != "" && err.Error() != tc.msg:
			t.Errorf("%s: %q, want %q", name, err, tc.msg)
		}
	}
	_, _, err := Clients(context.Background(), func(k string) string { return map[string]string{"RUNPOD_API_KEY": "k"}[k] }, "tool", "lookups need GitHub", nil)
	if got := err.Error(); !strings.HasPrefix(got, "tool: lookups need GitHub: ") {
		t.Errorf("the GitHub refusal says what needs it: %q", got)
	}
}
