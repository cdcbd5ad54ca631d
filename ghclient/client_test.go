package ghclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGitHubClient_AuthenticatesWithTheTokenAgainstGITHUB_API_URL(t *testing.T) {
	var auth, path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, path = r.Header.Get("Authorization"), r.URL.Path
		w.Write([]byte(`{"full_name":"o/r"}`))
	}))
	defer srv.Close()
	env := map[string]string{"GITHUB_TOKEN": "ghs_token", "GITHUB_API_URL": srv.URL + "/api/v3"}
	c, err := New(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	repo, _, err := c.Repositories.Get(context.Background(), "o", "r")
	if err != nil || repo.GetFullName() != "o/r" {
		t.Fatalf("Get = %v, %v", repo, err)
	}
	if auth != "Bearer ghs_token" || path != "/api/v3/repos/o/r" {
		t.Errorf("Authorization %q, path %q", auth, path)
	}
}

func TestGitHubClient_RefusesAMissingTokenOrABadURL(t *testing.T) {
	if _, err := New(context.Background(), func(string) string { return "" }); !errors.Is(err, ErrNoToken) {
		t.Errorf("no token: %v, want ErrNoToken", err)
	}
	env := map[string]string{"GITHUB_TOKEN": "ghs_token", "GITHUB_API_URL": "http://[::1"}
	if _, err := New(context.Background(), func(k string) string { return env[k] }); err == nil {
		t.Error("a malformed GITHUB_API_URL was accepted")
	}
}
