package tiers

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpugate/gpugate/smoke"
)

// Package is one entry of a Debian repository's Packages index: the fields
// pinning needs.
type Package struct {
	Name         string // Package
	Version      string
	Architecture string
	Filename     string // the .deb's path in the repository, e.g. ./cuda-nvrtc-12-8_12.8.93-1_amd64.deb
	SHA256       string // the .deb's SHA-256
}

var (
	// ErrIndex is matched by ParsePackages errors.
	ErrIndex = errors.New("tiers: malformed Packages index")
	// ErrPin is matched by Pin's refusals.
	ErrPin = errors.New("tiers: cannot pin the tier table")
)

// maxIndexLine bounds one line of a Packages index (descriptions are the
// longest; NVIDIA's are far shorter).
const maxIndexLine = 1 << 20

// ParsePackages reads a Debian Packages index (deb822 stanzas separated by
// blank lines; continuation lines start with a space or tab; field names
// are case-insensitive), as NVIDIA's CUDA repositories publish it at
// <repo>/Packages. Every stanza needs Package and Version; a SHA256 field
// must be 64 hex digits. Errors name the line.
func ParsePackages(r io.Reader) ([]Package, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxIndexLine)
	var (
		out   []Package
		cur   Package
		start int  // the current stanza's first line; 0 between stanzas
		field bool // a field line was seen in this stanza
	)
	end := func() error {
		if start == 0 {
			return nil
		}
		if cur.Name == "" || cur.Version == "" {
			return fmt.Errorf("%w: the stanza at line %d has no Package or no Version field", ErrIndex, start)
		}
		out = append(out, cur)
		cur, start, field = Package{}, 0, false
		return nil
	}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		switch {
		case len(bytes.TrimSpace(line)) == 0:
			if err := end(); err != nil {
				return nil, err
			}
			continue
		case line[0] == ' ' || line[0] == '\t':
			if !field {
				return nil, fmt.Errorf("%w: line %d continues a field, but no field precedes it", ErrIndex, n)
			}
			continue
		}
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(key) == 0 || bytes.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("%w: line %d is not a \"Field: value\" line", ErrIndex, n)
		}
		if start == 0 {
			start = n
		}
		field = true
		// Only the fields pinning needs become strings.
		var dst *string
		for _, f := range []struct {
			name string
			dst  *string
		}{{"Package", &cur.Name}, {"Version", &cur.Version}, {"Architecture", &cur.Architecture}, {"Filename", &cur.Filename}, {"SHA256", &cur.SHA256}} {
			if bytes.EqualFold(key, []byte(f.name)) {
				dst = f.dst
				break
			}
		}
		if dst == nil {
			continue
		}
		*dst = string(bytes.TrimSpace(value))
		if dst == &cur.SHA256 {
			if cur.SHA256 = strings.ToLower(cur.SHA256); !smoke.IsSHA256(cur.SHA256) {
				return nil, fmt.Errorf("%w: line %d: SHA256 %q is not 64 hex digits", ErrIndex, n, cur.SHA256)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIndex, err)
	}
	if err := end(); err != nil {
		return nil, err
	}
	return out, nil
}

// Pinned is what Pin did to one tier.
type Pinned struct {
	Tier, Package, Version, SHA256 string
	Already                        bool // the table already held this checksum
}

// Pin fills each tier's sha256 in a YAML tier table from a Packages index
// of the repository its url points into, and returns the table with only
// those values changed (comments and layout kept). For each tier the index
// must hold its package at its version, with the file its url names. A
// checksum already in the table must agree with the index: a pin never
// changes silently (clear it to re-pin). The result loads with Load and
// passes RequirePinned.
//
// The checksum is only as trustworthy as the index: fetch it over HTTPS
// from the repository (and check it against the signed InRelease where you
// can), and review the diff before committing it.
func Pin(table []byte, index []Package) ([]byte, []Pinned, error) {
	cfg, err := Load(table)
	if err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(table, &doc); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrPin, err) // Load accepted it: unreachable in practice
	}
	nodes := tierNodes(&doc)
	if len(nodes) != len(cfg.Tiers) {
		return nil, nil, fmt.Errorf("%w: write tiers as a YAML sequence of mappings", ErrPin)
	}
	var done []Pinned
	for i, t := range cfg.Tiers {
		p, err := lookup(index, t.Name, t.Package, t.Version, t.URL)
		if err != nil {
			return nil, nil, err
		}
		if t.SHA256 != "" && !strings.EqualFold(t.SHA256, p.SHA256) {
			return nil, nil, fmt.Errorf("%w: tier %s is pinned to %s but the index gives %s %s the checksum %s: a pin never changes silently; find out why, then clear it to re-pin", ErrPin, t.Name, t.SHA256, t.Package, t.Version, p.SHA256)
		}
		setSHA256(nodes[i], p.SHA256)
		done = append(done, Pinned{Tier: t.Name, Package: t.Package, Version: t.Version, SHA256: p.SHA256, Already: t.SHA256 != ""})
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := errors.Join(enc.Encode(&doc), enc.Close()); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrPin, err)
	}
	pinned, err := Load(b.Bytes())
	if err == nil {
		err = pinned.RequirePinned()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: the pinned table does not load: %w", ErrPin, err)
	}
	return b.Bytes(), done, nil
}

// lookup finds the one index entry for a tier.
func lookup(index []Package, tier, name, version, url string) (Package, error) {
	var found []Package
	for _, p := range index {
		if p.Name == name && p.Version == version {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return Package{}, fmt.Errorf("%w: tier %s: the index has no %s at version %s: is it the index of the repository the tier's url points into?", ErrPin, tier, name, version)
	}
	file := path.Base(url)
	var match []Package
	for _, p := range found {
		if path.Base(p.Filename) == file {
			match = append(match, p)
		}
	}
	switch {
	case len(match) == 0:
		return Package{}, fmt.Errorf("%w: tier %s: its url names %s, but the index's %s %s is %s: correct the url", ErrPin, tier, file, name, version, found[0].Filename)
	case len(match) > 1:
		return Package{}, fmt.Errorf("%w: tier %s: the index lists %s %s as %s %d times", ErrPin, tier, name, version, file, len(match))
	case match[0].SHA256 == "":
		return Package{}, fmt.Errorf("%w: tier %s: the index gives no SHA256 for %s %s", ErrPin, tier, name, version)
	}
	return match[0], nil
}

// tierNodes returns the mapping node of each tier, in order.
func tierNodes(doc *yaml.Node) []*yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "tiers" || root.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		var out []*yaml.Node
		for _, n := range root.Content[i+1].Content {
			if n.Kind != yaml.MappingNode {
				return nil
			}
			out = append(out, n)
		}
		return out
	}
	return nil
}

// setSHA256 sets, or adds, a tier mapping's sha256 value.
func setSHA256(tier *yaml.Node, sum string) {
	for i := 0; i+1 < len(tier.Content); i += 2 {
		if tier.Content[i].Value == "sha256" {
			v := tier.Content[i+1]
			v.Kind, v.Tag, v.Value = yaml.ScalarNode, "!!str", sum
			if v.Style != yaml.SingleQuotedStyle {
				v.Style = yaml.DoubleQuotedStyle
			}
			return
		}
	}
	tier.Content = append(tier.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "sha256"},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: sum, Style: yaml.DoubleQuotedStyle})
}
