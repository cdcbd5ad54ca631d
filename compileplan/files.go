package compileplan

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The files a workflow's steps hand each other: a units file, sha256sum
// listings, chain state files and checkpoint tars, each read and written
// as the partition command's subcommands do.

// ErrUnits is matched by ReadUnits' refusals.
var ErrUnits = errors.New("compileplan: invalid units file")

// unitJSON is a unit as a units file has it: its cost as a duration.
type unitJSON struct {
	Name    string   `json:"name"`
	Cost    string   `json:"cost"`
	Objects []string `json:"objects"`
}

// ReadUnits reads a units file: a JSON array of compile units, each
// {"name": "csrc/gemv.cu", "cost": "40m", "objects": ["build/gemv.o"]},
// its cost as time.ParseDuration reads it. A file that lists no unit is
// refused: there is nothing to shard.
func ReadUnits(path string) ([]Unit, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("compileplan: %w", err)
	}
	var raw []unitJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnits, path, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: %s lists no compile units: there is nothing to shard", ErrUnits, path)
	}
	units := make([]Unit, 0, len(raw))
	for _, u := range raw {
		d, err := time.ParseDuration(u.Cost)
		if err != nil {
			return nil, fmt.Errorf("%w: unit %s: cost %q: %w", ErrUnits, u.Name, u.Cost, err)
		}
		units = append(units, Unit{Name: u.Name, Cost: d, Objects: u.Objects})
	}
	return units, nil
}

// MatrixCell is one compile job of a sharded build's matrix: its shard's
// index, units and the objects it must produce (its manifest).
type MatrixCell struct {
	Index    int      `json:"index"`
	Units    []string `json:"units"`
	Manifest []string `json:"manifest"`
}

// Matrix is the compile jobs' matrix for shards: a shard with nothing to
// compile gets no job.
func Matrix(shards []Shard) []MatrixCell {
	var out []MatrixCell
	for _, s := range shards {
		if len(s.Units) > 0 {
			out = append(out, MatrixCell{s.Index, s.Units, s.Manifest})
		}
	}
	return out
}

// ReadSHA256Sums reads a sha256sum listing file (ParseSHA256Sums); its
// errors name the file.
func ReadSHA256Sums(path string) ([]Object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("compileplan: %w", err)
	}
	defer f.Close()
	return parseSums(f, path+": ")
}

// VerifyObjectFiles is VerifyObjects over sha256sum listing files: present
// lists the link step's build tree, manifests each shard's objects. It
// returns how many objects the manifests list.
func VerifyObjectFiles(present string, manifests ...string) (int, error) {
	have, err := ReadSHA256Sums(present)
	if err != nil {
		return 0, err
	}
	objs := make([][]Object, 0, len(manifests))
	total := 0
	for _, m := range manifests {
		o, err := ReadSHA256Sums(m)
		if err != nil {
			return 0, err
		}
		objs = append(objs, o)
		total += len(o)
	}
	return total, VerifyObjects(objs, have)
}

// ErrCellName is matched by CheckCells' refusals.
var ErrCellName = errors.New("compileplan: a cell name an artifact name cannot carry")

// CheckCells refuses a chain's cells unless each can be part of an
// artifact name (chain-state-<cell>-<link>, chain-ckpt-<cell>-<link>:
// upload-artifact refuses " : < > | * ? \ / and line breaks, and a name
// with spaces around it or none) and none is listed twice.
func CheckCells(cells ...string) error {
	seen := map[string]bool{}
	for _, c := range cells {
		switch {
		case strings.TrimSpace(c) != c || c == "" || strings.ContainsAny(c, "\":<>|*?\\/\r\n\t"):
			return fmt.Errorf("%w: %q", ErrCellName, c)
		case seen[c]:
			return fmt.Errorf("%w: %q is listed twice", ErrCellName, c)
		}
		seen[c] = true
	}
	return nil
}

// ErrCellList is matched by ParseCells' refusal, a *CellListError.
var ErrCellList = errors.New("compileplan: malformed cell list")

// CellListError is a cell list that opens a JSON array but is not an
// array of names.
type CellListError struct {
	List string // the list, without the spaces around it
	Err  error  // why encoding/json refused it
}

// Error quotes the list and says why it is not an array of names.
func (e *CellListError) Error() string {
	return fmt.Sprintf("compileplan: cell list %q is not a JSON array of names: %v", e.List, e.Err)
}

// Unwrap returns encoding/json's error.
func (e *CellListError) Unwrap() error { return e.Err }

// Is matches ErrCellList.
func (e *CellListError) Is(target error) bool { return target == ErrCellList }

