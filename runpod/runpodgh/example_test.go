package runpodgh_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/google/go-github/v66/github"

	"github.com/gpugate/gpugate/runpod/runpodgh"
)

// Progress finds the GPU job of one run attempt, here inside a called
// workflow, and whether the step that runs its tests has begun; a
// loopback server stands in for GitHub's API.
func ExampleProgress() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"total_count":1,"jobs":[{"name":"gpu / Run GPU tests","status":"completed","conclusion":"success",
			"steps":[{"name":"Run CUDA tests from archive","status":"completed"}]}]}`)
	}))
	defer srv.Close()
	c := github.NewClient(srv.Client())
	c.BaseURL, _ = url.Parse(srv.URL + "/")
	p := &runpodgh.Progress{Client: c, Owner: "o", Repo: "r", RunID: 1, Attempt: 1, Job: "Run GPU tests", TestStep: "Run CUDA tests from archive"}
	job, err := p.JobProgress(context.Background())
	fmt.Println(job.Completed, job.Conclusion, job.TestsStarted, err)
	// Output: true success true <nil>
}
