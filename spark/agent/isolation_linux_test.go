package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/gpugate/gpugate/spark/agent"
)

// A work root where links to the install cannot be made (another mount
// of the same file system, as a service's ReadWritePaths= makes) is
// refused at start, not met with a failure at every job.
func TestAgent_AWorkRootWhereLinksToTheInstallFailIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a runner user needs root on Linux")
	}
	run := rootInstall(t)
	dir := filepath.Dir(filepath.Dir(run))
	src, work := filepath.Join(dir, "src"), filepath.Join(dir, "work")
	os.Mkdir(src, 0o755)
	os.Mkdir(work, 0o755)
	if err := syscall.Mount(src, work, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("no bind mount here: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(work, syscall.MNT_DETACH) })
	if err := runAgentErr(t, agent.Config{WorkRoot: work, RunnerCmd: run}); !errors.Is(err, agent.ErrConfig) {
		t.Errorf("a work root on another mount than the install: %v, want ErrConfig", err)
	}
}
