//go:build !linux

package cachetrust

import "os"

func walkAndHashDir(root string, spec KeySpec) ([]string, []Record, error) {
	return walkAndHash(os.DirFS(root), spec)
}
