package smoke

import (
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
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
	DriverVersion string // the query's driver_version
	MemoryMiB     int    // memory.total; 0 when MemoryUnreported
	// MemoryUnreported says nvidia-smi printed no memory.total ([N/A]),
	// as it does for a unified-memory device (DGX Spark's GB10), whose
	// memory is the host's. Run then holds the device to the VRAM floor
	// by what the driver reports (CUDA.DeviceTotalMem).
	MemoryUnreported bool
	ComputeCap       Version // e.g. 8.9 for sm_89
}

// SMI is what nvidia-smi reports.
type SMI struct {
	GPUs []GPU
	// CUDAVersion is the highest CUDA API version the driver supports:
	// the banner's "CUDA Version" before the R610 drivers, "CUDA UMD
	// Version" from R610 on.
	CUDAVersion Version
	// KMDVersion is the kernel-mode driver's version as the banner prints
	// it ("Driver Version", from R610 "KMD Version"); "" where the banner
	// has neither. Each GPU's DriverVersion, from the query, is the one
	// the proof reports.
	KMDVersion string
}

// ErrSMI is matched by ParseNvidiaSMI errors.
var ErrSMI = errors.New("smoke: unreadable nvidia-smi output")

// QueryArgs are the nvidia-smi arguments whose output ParseNvidiaSMI reads
// as query. The driver's CUDA version is no query field (nvidia-smi
// prints it only in its banner and -q); every other value the proof uses
// comes from here. driver_version is still answered by the R610 drivers,
// which add kmd_version and mark driver_version deprecated.
var QueryArgs = []string{"--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader,nounits"}

// The banner's labels. Before the R610 drivers nvidia-smi prints "Driver
// Version: 580.159.04     CUDA Version: 13.0"; from R610 on, "KMD
// Version: 610.57.04     CUDA UMD Version: 13.3".
const (
	labelCUDA    = "CUDA Version:"
	labelCUDAUMD = "CUDA UMD Version:"
	labelDriver  = "Driver Version:"
	labelKMD     = "KMD Version:"
)

// BannerLineMax bounds the banner text a BannerError quotes.
const BannerLineMax = 100

// BannerError is a banner the proof could not read. It says what the
// proof saw rather than guessing why.
type BannerError struct {
	// Label is the label whose value is not a CUDA version; "" when the
	// banner has no CUDA version label at all.
	Label string
	// Value is what follows Label (at most BannerLineMax bytes).
	Value string
	// Line is the banner line that holds Label, or, without one, the
	// banner's first non-blank line; "" for an empty banner. At most
	// BannerLineMax bytes, cut at a character boundary and marked "…".
	Line string
}

// Error says what the banner lacks and quotes what it holds.
func (e *BannerError) Error() string {
	switch {
	case e.Label != "":
		return fmt.Sprintf("%v: the nvidia-smi banner's %s %q is not a CUDA version; the line reads %q", ErrSMI, strings.TrimSuffix(e.Label, ":"), e.Value, e.Line)
	case e.Line == "":
		return fmt.Sprintf("%v: the nvidia-smi banner is empty, without %q or %q", ErrSMI, labelCUDA, labelCUDAUMD)
	default:
		return fmt.Sprintf("%v: no %q or %q in the nvidia-smi banner; its first line reads %q", ErrSMI, labelCUDA, labelCUDAUMD, e.Line)
	}
}

// Unwrap makes a BannerError match ErrSMI.
func (e *BannerError) Unwrap() error { return ErrSMI }

