package partition

import (
	"bufio"
	"bytes"
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

// Merge combines partitions (the files of one archive set). A single
// partition is returned as it is, its entries not copied.
func Merge(ps ...Partition) Partition {
	if len(ps) == 1 {
		return ps[0]
	}
	n := 0
	for _, p := range ps {
		n += len(p.Entries)
	}
	out := Partition{Entries: make([]Entry, 0, n)}
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
	// Count a regular file's lines first (a fraction of parsing them), so
	// that the entries are allocated once, at their size: a million lines
	// are 88 MB of entries, and building them in pieces and joining them
	// costs as much memory again and its copying.
	lines := 0
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		n, err := countLines(f)
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			return Partition{}, fmt.Errorf("%w: %s: %v", ErrTSV, path, err)
		}
		lines = n
	}
	return parseTSVSized(f, path, lines)
}

// ParseTSVNamed is ParseTSV for a partition file read from r under name
// (a bundled or downloaded copy, say): errors and entries name it, as
// ParseTSVFile's name the path.
func ParseTSVNamed(r io.Reader, name string) (Partition, error) { return parseTSV(r, name) }

// ParseTSVFiles reads the partition files of one archive set (ParseTSVFile
// each), merges them and checks every entry's category against c
// (Validate). Naming no file is an error: an empty partition proves
// nothing.
func (c Config) ParseTSVFiles(paths ...string) (Partition, error) {
	if len(paths) == 0 {
		return Partition{}, fmt.Errorf("%w: name at least one partition file", ErrTSV)
	}
	ps := make([]Partition, 0, len(paths))
	for _, path := range paths {
		p, err := ParseTSVFile(path)
		if err != nil {
			return Partition{}, err
		}
		ps = append(ps, p)
	}
	p := Merge(ps...)
	return p, c.Validate(p)
}

// countLines counts the lines in r, the last one included when it has no
// newline.
func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 64<<10)
	n, last := 0, byte('\n')
	for {
		k, err := r.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			last = buf[k-1]
		}
		if err == io.EOF {
			if last != '\n' {
				n++
			}
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

func parseTSV(r io.Reader, file string) (Partition, error) { return parseTSVSized(r, file, 0) }

// parseTSVSized parses a partition file of about lines lines (0: unknown).
func parseTSVSized(r io.Reader, file string, lines int) (Partition, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	where := func(n int) string {
		if file == "" {
			return fmt.Sprintf("line %d", n)
		}
		return fmt.Sprintf("%s:%d", file, n)
	}
	var b tsvBuilder
	if lines > 0 {
		b.sized = make([]Entry, 0, lines)
	}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if t := bytes.TrimSpace(line); len(t) == 0 || t[0] == '#' {
			continue
		}
		if nf := bytes.Count(line, []byte{'\t'}) + 1; nf < 3 || nf > 4 {
			return Partition{}, fmt.Errorf("%w: %s: want binary-id<TAB>test-name<TAB>category[<TAB>note], got %d field(s)", ErrTSV, where(n), nf)
		}
		var tabs [3]int
		tabs[2] = len(line) // no note
		rest := 0
		for i := range tabs {
			t := bytes.IndexByte(line[rest:], '\t')
			if t < 0 {
				break
			}
			tabs[i], rest = rest+t, rest+t+1
		}
		from := 0
		for i, to := range tabs {
			if v := line[from:to]; len(bytes.TrimSpace(v)) != len(v) || len(v) == 0 {
				return Partition{}, fmt.Errorf("%w: %s: field %d is empty or has surrounding spaces", ErrTSV, where(n), i+1)
			}
			from = to + 1
		}
		b.add(line, tabs, Entry{File: file, Line: n})
	}
	if err := sc.Err(); err != nil {
		return Partition{}, fmt.Errorf("%w: %s: %v", ErrTSV, file, err)
	}
	return Partition{Entries: b.entries()}, nil
}

// tsvBuilder keeps the entries of a partition file: the lines' text is
// copied into strings of many lines each (one allocation, not one a
// line), which the entries' fields are slices of.
type tsvBuilder struct {
	text    []byte // the pending entries' lines
	pending []Entry
	spans   [][4]int // per pending entry: where its line starts in text, its tabs
	sized   []Entry  // the entries, when their number is known
	done    chunked[Entry]
}

const tsvTextChunk = 32 << 10

// add keeps the entry e whose line (its tabs at tabs; the last at the
// line's end when there is no note) is line.
func (b *tsvBuilder) add(line []byte, tabs [3]int, e Entry) {
	if len(b.text)+len(line) > tsvTextChunk {
		b.flush()
	}
	at := len(b.text)
	b.text = append(b.text, line...)
	b.pending = append(b.pending, e)
	b.spans = append(b.spans, [4]int{at, at + tabs[0], at + tabs[1], at + tabs[2]})
	if len(b.text) > tsvTextChunk {
		b.flush() // a line longer than a chunk has one to itself
	}
}

func (b *tsvBuilder) flush() {
	if len(b.pending) == 0 {
		return
	}
	text := string(b.text)
	for k, s := range b.spans {
		end := len(text)
		if k+1 < len(b.spans) {
			end = b.spans[k+1][0]
		}
		e := &b.pending[k]
		e.ID.Binary, e.ID.Name = text[s[0]:s[1]], text[s[1]+1:s[2]]
		e.Category = text[s[2]+1 : min(s[3], end)]
		if s[3] < end {
			e.Note = text[s[3]+1 : end]
		}
	}
	if b.sized != nil && len(b.sized)+len(b.pending) > cap(b.sized) {
		// The file grew since it was counted.
		b.done.add(b.sized...)
		b.sized = nil
	}
	if b.sized != nil {
		b.sized = append(b.sized, b.pending...)
	} else {
		b.done.add(b.pending...)
	}
	b.text, b.pending, b.spans = b.text[:0], b.pending[:0], b.spans[:0]
}

func (b *tsvBuilder) entries() []Entry {
	b.flush()
	if b.done.n == 0 && len(b.sized) > 0 {
		return b.sized
	}
	return b.done.flat()
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

// DefaultConfig is the default categories.
func DefaultConfig() Config {
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
