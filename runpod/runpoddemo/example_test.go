package runpoddemo_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/runpod/runpoddemo"
)

// ExampleNewReaping sweeps the demonstration account once as a dry run:
// one pod for each rule, and nothing deleted.
func ExampleNewReaping() {
	ctx := context.Background()
	demo, err := runpoddemo.NewReaping(ctx)
	if err != nil {
		panic(err)
	}
	ds, err := runpod.Reap(ctx, demo.Deps, runpod.DefaultReapPolicy(runpoddemo.Repository, runpoddemo.Workflow), time.Now())
	if err != nil {
		panic(err)
	}
	var rules []string
	for _, d := range ds {
		rules = append(rules, d.Rule+"/"+d.Action)
	}
	slices.Sort(rules)
	fmt.Println(rules)
	fmt.Println("running:", demo.Running())
	// Output:
	// [active/none lifetime/would-delete retained/none run-completed/would-delete superseded/would-delete untagged/none]
	// running: 6
}

// ExampleAcceptedPod ends the demonstration's accepted pod as cleanup
// does: with a confirmed deletion.
func ExampleAcceptedPod() {
	ctx := context.Background()
	api, podID, err := runpoddemo.AcceptedPod(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("deleted:", runpod.Delete(ctx, api, podID) == nil)
	// Output: deleted: true
}
