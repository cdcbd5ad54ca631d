package smoke

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// RealEnv is the pod's real environment: nvidia-smi, the image's curl,
// dpkg, and libcuda/libnvrtc through purego. It links no HTTP or TLS
// stack, which keeps the proof small enough to travel inside the pod's
// create request (see Payload).
type RealEnv struct {
	// Curl is the download tool (default "curl", which the runner image
	// supplies).
	Curl string
	// Timeout bounds each command (default 2 minutes).
	Timeout time.Duration
}

var _ Env = RealEnv{}

// NvidiaSMI runs nvidia-smi twice: the query, and the banner.
func (e RealEnv) NvidiaSMI(ctx context.Context) ([]byte, []byte, error) {
	q, err := e.output(ctx, "nvidia-smi", QueryArgs...)
	if err != nil {
		return nil, nil, err
	}
	b, err := e.output(ctx, "nvidia-smi")
	return q, b, err
}

func (e RealEnv) output(ctx context.Context, name string, args ...string) ([]byte, error) {
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		said := strings.TrimSpace(stderr.String())
		if said == "" {
			// nvidia-smi says why it failed on stdout ("NVIDIA-SMI has
			// failed because it couldn't communicate with the NVIDIA
			// driver...").
			said = clip(firstLine(string(out)))
		}
		return nil, &CommandError{Command: name, Err: err, Said: said}
	}
	return out, nil
}

// CommandError is a command of the pod's environment that failed, and
// what it said: its standard error, or, when that is empty, the first
// line of its output (at most BannerLineMax bytes).
type CommandError struct {
	Command string
	Err     error
	Said    string
}

// Error names the command, how it failed and what it said.
func (e *CommandError) Error() string { return fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Said) }

// Unwrap returns how the command failed (an *exec.ExitError, a timeout).
func (e *CommandError) Unwrap() error { return e.Err }

// CurlArgs are the arguments Download gives curl: HTTPS only (redirects
// included), fail on an HTTP error status, a bounded size and two retries
// for transient failures.
func CurlArgs(url, dst string) []string {
	return []string{
		"--fail", "--silent", "--show-error", "--location",
		"--proto", "=https", "--proto-redir", "=https",
		"--max-filesize", "536870912", "--retry", "2",
		"--output", dst, "--", url,
	}
}

// Download fetches url into dst with curl; the caller verifies the
// checksum before anything is installed.
func (e RealEnv) Download(ctx context.Context, url, dst string) error {
	curl := e.Curl
	if curl == "" {
		curl = "curl"
	}
	_, err := e.output(ctx, curl, CurlArgs(url, dst)...)
	return err
}

// Install runs dpkg -i on the verified package (no apt-get update).
func (e RealEnv) Install(ctx context.Context, deb string) error {
	_, err := e.output(ctx, "dpkg", "-i", deb)
	return err
}

// CUDA opens libcuda and the tier's libnvrtc through purego (no cgo).
func (e RealEnv) CUDA(ctx context.Context, t Tier) (CUDA, error) {
	return OpenCUDA(t.LibDir)
}
