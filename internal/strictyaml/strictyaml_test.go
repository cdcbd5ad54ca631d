package strictyaml_test

import (
	"errors"
	"testing"

	"github.com/gpugate/gpugate/internal/strictyaml"
)

type config struct {
	Name  string `yaml:"name"`
	Count int    `yaml:"count"`
}

// One rule for every configuration file: unknown keys, a second document
// and an empty file are each refused by their own error.
func TestDecode_OneDocumentKnownKeysAndEmptyByOneRule(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want error
	}{
		"a known key":           {"name: a\ncount: 2\n", nil},
		"JSON":                  {`{"name": "a", "count": 2}`, nil},
		"an empty file":         {"", strictyaml.ErrEmpty},
		"only comments":         {"# nothing yet\n\n", strictyaml.ErrEmpty},
		"a second document":     {"name: a\n---\nname: b\n", strictyaml.ErrSecondDocument},
		"an empty second":       {"name: a\n---\n", strictyaml.ErrSecondDocument},
		"a misspelt key":        {"nmae: a\n", nil}, // checked below: a *yaml.TypeError
		"a second bad document": {"name: a\n---\n[\n", nil},
	} {
		t.Run(name, func(t *testing.T) {
			var c config
			err := strictyaml.Decode([]byte(tc.in), &c)
			switch name {
			case "a misspelt key", "a second bad document":
				if err == nil || errors.Is(err, strictyaml.ErrEmpty) || errors.Is(err, strictyaml.ErrSecondDocument) {
					t.Errorf("%q: %v, want the decoder's error", tc.in, err)
				}
			default:
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Errorf("%q: %v, want %v", tc.in, err, tc.want)
				}
			}
		})
	}
	var de *strictyaml.DocumentError
	if err := strictyaml.Decode([]byte("name: a\n\n---\nname: b\n"), &config{}); !errors.As(err, &de) || de.Line != 3 {
		t.Errorf("%v: want the line of its ---, 3", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("name: a\ncount: 2\n"))
	f.Add([]byte("name: a\n---\nname: b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c config
		_ = strictyaml.Decode(data, &c) // never panics
	})
}