// clip cuts s to BannerLineMax bytes at a character boundary.
func clip(s string) string {
	if len(s) <= BannerLineMax {
		return s
	}
	cut := BannerLineMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// labelValue finds label in the banner: the first occurrence followed by
// a non-empty value (white space skipped, the value ends at white space or
// the table's '|'), what the regular expression label\s*([^\s|]+) finds,
// and the line that holds the label.
func labelValue(banner, label string) (value, line string, ok bool) {
	from := 0
	for {
		i := strings.Index(banner[from:], label)
		if i < 0 {
			return "", "", false
		}
		at := from + i
		rest := strings.TrimLeft(banner[at+len(label):], " \t\r\n\f")
		end := strings.IndexAny(rest, " \t\r\n\f|")
		if end < 0 {
			end = len(rest)
		}
		if end > 0 {
			start := strings.LastIndexByte(banner[:at], '\n') + 1
			stop := strings.IndexByte(banner[at:], '\n')
			if stop < 0 {
				stop = len(banner) - at
			}
			return rest[:end], strings.TrimSpace(banner[start : at+stop]), true
		}
		from = at + len(label)
	}
}

// firstLine is the banner's first non-blank line.
func firstLine(banner string) string {
	for line := range strings.Lines(banner) {
		if l := strings.TrimSpace(line); l != "" {
			return l
		}
	}
	return ""
}

// Banner is what the proof reads from the plain nvidia-smi banner.
type Banner struct {
	CUDAVersion Version // "CUDA Version" or, from R610, "CUDA UMD Version"
	KMDVersion  string  // "Driver Version" or, from R610, "KMD Version"; "" if neither
}

// ParseBanner reads the plain `nvidia-smi` banner in either layout:
// "Driver Version: X  CUDA Version: Y" (before the R610 drivers) or "KMD
// Version: X  CUDA UMD Version: Y" (R610 on). A banner that carries both
// CUDA labels with different values gets the older one, so no NVRTC newer
// than either is chosen. An unreadable banner is a *BannerError.
func ParseBanner(banner []byte) (Banner, error) {
	s := string(banner)
	var b Banner
	found := false
	for _, label := range []string{labelCUDAUMD, labelCUDA} {
		value, line, ok := labelValue(s, label)
		if !ok {
			continue
		}
		v, err := ParseVersion(value)
		if err != nil {
			return Banner{}, &BannerError{Label: label, Value: clip(value), Line: clip(line)}
		}
		if !found || v.Less(b.CUDAVersion) {
			b.CUDAVersion = v
		}
		found = true
	}
	if !found {
		return Banner{}, &BannerError{Line: clip(firstLine(s))}
	}
	for _, label := range []string{labelKMD, labelDriver} {
		if value, _, ok := labelValue(s, label); ok {
			b.KMDVersion = clip(value)
			break
		}
	}
	return b, nil
}

// memoryUnreported are the memory.total values nvidia-smi prints for a
// device that reports no memory of its own (DGX Spark's GB10).
var memoryUnreported = []string{"[N/A]", "N/A"}

// parseMemory reads a memory.total field (MiB, nounits): a positive count,
// or unreported.
func parseMemory(field string) (mib int, unreported bool, err error) {
	field = strings.TrimSpace(field)
	for _, na := range memoryUnreported {
		if field == na {
			return 0, true, nil
		}
	}
	mib, err = strconv.Atoi(field)
	if err != nil || mib <= 0 {
		if strings.HasSuffix(field, "MiB") {
			return 0, false, fmt.Errorf("memory %q carries its unit: query with nounits (%s)", field, strings.Join(QueryArgs, " "))
		}
		return 0, false, fmt.Errorf("memory %q is neither a positive MiB count nor [N/A]", field)
	}
	return mib, false, nil
}

// ParseNvidiaSMI reads the output of `nvidia-smi` with QueryArgs (one CSV
// row per GPU: name, driver version, memory in MiB or [N/A], compute
// capability) and the plain `nvidia-smi` banner (ParseBanner), which
// carries the driver's CUDA version.
func ParseNvidiaSMI(query, banner []byte) (SMI, error) {
	var s SMI
	b, err := ParseBanner(banner)
	if err != nil {
		return SMI{}, err
	}
	s.CUDAVersion, s.KMDVersion = b.CUDAVersion, b.KMDVersion
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
		if g.MemoryMiB, g.MemoryUnreported, err = parseMemory(row[2]); err != nil {
			return SMI{}, fmt.Errorf("%w: GPU row %d %v", ErrSMI, i+1, err)
		}
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
