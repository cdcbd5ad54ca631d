package agent_test

import (
	"context"
	"fmt"

	"github.com/gpugate/gpugate/spark/agent"
)

// A preflight's interconnect and service-released checks are shell
// commands: exit status 0 passes; a failure names the command, its exit
// status and its output.
func ExampleShellCheck() {
	ctx := context.Background()
	fmt.Println(agent.ShellCheck("true").Check(ctx))
	fmt.Println(agent.ShellCheck("echo 'link down' >&2; exit 3").Check(ctx))
	// Output:
	// <nil>
	// "echo 'link down' >&2; exit 3": exit status 3: link down
}
