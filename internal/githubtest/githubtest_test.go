package githubtest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/gpugate/gpugate/internal/githubtest"
)

func TestNew_TheClientCallsTheLoopbackServer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/o/r", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":42,"full_name":"o/r"}`)
	})
	c, srv := githubtest.New(t, mux)
	repo, _, err := c.Repositories.Get(context.Background(), "o", "r")
	if err != nil || repo.GetID() != 42 {
		t.Fatalf("Get = %v, %v", repo, err)
	}
	srv.Close()
	if _, _, err := c.Repositories.Get(context.Background(), "o", "r"); err == nil {
		t.Error("a call after Close must fail")
	}
}
