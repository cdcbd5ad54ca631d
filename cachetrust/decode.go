package cachetrust

import (
	"errors"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

// decodeStrict decodes YAML (or JSON) into v by strictyaml's rule: a key v
// does not have is an error, never a setting silently left out, and a file
// holds one document (a second '---' document is an error). An empty
// document leaves v as it was: every loader here has defaults to keep. The
// key spec (LoadKeySpec) and the workflow checker's rules and cache catalog
// all read through it.
func decodeStrict(data []byte, v any) error {
	if err := strictyaml.Decode(data, v); err != nil && !errors.Is(err, strictyaml.ErrEmpty) {
		return err
	}
	return nil
}
