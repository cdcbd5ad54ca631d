package partition

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWritePeerListing writes the benchmark's 200,000-test nextest listing
// and its partition file for scripts/bench-peers.sh, which checks them with
// jq beside `partition check`. It runs only when GPUGATE_PEER_CORPUS names
// the directory to write.
func TestWritePeerListing(t *testing.T) {
	dir := os.Getenv("GPUGATE_PEER_CORPUS")
	if dir == "" {
		t.Skip("set GPUGATE_PEER_CORPUS to write the peer benchmark's listing (scripts/bench-peers.sh does)")
	}
	l := newBenchListing(t, "nextest", 200_000)
	for name, data := range map[string][]byte{"listing.json": l.listing, "partition.tsv": l.tsv} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
