package smoke

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// RealEnv is the pod's real environment.
type RealEnv struct {
	// HTTP downloads the package; nil uses a client with a 2-minute
	// timeout.
	HTTP *http.Client
}

var _ Env = RealEnv{}

// NvidiaSMI runs nvidia-smi twice: the query, and the banner.
func (e RealEnv) NvidiaSMI(ctx context.Context) ([]byte, []byte, error) {
	q, err := output(ctx, "nvidia-smi", QueryArgs...)
	if err != nil {
		return nil, nil, err
	}
	b, err := output(ctx, "nvidia-smi")
	return q, b, err
}

func output(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Download fetches url into dst.
func (e RealEnv) Download(ctx context.Context, url, dst string) error {
	hc := e.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 512<<20)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Install runs dpkg -i on the verified package (no apt-get update).
func (e RealEnv) Install(ctx context.Context, deb string) error {
	_, err := output(ctx, "dpkg", "-i", deb)
	return err
}

// CUDA opens libcuda and the tier's libnvrtc through purego (no cgo).
func (e RealEnv) CUDA(ctx context.Context, t Tier) (CUDA, error) {
	return OpenCUDA(t.LibDir)
}
