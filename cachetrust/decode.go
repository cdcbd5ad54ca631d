package cachetrust

import (
	"bytes"
	"io"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes YAML (or JSON) into v, refusing keys v does not
// have: a misspelt key is an error, never a setting silently left out. An
// empty document leaves v as it was. The key spec (LoadKeySpec) and the
// workflow checker's rules and cache catalog all read through it.
func decodeStrict(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && err != io.EOF {
		return err
	}
	return nil
}
