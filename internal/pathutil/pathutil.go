// Package pathutil holds path checks shared across gpugate's packages.
package pathutil

import (
	"path/filepath"
	"strings"
)

// Within says whether path lies inside (or is) dir; resolve links in both
// first where they matter.
func Within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
