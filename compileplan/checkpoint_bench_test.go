package compileplan

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpugate/gpugate/internal/testsys"
)

// gnuTar is GNU tar's path, or "" when there is none.
func gnuTar() string {
	p, err := exec.LookPath("tar")
	if err != nil {
		return ""
	}
	if out, err := exec.Command(p, "--version").Output(); err != nil || !strings.Contains(string(out), "GNU tar") {
		return ""
	}
	return p
}

// BenchmarkRestoreCheckpointVsTar restores one checkpoint file (n files of
// 4 KiB in directories of 100, as BenchmarkCheckpoint) with
// RestoreCheckpointFile (as the partition command restores it) and with
// GNU `tar -x --no-same-owner` (the peer a workflow would otherwise run),
// one after the other in each iteration, each into an empty directory,
// each after sync(2) (so that neither pays for writing back what the other
// left). ns/op is RestoreCheckpointFile's; the metrics are both tools' wall
// and CPU (user+system) time per restore and their ratios. Without GNU tar
// only RestoreCheckpointFile's figures are reported.
func BenchmarkRestoreCheckpointVsTar(b *testing.B) {
	tarPath := gnuTar()
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			root := benchTree(b, n)
			ckpt := filepath.Join(b.TempDir(), "checkpoint.tar")
			f, err := os.Create(ckpt)
			if err != nil {
				b.Fatal(err)
			}
			w := bufio.NewWriterSize(f, 1<<20)
			_, err = WriteCheckpoint(w, root)
			if err := errors.Join(err, w.Flush(), f.Close()); err != nil {
				b.Fatal(err)
			}
			parent := b.TempDir()
			var ours, oursCPU, tars, tarsCPU time.Duration
			first := true
			b.SetBytes(int64(n) << 12)
			testsys.SyncFS()
			for b.Loop() {
				dst, err := os.MkdirTemp(parent, "restore")
				if err != nil {
					b.Fatal(err)
				}
				t0, c0 := time.Now(), testsys.CPUTime()
				if _, err := RestoreCheckpointFile(ckpt, dst); err != nil {
					b.Fatal(err)
				}
				ours += time.Since(t0)
				oursCPU += testsys.CPUTime() - c0
				b.StopTimer()
				if first {
					sameMtimes(b, root, dst, n)
				}
				os.RemoveAll(dst)
				testsys.SyncFS()
				if tarPath != "" {
					dst, err := os.MkdirTemp(parent, "tar")
					if err != nil {
						b.Fatal(err)
					}
					t0, c0 := time.Now(), testsys.ChildrenCPUTime()
					if out, err := exec.Command(tarPath, "-x", "--no-same-owner", "-f", ckpt, "-C", dst).CombinedOutput(); err != nil {
						b.Fatalf("tar: %v\n%s", err, out)
					}
					tars += time.Since(t0)
					tarsCPU += testsys.ChildrenCPUTime() - c0
					if first {
						sameMtimes(b, root, dst, n)
					}
					os.RemoveAll(dst)
					testsys.SyncFS()
				}
				first = false
				b.StartTimer()
			}
			per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			b.ReportMetric(per(ours), "restore-ms")
			b.ReportMetric(per(oursCPU), "restore-cpu-ms")
			if tarPath != "" {
				b.ReportMetric(per(tars), "tar-ms")
				b.ReportMetric(per(tarsCPU), "tar-cpu-ms")
				b.ReportMetric(float64(ours)/float64(tars), "restore/tar")
				b.ReportMetric(float64(oursCPU)/float64(tarsCPU), "restore/tar-cpu")
			}
		})
	}
}

// sameMtimes checks a sample of restored files and their directories
// against the tree they were checkpointed from, to the nanosecond.
func sameMtimes(b *testing.B, src, dst string, n int) {
	b.Helper()
	for i := 0; i < n; i += max(1, n/50) {
		file := filepath.Join(fmt.Sprintf("d%04d", i/100), fmt.Sprintf("f%d.o", i))
		for _, rel := range []string{file, filepath.Dir(file)} { // and its directory, whose children changed it
			want, err1 := os.Lstat(filepath.Join(src, rel))
			got, err2 := os.Lstat(filepath.Join(dst, rel))
			if err := errors.Join(err1, err2); err != nil {
				b.Fatal(err)
			}
			if !got.ModTime().Equal(want.ModTime()) || got.Mode() != want.Mode() {
				b.Fatalf("%s: restored %v %v, want %v %v", rel, got.ModTime(), got.Mode(), want.ModTime(), want.Mode())
			}
		}
	}
}
