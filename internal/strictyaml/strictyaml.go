// Package strictyaml is the one decoder of gpugate's configuration files
// (a policy, a RunPod configuration, a fleet file, cache rules, a tier
// table, a failure model): YAML, or JSON, which is YAML.
//
// The rule, the same for every file: keys the destination does not have
// are errors (a misspelt key is never a setting silently left out), a file
// holds one document (a second '---' document is an error, never ignored),
// and an empty file (nothing but whitespace and comments) is ErrEmpty,
// which a caller with defaults to fall back on may accept and any other
// refuses with its own message.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"go.yaml.in/yaml/v3"
)

// ErrEmpty means the input holds no YAML document.
var ErrEmpty = errors.New("the file is empty")

// ErrSecondDocument means the input holds more than one YAML document.
var ErrSecondDocument = errors.New("a configuration file holds one YAML document; remove the extra '---' document")

// DocumentError is a second document, with the line it starts on.
type DocumentError struct{ Line int }

func (e *DocumentError) Error() string {
	return fmt.Sprintf("line %d: %v", e.Line, ErrSecondDocument)
}

// Unwrap makes errors.Is(err, ErrSecondDocument) hold.
func (e *DocumentError) Unwrap() error { return ErrSecondDocument }

// Decode decodes the one document in data into v by the package's rule.
// A YAML error is the decoder's own (*yaml.TypeError, or one naming its
// line); an empty input is ErrEmpty and leaves v as it was.
func Decode(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return ErrEmpty
		}
		return err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return err
		}
		return &DocumentError{Line: extra.Line}
	}
	return nil
}
