package podstartup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpugate/gpugate/runpod"
	"github.com/gpugate/gpugate/smoke"
)

func TestApply_PutsTheProofIntoEveryCandidatesTemplate(t *testing.T) {
	dir := t.TempDir()
	proof := filepath.Join(dir, "gpugate-smoke")
	os.WriteFile(proof, append([]byte("\x7fELF"), make([]byte, 1<<20)...), 0o755)
	tmpl := runpod.PodTemplate{Env: map[string]string{"KEEP": "1"}}
	st, err := Options{Proof: proof}.Apply(&tmpl, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"KEEP", smoke.EnvTiers, smoke.EnvProofSHA256, st.Payload.Chunks[0]} {
		if tmpl.Env[k] == "" {
			t.Errorf("the template lacks %s", k)
		}
	}
	if tmpl.Args.Reveal() != st.Command || !strings.HasPrefix(st.Command, "bash -c '") {
		t.Errorf("the template's startup command is %q", tmpl.Args.Reveal())
	}
	if printed := fmt.Sprint(tmpl.Args); strings.Contains(printed, "run.sh") {
		t.Errorf("the startup command must print redacted: %s", printed)
	}
}

func TestApply_ASimulationWithoutAProofUsesTheInImageVariant(t *testing.T) {
	var tmpl runpod.PodTemplate
	st, err := Options{}.Apply(&tmpl, false)
	if err != nil || st.Payload != nil || !strings.Contains(st.Command, "/usr/local/bin/gpugate-smoke") {
		t.Errorf("payload %v, err %v", st.Payload, err)
	}
}