// ParseCells reads a chain's cells as a workflow passes them: a JSON
// array of names (["a","b"], as a matrix has it) or a comma-separated
// list (a,b), ignoring the spaces around the whole list. An empty list
// is no cell. It reads the names as given, spaces around one included:
// CheckCells judges them.
func ParseCells(list string) ([]string, error) {
	list = strings.TrimSpace(list)
	switch {
	case strings.HasPrefix(list, "["):
		var cells []string
		if err := json.Unmarshal([]byte(list), &cells); err != nil {
			return nil, &CellListError{List: list, Err: err}
		}
		return cells, nil
	case list == "":
		return nil, nil
	}
	return strings.Split(list, ","), nil
}

// RecordCell applies one cell's update to the chain state file at path
// (MergeChainState: only that cell changes, its link never goes back, a
// done cell stays done), creating the file when it is missing (in a
// directory that must exist), and returns the new state.
func RecordCell(path, cell string, update CellState) (ChainState, error) {
	state := ChainState{}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if state, err = decodeChainState(data); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrChainState, path, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("compileplan: %w", err)
	}
	state, err = MergeChainState(state, cell, update)
	if err != nil {
		return nil, err
	}
	out, _ := json.MarshalIndent(state, "", "  ") // a map of plain structs: it cannot fail
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("compileplan: %w", err)
	}
	return state, nil
}

// ReadChainStates folds (CombineChainStates) every chain state file named,
// and every *.json file under a directory named, and says how many files
// it read. A path that does not exist holds no state: the first link of a
// chain has none to download.
func ReadChainStates(paths ...string) (ChainState, int, error) {
	var states []ChainState
	read := func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("compileplan: %w", err)
		}
		s, err := decodeChainState(data)
		if err != nil {
			return fmt.Errorf("%w: %s is not a chain state file (partition chain-state writes them): %w", ErrChainState, path, err)
		}
		states = append(states, s)
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("compileplan: %w", err)
		case !fi.IsDir():
			if err := read(p); err != nil {
				return nil, 0, err
			}
			continue
		}
		err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
				return err
			}
			return read(path)
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return CombineChainStates(states...), len(states), nil
}

// ErrInsideTree is matched when WriteCheckpointFile is asked to write the
// checkpoint inside the tree it holds.
var ErrInsideTree = errors.New("compileplan: the checkpoint file is inside its tree: the checkpoint would contain itself")

// checkpointBuffer is the buffer around a checkpoint file.
const checkpointBuffer = 1 << 20

// WriteCheckpointFile writes the tree at dir to the checkpoint file
// (WriteCheckpoint). A file inside dir is refused (ErrInsideTree) before
// anything is written, and a checkpoint that fails is removed: never half
// a checkpoint left to be uploaded.
func WriteCheckpointFile(file, dir string) (CheckpointStats, error) {
	absDir, err1 := filepath.Abs(dir)
	absFile, err2 := filepath.Abs(file)
	if err := errors.Join(err1, err2); err != nil {
		return CheckpointStats{}, fmt.Errorf("compileplan: %w", err)
	}
	if rel, err := filepath.Rel(absDir, absFile); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return CheckpointStats{}, fmt.Errorf("%w: %s is inside %s", ErrInsideTree, file, dir)
	}
	f, err := os.Create(file)
	if err != nil {
		return CheckpointStats{}, fmt.Errorf("compileplan: %w", err)
	}
	w := bufio.NewWriterSize(f, checkpointBuffer)
	st, err := WriteCheckpoint(w, dir)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return st, err
	}
	return st, nil
}

// RestoreCheckpointFile restores the checkpoint file into dir
// (RestoreCheckpoint), making dir first when it is missing: a later link
// restores on a fresh runner, where nothing was checked out.
func RestoreCheckpointFile(file, dir string) (CheckpointStats, error) {
	f, err := os.Open(file)
	if err != nil {
		return CheckpointStats{}, fmt.Errorf("compileplan: %w", err)
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return CheckpointStats{}, fmt.Errorf("compileplan: %w", err)
	}
	return RestoreCheckpoint(bufio.NewReaderSize(f, checkpointBuffer), dir)
}

// String says what a checkpoint holds, its newest modification time to
// the nanosecond: "1 file(s), 1 dir(s), 0 symlink(s), 6 B; newest
// 2026-08-14T09:30:00.123456789Z".
func (s CheckpointStats) String() string {
	return fmt.Sprintf("%d file(s), %d dir(s), %d symlink(s), %d B; newest %s", s.Files, s.Dirs, s.Symlinks, s.Bytes, s.Newest.Format(time.RFC3339Nano))
}
