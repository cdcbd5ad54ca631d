// Command nvrtcpin pins the on-pod CUDA proof's NVRTC tier table: it fills
// each tier's sha256 from the Packages index of the repository the tier's
// url points into, so that nobody copies a checksum by hand.
//
//	curl -fsSLO https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/Packages
//	nvrtcpin [-tiers nvrtc-tiers.yml] [-o nvrtc-tiers.yml] Packages [MORE-INDEXES...]
//
// Each index may be plain or gzipped (Packages.gz), or - for stdin. Without
// -tiers it pins the bundled example (the default 12.8 and 12.6 tiers);
// without -o it prints the pinned table. Only the sha256 values change:
// comments and layout stay, and a checksum already in the table must agree
// with the index. Review the diff before committing it: the checksum is as
// trustworthy as the index it came from. provision -nvrtc-tiers then takes
// the file.
package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpugate/gpugate/internal/cli"
	"github.com/gpugate/gpugate/smoke/tiers"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nvrtcpin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tableFile := fs.String("tiers", "", "the YAML tier table to pin (default: the bundled example)")
	out := fs.String("o", "", "write the pinned table here (default: stdout); it may be the -tiers file")
	err := cli.FlagsAndArgs(fs, args)
	if err == nil && fs.NArg() == 0 {
		err = cli.Refuse(fs, "name the repository's Packages index (a file, or - for stdin)")
	}
	if err == nil {
		err = pin(*tableFile, *out, fs.Args(), stdin, stdout, stderr)
	}
	code := cli.Status(err)
	if code == 1 {
		fmt.Fprintln(stderr, err)
	}
	return code
}

func pin(tableFile, out string, indexes []string, stdin io.Reader, stdout, stderr io.Writer) error {
	table := tiers.Example
	if tableFile != "" {
		var err error
		if table, err = os.ReadFile(tableFile); err != nil {
			return fmt.Errorf("nvrtcpin: -tiers: %w", err)
		}
	}
	var index []tiers.Package
	for _, name := range indexes {
		pkgs, err := readIndex(name, stdin)
		if err != nil {
			return fmt.Errorf("nvrtcpin: %s: %w", name, err)
		}
		index = append(index, pkgs...)
	}
	pinned, done, err := tiers.Pin(table, index)
	if err != nil {
		return err
	}
	for _, p := range done {
		state := "pinned"
		if p.Already {
			state = "already pinned, and the index agrees"
		}
		fmt.Fprintf(stderr, "%s: %s %s sha256 %s (%s)\n", p.Tier, p.Package, p.Version, p.SHA256, state)
	}
	if out == "" {
		_, err = stdout.Write(pinned)
		return err
	}
	if err := os.WriteFile(out, pinned, 0o644); err != nil {
		return fmt.Errorf("nvrtcpin: -o: %w", err)
	}
	return nil
}

// readIndex parses one Packages index, gunzipping it when it is gzipped.
func readIndex(name string, stdin io.Reader) ([]tiers.Package, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		return tiers.ParsePackages(zr)
	}
	return tiers.ParsePackages(br)
}
