package smoke

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Limits of the startup payload. The container's entrypoint is exec'd
// with the pod's environment, so Linux's exec limits apply to it: each
// "NAME=value" string at most MaxArgBytes, and all of argv and envp
// together at most a quarter of the stack limit (MaxExecBytes, with the
// common 8 MiB default).
const (
	MaxExecBytes = 2 << 20
	// MaxPayloadBytes is what the proof's chunks may take of MaxExecBytes;
	// the rest is left for the script, the JIT config, the ownership tags
	// and whatever the image and the provider add.
	MaxPayloadBytes = MaxExecBytes - 256<<10
	// chunkBytes is one chunk's base64 text: a multiple of 4 that leaves
	// room for "GPUGATE_PROOF_NN=" and the terminating NUL.
	chunkBytes = (MaxArgBytes - 64) / 4 * 4
)

// execCost is what one exec string of n bytes (an argument or a
// "NAME=value") takes of MaxExecBytes: its bytes, its NUL and its pointer.
func execCost(n int) int { return n + 1 + 8 }

// ExecFits reports whether a process can be exec'd with these arguments and
// environment under Linux's limits: every string within MaxArgBytes, all of
// them within MaxExecBytes. A container's entrypoint meets them with the
// pod's environment and startup command.
func ExecFits(args []string, env map[string]string) bool {
	total := 0
	add := func(n int) bool {
		total += execCost(n)
		return n+1 <= MaxArgBytes
	}
	for _, a := range args {
		if !add(len(a)) {
			return false
		}
	}
	for k, v := range env {
		if !add(len(k) + 1 + len(v)) {
			return false
		}
	}
	return total <= MaxExecBytes
}

// Names of the payload's environment variables.
const (
	// EnvProofChunk prefixes the chunks: GPUGATE_PROOF_00, _01, ...
	EnvProofChunk = "GPUGATE_PROOF_"
	// EnvProofSHA256 is the SHA-256 of the proof binary the chunks decode
	// to; the script checks it before running anything.
	EnvProofSHA256 = "GPUGATE_PROOF_SHA256"
)

// ErrPayload is matched by PackProof's refusals.
var ErrPayload = errors.New("smoke: the proof cannot travel in the startup payload")

// Payload is the proof binary packed into the pod's environment: gzip,
// base64, split into chunks that each fit one exec string. The startup
// script (ScriptParams.Proof) joins them, decodes, checks the SHA-256 and
// unsets them before anything else runs, so nothing is fetched on the pod.
type Payload struct {
	Env         map[string]string // the chunks and EnvProofSHA256; non-secret
	Chunks      []string          // chunk variable names, in order
	SHA256      string            // of the binary
	BinaryBytes int               // the binary as built
	GzipBytes   int               // compressed
	EnvBytes    int               // what the variables take of MaxExecBytes
}

// ProofBuildArgs build the proof small: `CGO_ENABLED=0 go` with these
// arguments, then -o FILE ./examples/smoke (or any main that calls Run).
// Without inlining (-l) the binary is about 3% smaller and compresses about
// 10% better; the proof's speed is irrelevant.
var ProofBuildArgs = []string{"build", "-trimpath", "-gcflags=all=-l", "-ldflags=-s -w"}

// PackProof packs a proof binary (built with ProofBuildArgs) for the
// create request. It refuses anything that is not an ELF executable, an
// ELF for another machine than the pods' x86-64 (ErrProofArch), and a
// payload over MaxPayloadBytes, saying by how much.
func PackProof(binary []byte) (*Payload, error) {
	if !bytes.HasPrefix(binary, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%w: the proof is not an ELF executable (%d bytes): pass the binary built from ./examples/smoke, not an archive or script", ErrPayload, len(binary))
	}
	if err := proofMachine(binary); err != nil {
		return nil, err
	}
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression) // the level is valid
	zw.Write(binary)                                       // writes to a bytes.Buffer do not fail
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(z.Bytes())
	sum := sha256.Sum256(binary)
	p := &Payload{Env: map[string]string{}, SHA256: hex.EncodeToString(sum[:]), BinaryBytes: len(binary), GzipBytes: z.Len()}
	add := func(k, v string) {
		p.Env[k] = v
		p.EnvBytes += execCost(len(k) + 1 + len(v))
	}
	for i := 0; len(enc) > 0; i++ {
		n := min(len(enc), chunkBytes)
		name := fmt.Sprintf("%s%02d", EnvProofChunk, i)
		p.Chunks = append(p.Chunks, name)
		add(name, enc[:n])
		enc = enc[n:]
	}
	add(EnvProofSHA256, p.SHA256)
	if p.EnvBytes > MaxPayloadBytes {
		return nil, fmt.Errorf("%w: %d-byte binary is %d bytes gzipped and %d bytes in the environment, over the %d-byte budget (Linux allows %d for all exec arguments and environment): drop dependencies from the proof (no net/http, no YAML), or bake it into the runner image and set ScriptParams.ProofPath",
			ErrPayload, p.BinaryBytes, p.GzipBytes, p.EnvBytes, MaxPayloadBytes, MaxExecBytes)
	}
	return p, nil
}

// ErrProofArch is matched (with ErrPayload) by PackProof's refusal of a
// proof built for another platform than the pods' (ProofPlatform).
var ErrProofArch = errors.New("smoke: the proof is not built for the pods' platform")

// ProofPlatform is the platform every pod runs the proof on: build it with
// GOOS=linux GOARCH=amd64 whatever the runner that packs it is.
const ProofPlatform = "linux/amd64"

// proofMachine refuses an ELF that is not a 64-bit little-endian x86-64
// executable: a proof built on (or for) an ARM64 runner would fail on every
// pod with "exec format error", each one paid for.
func proofMachine(b []byte) error {
	const machineOffset = 18 // e_machine, after e_ident (16) and e_type (2)
	if len(b) < machineOffset+2 || elf.Class(b[elf.EI_CLASS]) != elf.ELFCLASS64 || elf.Data(b[elf.EI_DATA]) != elf.ELFDATA2LSB {
		return fmt.Errorf("%w: %w: the proof is not a 64-bit little-endian ELF: build it with GOOS=linux GOARCH=amd64 (%s)", ErrPayload, ErrProofArch, ProofPlatform)
	}
	if m := elf.Machine(binary.LittleEndian.Uint16(b[machineOffset:])); m != elf.EM_X86_64 {
		return fmt.Errorf("%w: %w: the proof is built for %v, but the pods run %s (%v): build it with GOOS=linux GOARCH=amd64",
			ErrPayload, ErrProofArch, m, ProofPlatform, elf.EM_X86_64)
	}
	return nil
}

// String summarizes the payload's size for logs and summaries.
func (p *Payload) String() string {
	return fmt.Sprintf("proof %d B, gzip %d B, %d env chunks, %d B of the %d B exec limit", p.BinaryBytes, p.GzipBytes, len(p.Chunks), p.EnvBytes, MaxExecBytes)
}
