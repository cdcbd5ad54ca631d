package smoke

import (
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a CUDA major.minor version.
type Version struct{ Major, Minor int }

// String formats the version as major.minor, e.g. "12.8".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || (v.Major == w.Major && v.Minor < w.Minor)
}

// ErrVersion is matched by ParseVersion errors.
var ErrVersion = errors.New("smoke: invalid CUDA version")

// ParseVersion reads "12.8" (or "12"), compared numerically so 12.10 is
// newer than 12.9.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimSpace(s)
	maj, min, hasMin := strings.Cut(s, ".")
	a, err := strconv.Atoi(maj)
	if err != nil || a < 0 || a > 1000 || strings.HasPrefix(maj, "+") {
		return Version{}, fmt.Errorf("%w: %q", ErrVersion, s)
	}
	b := 0
	if hasMin {
		if b, err = strconv.Atoi(min); err != nil || b < 0 || b > 1000 || strings.HasPrefix(min, "+") {
			return Version{}, fmt.Errorf("%w: %q", ErrVersion, s)
		}
	}
	return Version{a, b}, nil
}

// VersionFromInt converts cuDriverGetVersion's 1000*major + 10*minor.
func VersionFromInt(v int) Version { return Version{v / 1000, (v % 1000) / 10} }

// GPU is one row of nvidia-smi's query output.
type GPU struct {
	Index         int
	Name          string
	DriverVersion string
	MemoryMiB     int
	ComputeCap    Version // e.g. 8.9 for sm_89
}

// SMI is what nvidia-smi reports.
type SMI struct {
	GPUs        []GPU
	CUDAVersion Version // the highest CUDA API version the driver supports
}

// ErrSMI is matched by ParseNvidiaSMI errors.
var ErrSMI = errors.New("smoke: unreadable nvidia-smi output")

// QueryArgs are the nvidia-smi arguments whose output ParseNvidiaSMI reads
// as query.
var QueryArgs = []string{"--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader,nounits"}

// bannerCUDA finds "CUDA Version: X.Y" in the nvidia-smi banner: the first
// occurrence followed by a non-empty value (spaces skipped, the value ends
// at a space or the table's '|').
func bannerCUDA(banner []byte) (string, bool) {
	const label = "CUDA Version:"
	s := string(banner)
	for {
		i := strings.Index(s, label)
		if i < 0 {
			return "", false
		}
		s = strings.TrimLeft(s[i+len(label):], " \t\r\n\f")
		end := strings.IndexAny(s, " \t\r\n\f|")
		if end < 0 {
			end = len(s)
		}
		if end > 0 {
			return s[:end], true
		}
	}
}

// ParseNvidiaSMI reads the output of `nvidia-smi` with QueryArgs (one CSV
// row per GPU: name, driver version, memory in MiB, compute capability) and
// the plain `nvidia-smi` banner, which carries "CUDA Version: X.Y".
func ParseNvidiaSMI(query, banner []byte) (SMI, error) {
	var s SMI
	m, ok := bannerCUDA(banner)
	if !ok {
		return SMI{}, fmt.Errorf("%w: no \"CUDA Version\" in the nvidia-smi banner: is the NVIDIA driver visible in this container (NVIDIA_DRIVER_CAPABILITIES=compute,utility)?", ErrSMI)
	}
	v, err := ParseVersion(m)
	if err != nil {
		return SMI{}, fmt.Errorf("%w: CUDA Version %q: %v", ErrSMI, m, err)
	}
	s.CUDAVersion = v
	r := csv.NewReader(strings.NewReader(strings.TrimSpace(string(query))))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		return SMI{}, fmt.Errorf("%w: %v", ErrSMI, err)
	}
	for i, row := range rows {
		if len(row) != 4 {
			return SMI{}, fmt.Errorf("%w: GPU row %d has %d fields, want 4 (name, driver_version, memory.total, compute_cap): run nvidia-smi %s", ErrSMI, i+1, len(row), strings.Join(QueryArgs, " "))
		}
		g := GPU{Index: i, Name: strings.TrimSpace(row[0]), DriverVersion: strings.TrimSpace(row[1])}
		if g.Name == "" || g.DriverVersion == "" {
			return SMI{}, fmt.Errorf("%w: GPU row %d lacks a name or driver version", ErrSMI, i+1)
		}
		mem, err := strconv.Atoi(strings.TrimSpace(row[2]))
		if err != nil || mem <= 0 {
			return SMI{}, fmt.Errorf("%w: GPU row %d memory %q is not a positive MiB count (use nounits)", ErrSMI, i+1, row[2])
		}
		g.MemoryMiB = mem
		if g.ComputeCap, err = ParseVersion(row[3]); err != nil || g.ComputeCap.Major == 0 {
			return SMI{}, fmt.Errorf("%w: GPU row %d compute capability %q", ErrSMI, i+1, row[3])
		}
		s.GPUs = append(s.GPUs, g)
	}
	if len(s.GPUs) == 0 {
		return SMI{}, fmt.Errorf("%w: nvidia-smi lists no GPU", ErrSMI)
	}
	return s, nil
}
