// Command smoke is the on-pod CUDA compatibility proof. It runs as root in
// the pod's startup script before the runner registers:
//
//	smoke [-tiers tiers.json] [-min-vram-gb 20] [-json] [-result FILE]
//	smoke -compile-only LIBDIR [-arch compute_90] [-include DIR -header H...]   # a tree's NVRTC (and its JIT headers), no GPU
//
// Parameters normally come from the pod's non-secret environment:
// GPUGATE_TIERS (the tier table as JSON, which smoke.NewPodStartup renders
// from the YAML table) and GPUGATE_MIN_VRAM_GB. It prints each step and
// exits non-zero on the first failure, with a code per failure class:
//
//	10 driver not visible / nvidia-smi unreadable
//	11 driver below the lowest tier
//	12 NVRTC download, checksum or install failed
//	13 NVRTC compilation failed (or NVRTC newer than the driver, or older than the tier)
//	14 load, launch, synchronize or read-back failed
//	15 not enough VRAM
//	 2 bad flags or configuration
//
// This program travels inside the pod's create request (smoke.PackProof),
// so it links no HTTP, TLS, YAML or regexp code: build it with
// `CGO_ENABLED=0 go` and smoke.ProofBuildArgs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/smoke"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, smoke.RealEnv{}, os.Stdout, os.Stderr))
}

// ExitCodes maps each step to its exit code.
var ExitCodes = map[string]int{
	smoke.StepDriver: 10, smoke.StepTier: 11, smoke.StepInstall: 12,
	smoke.StepCompile: 13, smoke.StepLaunch: 14, smoke.StepVRAM: 15,
}

