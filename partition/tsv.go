package partition

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Entry is one partition line.
type Entry struct {
	ID       TestID `json:"id"`
	Category string `json:"category"`
	Note     string `json:"note,omitempty"`
	File     string `json:"file,omitempty"` // where it was read from
	Line     int    `json:"line,omitempty"`
}

// TSV renders the entry as its partition line.
func (e Entry) TSV() string {
	s := e.ID.Binary + "\t" + e.ID.Name + "\t" + e.Category
	if e.Note != "" {
		s += "\t" + e.Note
	}
	return s
}

// where is file:line, or "line N" for a partition read from a stream.
func (e Entry) where() string {
	if e.File == "" {
		return fmt.Sprintf("line %d", e.Line)
	}
	return fmt.Sprintf("%s:%d", e.File, e.Line)
}

// Partition is the entries of one archive set's partition files.
type Partition struct {
	Entries []Entry
}

// Merge combines partitions (the files of one archive set).
func Merge(ps ...Partition) Partition {
	var out Partition
	for _, p := range ps {
		out.Entries = append(out.Entries, p.Entries...)
	}
	return out
}

// ErrTSV is matched by partition file parse errors.
var ErrTSV = errors.New("partition: invalid partition file")

// ParseTSV reads a partition file: binary-id<TAB>test-name<TAB>category
// [<TAB>note] per line, # comments and blank lines ignored.
func ParseTSV(r io.Reader) (Partition, error) { return parseTSV(r, "") }

// ParseTSVFile reads a partition file; errors name the file and line.
func ParseTSVFile(path string) (Partition, error) {
	f, err := os.Open(path)
	if err != nil {
		return Partition{}, fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	return parseTSV(f, path)
}

func parseTSV(r io.Reader, file string) (Partition, error) {
	var p Partition
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	where := func(n int) string {
		if file == "" {
			return fmt.Sprintf("line %d", n)
		}
		return fmt.Sprintf("%s:%d", file, n)
	}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 3 || len(f) > 4 {
			return Partition{}, fmt.Errorf("%w: %s: want binary-id<TAB>test-name<TAB>category[<TAB>note], got %d field(s)", ErrTSV, where(n), len(f))
		}
		for i, v := range f[:3] {
			if strings.TrimSpace(v) == "" || v != strings.TrimSpace(v) {
				return Partition{}, fmt.Errorf("%w: %s: field %d is empty or has surrounding spaces", ErrTSV, where(n), i+1)
			}
		}
		e := Entry{ID: TestID{f[0], f[1]}, Category: f[2], File: file, Line: n}
		if len(f) == 4 {
			e.Note = f[3]
		}
		p.Entries = append(p.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return Partition{}, fmt.Errorf("%w: %s: %v", ErrTSV, file, err)
	}
	return p, nil
}

// Kind says what a category does with its tests.
type Kind string

// Category kinds.
const (
	KindRun      Kind = "run"      // executed in a lane
	KindNotRun   Kind = "not-run"  // reported NOT RUN (e.g. needs two devices)
	KindExcluded Kind = "excluded" // runs elsewhere or never (trybuild, benchmarks, external tools)
)

// Category is one configured category.
type Category struct {
	Name        string `yaml:"name"`
	Kind        Kind   `yaml:"kind"`
	Description string `yaml:"description"`
}

// Config lists the categories a partition may use.
type Config struct {
	Categories []Category `yaml:"categories"`
}

// SeedConfig is the seed's categories.
func SeedConfig() Config {
	return Config{Categories: []Category{
		{"host", KindRun, "device-independent: runs on the hosted runner"},
		{"single-gpu", KindRun, "needs one GPU: runs on the paid pod"},
		{"two-device", KindNotRun, "needs two GPUs: reported NOT RUN in the single-GPU lane"},
		{"trybuild", KindExcluded, "compile-fail checks: ordinary hosted CI"},
		{"benchmark", KindExcluded, "the dedicated A100 benchmark, outside correctness CI"},
		{"external-tool", KindExcluded, "needs a tool this workflow does not install"},
	}}
}

// Validate checks that every entry uses a configured category.
func (c Config) Validate(p Partition) error {
	for _, e := range p.Entries {
		if !slices.ContainsFunc(c.Categories, func(cat Category) bool { return cat.Name == e.Category }) {
			names := make([]string, len(c.Categories))
			for i, cat := range c.Categories {
				names[i] = cat.Name
			}
			return fmt.Errorf("%w: %s: unknown category %q (configured: %s)", ErrTSV, e.where(), e.Category, strings.Join(names, ", "))
		}
	}
	return nil
}

// ErrCategory is returned by Config.Lane for a category the configuration
// does not define, and for an empty lane when one was required.
var ErrCategory = errors.New("partition: no lane to run")

// Lane selects category's lane like Select, but refuses a category the
// configuration does not define: a misspelt lane would select nothing, and
// a filter that selects nothing runs nothing and can pass. With
// requireTests it also refuses an empty lane, for callers about to pay
// for running it.
func (c Config) Lane(p Partition, category string, requireTests bool) (Lane, error) {
	if c.Kind(category) == "" {
		names := make([]string, len(c.Categories))
		for i, cat := range c.Categories {
			names[i] = cat.Name
		}
		return Lane{}, fmt.Errorf("%w: category %q is not configured (%s): a misspelt lane would select nothing and pass", ErrCategory, category, strings.Join(names, ", "))
	}
	l := Select(p, category)
	if requireTests && len(l.Tests) == 0 {
		return l, fmt.Errorf("%w: the %s lane selects no test: nothing would run; classify tests into it, or do not require tests where an empty lane is expected", ErrCategory, category)
	}
	return l, nil
}

// Kind returns a category's kind ("" when unknown).
func (c Config) Kind(name string) Kind {
	for _, cat := range c.Categories {
		if cat.Name == name {
			return cat.Kind
		}
	}
	return ""
}
