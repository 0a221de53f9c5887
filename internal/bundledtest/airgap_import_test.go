package bundledtest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/bundledtest"
)

// TestKubeadmImportChecksBundleLayout: pointed at an offline bundle's
// images/ (an OCI layout), the kubeadm runbook's import blocks check every
// blob against its digest before ctr sees any of it: a corrupt blob stops
// the block and names the file; a whole layout goes to ctr in one import.
// (ctr, crictl and kubeadm are stand-ins here; the node tests import a real
// bundle's layout into real containerd.)
func TestKubeadmImportChecksBundleLayout(t *testing.T) {
	rb := bundledtest.Parse(t, "kubeadm-ha.md")
	for _, id := range []string{"import-images-first-cp", "import-images-other-cp", "import-images-workers"} {
		b := rb.BlockByID(id)
		if b == nil {
			t.Fatalf("no block %s", id)
		}
		run := func(layout string) (string, bool, string) {
			dir := t.TempDir()
			calls := filepath.Join(dir, "calls")
			stubs := map[string]string{
				"ctr":     "#!/bin/sh\necho \"ctr $*\" >>" + calls + "\ncat >/dev/null\necho imported\n",
				"crictl":  "#!/bin/sh\nexit 0\n",
				"kubeadm": "#!/bin/sh\necho registry.k8s.io/pause:3.10.2\n",
			}
			for n, s := range stubs {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", b.Content)
			cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH"), "IMAGE_ARCHIVE_DIR=" + layout, "KUBEADM_VERSION=v1.37.2"}
			out, err := cmd.CombinedOutput()
			c, _ := os.ReadFile(calls)
			return string(out), err == nil, string(c)
		}
		layout := t.TempDir()
		blobs := filepath.Join(layout, "blobs", "sha256")
		os.MkdirAll(blobs, 0o755)
		var names []string
		for _, content := range []string{"config", "layer one", "manifest"} {
			sum := sha256.Sum256([]byte(content))
			name := hex.EncodeToString(sum[:])
			os.WriteFile(filepath.Join(blobs, name), []byte(content), 0o644)
			names = append(names, name)
		}
		os.WriteFile(filepath.Join(layout, "index.json"), []byte(`{"schemaVersion":2,"manifests":[]}`), 0o644)
		os.WriteFile(filepath.Join(layout, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)

		out, ok, calls := run(layout)
		if !ok || !strings.Contains(out, "all kubeadm images present") || strings.Count(calls, "ctr -n k8s.io images import --all-platforms -") != 1 {
			t.Errorf("%s, a whole layout: ok=%v, ctr calls %q\n%s", id, ok, calls, out)
		}
		// One blob's bytes changed in transit.
		os.WriteFile(filepath.Join(blobs, names[1]), []byte("layer 0ne"), 0o644)
		out, ok, calls = run(layout)
		if ok || !strings.Contains(out, "CORRUPT: "+filepath.Join(blobs, names[1])+" does not match its digest") || calls != "" {
			t.Errorf("%s, a corrupt blob: ok=%v, ctr calls %q\n%s", id, ok, calls, out)
		}
	}
}