func run(ctx context.Context, args []string, getenv func(string) string, env smoke.Env, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tiers := fs.String("tiers", "", "tier table file (JSON, as smoke.Config.JSON writes it); default: $GPUGATE_TIERS")
	minVRAM := fs.Int("min-vram-gb", -1, "VRAM floor in GiB; default GPUGATE_MIN_VRAM_GB or the tier table's")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	resultFile := fs.String("result", getenv(smoke.EnvResult), "also write the result as JSON to this file (readable by all: the GPUs, the driver and the chosen tier, no secret), passed or failed, for the job that runs on the pod; default $"+smoke.EnvResult)
	compileOnly := fs.String("compile-only", "", "prove a CUDA toolkit tree on a runner without a GPU: load the NVRTC in this library directory, compile the proof's kernel for -arch and check the PTX (exit 13 on failure); no driver, no tier table")
	arch := fs.String("arch", "compute_90", "with -compile-only: the architecture to compile for")
	include := fs.String("include", "", "with -compile-only and -header: the tree's include directory (NVRTC's --include-path)")
	var headers []string
	fs.Func("header", "with -compile-only: a JIT header the tree must provide and NVRTC must compile (cuda_fp16.h, cuda/std/cstdint); repeat for more", func(h string) error {
		headers = append(headers, h)
		return nil
	})
	if exit, ok := cli.Parse(fs, args); !ok {
		return exit
	}
	if (*include != "" || len(headers) > 0) && (*compileOnly == "" || *include == "" || len(headers) == 0) {
		fmt.Fprintln(stderr, "smoke: -include and -header go together, with -compile-only: give the tree's include directory and at least one header")
		return 2
	}
	if *compileOnly != "" {
		return compileOnlyCheck(*compileOnly, *arch, *include, headers, *asJSON, stdout, stderr)
	}
	data := []byte(getenv(smoke.EnvTiers))
	if *tiers != "" {
		var err error
		if data, err = os.ReadFile(*tiers); err != nil {
			fmt.Fprintln(stderr, "smoke:", err)
			return 2
		}
	}
	if len(data) == 0 && *tiers != "" {
		fmt.Fprintf(stderr, "smoke: -tiers %s is empty: write the JSON that smoke.Config.JSON renders from the YAML table into it\n", *tiers)
		return 2
	}
	if len(data) == 0 {
		fmt.Fprintf(stderr, "smoke: no tier table: pass -tiers FILE or set %s to the JSON that smoke.Config.JSON renders from the YAML table (provision does this for every pod)\n", smoke.EnvTiers)
		return 2
	}
	cfg, err := smoke.ParseConfigJSON(data)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if v := getenv("GPUGATE_MIN_VRAM_GB"); v != "" && *minVRAM < 0 {
		if *minVRAM, err = strconv.Atoi(v); err != nil {
			fmt.Fprintf(stderr, "smoke: GPUGATE_MIN_VRAM_GB %q is not a number\n", v)
			return 2
		}
	}
	if *minVRAM >= 0 {
		cfg.MinVRAMGB = *minVRAM
	}
	cfg.Env = env
	if !*asJSON {
		cfg.Log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	res, err := smoke.Run(ctx, cfg)
	resultJSON, _ := json.MarshalIndent(resultOutput(res), "", "  ")
	if *resultFile != "" {
		// WriteFile's mode passes through the umask; the job runs as
		// another user, so the mode is set again.
		if werr := os.WriteFile(*resultFile, append(resultJSON, '\n'), 0o644); werr != nil {
			fmt.Fprintf(stderr, "smoke: the result file was not written (the job cannot read the chosen tier): %v\n", werr)
		} else if werr := os.Chmod(*resultFile, 0o644); werr != nil {
			fmt.Fprintf(stderr, "smoke: the result file is not readable by the job: %v\n", werr)
		}
	}
	if *asJSON {
		fmt.Fprintln(stdout, string(resultJSON))
	} else {
		for _, s := range res.Steps {
			status, text := "ok  ", s.Detail
			if s.Error != "" {
				status, text = "FAIL", s.Error
			}
			fmt.Fprintf(stdout, "%s %-8s %8s  %s\n", status, s.Step, s.Duration.Round(time.Millisecond), text)
		}
	}
	var se *smoke.StepError
	if errors.As(err, &se) {
		fmt.Fprintf(stderr, "smoke: the CUDA proof failed at step %s: %v\n", se.Step, se.Err)
		return ExitCodes[se.Step]
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if !*asJSON {
		fmt.Fprintln(stdout, "CUDA proof passed")
	}
	return 0
}

// resultJSON is the proof's result as -json and -result write it: each
// step's duration is a duration string ("1.234s"), never the nanoseconds
// a time.Duration encodes to.
type resultJSON struct {
	smoke.Result
	Steps []stepJSON `json:"steps"`
}

type stepJSON struct {
	smoke.StepResult
	Duration string `json:"duration"`
}

func resultOutput(res smoke.Result) resultJSON {
	out := resultJSON{Result: res, Steps: []stepJSON{}}
	for _, s := range res.Steps {
		out.Steps = append(out.Steps, stepJSON{StepResult: s, Duration: s.Duration.Round(time.Millisecond).String()})
	}
	return out
}

// compileTreeResult is -compile-only's -json document.
type compileTreeResult struct {
	OK     bool     `json:"ok"`
	LibDir string   `json:"lib_dir"`
	Arch   string   `json:"arch"`
	Checks []string `json:"checks"` // what compiled, in order
	Error  string   `json:"error,omitempty"`
}

// compileOnlyCheck proves a toolkit tree without a GPU: its NVRTC compiles
// the proof's kernel for arch, then each header. It returns the exit code.
func compileOnlyCheck(libDir, arch, include string, headers []string, asJSON bool, stdout, stderr io.Writer) int {
	res := compileTreeResult{LibDir: libDir, Arch: arch, Checks: []string{}}
	c, err := smoke.OpenNVRTC(libDir)
	var text string
	if err == nil {
		text, err = smoke.CheckCompile(c, arch)
	}
	if err == nil {
		res.Checks = append(res.Checks, text)
		if len(headers) > 0 {
			if text, err = smoke.CheckHeaders(c, arch, include, headers); err == nil {
				res.Checks = append(res.Checks, text)
			}
		}
	}
	res.OK = err == nil
	if err != nil {
		res.Error = err.Error()
		fmt.Fprintln(stderr, err)
	}
	if asJSON {
		data, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(data))
	} else {
		for _, line := range res.Checks {
			fmt.Fprintln(stdout, line)
		}
	}
	if err != nil {
		return ExitCodes[smoke.StepCompile]
	}
	return 0
}
