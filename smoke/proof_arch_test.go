package smoke

// The proof is built for, and checked against, the pods' platform.

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// elfHeader is a minimal 64-bit little-endian ELF executable header for
// machine m, padded with a body.
func elfHeader(m elf.Machine, body int) []byte {
	var b bytes.Buffer
	h := elf.Header64{Type: uint16(elf.ET_EXEC), Machine: uint16(m), Version: uint32(elf.EV_CURRENT), Ehsize: 64}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.Write(&b, binary.LittleEndian, h)
	b.Write(make([]byte, body))
	return b.Bytes()
}

// The proof runs on the pod (linux/amd64), not on the runner that packs
// it. The release's smoke, and the one scripts/action.sh builds from
// source, are built for the runner's architecture, so on an ARM64 runner
// (ubuntu-24.04-arm, or the linux_arm64 archive install.sh takes there)
// an arm64 proof travels to every candidate, each fails "its CUDA proof"
// with exec format error, and every candidate is paid for and deleted.
// PackProof checks only the ELF magic; it must refuse a proof for another
// machine before anything is bought.
func TestPackProof_RefusesAProofBuiltForAnotherArchitectureThanThePods(t *testing.T) {
	if _, err := PackProof(elfHeader(elf.EM_AARCH64, 4096)); !errors.Is(err, ErrPayload) {
		t.Errorf("an arm64 proof: err %v, want ErrPayload naming linux/amd64", err)
	}
}

// The refusal is typed and says what to build; an x86-64 proof packs.
func TestPackProof_NamesThePodsPlatformAndPacksAnX86_64Proof(t *testing.T) {
	_, err := PackProof(elfHeader(elf.EM_AARCH64, 4096))
	if !errors.Is(err, ErrProofArch) || !strings.Contains(err.Error(), "GOARCH=amd64") || !strings.Contains(err.Error(), "EM_AARCH64") {
		t.Errorf("err %v: want ErrProofArch naming the proof's machine and GOARCH=amd64", err)
	}
	for _, short := range [][]byte{[]byte("\x7fELF"), elfHeader(elf.EM_X86_64, 0)[:19]} {
		if _, err := PackProof(short); !errors.Is(err, ErrProofArch) {
			t.Errorf("a %d-byte ELF: err %v, want ErrProofArch", len(short), err)
		}
	}
	b32 := elfHeader(elf.EM_X86_64, 64)
	b32[elf.EI_CLASS] = byte(elf.ELFCLASS32)
	if _, err := PackProof(b32); !errors.Is(err, ErrProofArch) {
		t.Errorf("a 32-bit ELF: err %v, want ErrProofArch", err)
	}
	if _, err := PackProof(elfHeader(elf.EM_X86_64, 4096)); err != nil {
		t.Errorf("an x86-64 proof: %v", err)
	}
}
