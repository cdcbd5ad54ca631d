package spark

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpugate/gpugate/internal/shell"
)

// ShellService drives the resident service with shell commands, each done
// when it exits 0: the ResidentService of a fleet file's service host,
// and what the host agent runs there (sparkctl agent -service-*).
type ShellService struct {
	DrainCmd          string `yaml:"drain"`           // stop taking new work
	StopCmd           string `yaml:"stop"`            // stop it completely (a pause is not a release)
	VerifyReleasedCmd string `yaml:"verify_released"` // exit 0 only when it holds no GPU memory or process
	StartCmd          string `yaml:"start"`
	HealthyCmd        string `yaml:"healthy"` // the model-ready health check
}

var _ ResidentService = (*ShellService)(nil)

// run runs one command. Its error names the step and the exit status,
// with the last line of its output; never the command, which may carry
// host names or credentials the controller's events must not keep.
func (s *ShellService) run(ctx context.Context, step, cmd string) error {
	out, err := shell.Run(ctx, cmd)
	if err == nil {
		return nil
	}
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	if last != "" {
		return fmt.Errorf("resident service %s command: %w: %s", step, err, last)
	}
	return fmt.Errorf("resident service %s command: %w", step, err)
}

// Drain runs the drain command.
func (s *ShellService) Drain(ctx context.Context) error { return s.run(ctx, "drain", s.DrainCmd) }

// Stop runs the stop command.
func (s *ShellService) Stop(ctx context.Context) error { return s.run(ctx, "stop", s.StopCmd) }

// VerifyReleased runs the verify_released command.
func (s *ShellService) VerifyReleased(ctx context.Context) error {
	return s.run(ctx, "verify_released", s.VerifyReleasedCmd)
}

// Start runs the start command.
func (s *ShellService) Start(ctx context.Context) error { return s.run(ctx, "start", s.StartCmd) }

// Healthy runs the healthy command.
func (s *ShellService) Healthy(ctx context.Context) error {
	return s.run(ctx, "healthy", s.HealthyCmd)
}
