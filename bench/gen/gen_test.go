package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

// Every generated runbook must be valid, or the benchmark measures error
// paths instead of rendering.
func TestGeneratedRunbooksAreValid(t *testing.T) {
	dir := t.TempDir()
	paths, err := Generate(dir, Options{N: 40})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := runbook.Parse(p, src)
		if err != nil {
			t.Fatalf("%s does not parse:\n%v", filepath.Base(p), err)
		}
		if len(rb.Steps) != 11 { // ten steps and troubleshooting
			t.Errorf("%s: %d steps, want 11", filepath.Base(p), len(rb.Steps))
		}
		if n := strings.Count(string(src), "```yaml"); n == 0 {
			t.Errorf("%s: no yaml blocks", filepath.Base(p))
		}
	}
}

func TestDeterministic(t *testing.T) {
	for i := range 5 {
		a, b := Runbook(i, Options{}), Runbook(i, Options{N: 3})
		if !bytes.Equal(a, b) {
			t.Fatalf("runbook %d differs between runs", i)
		}
	}
	if bytes.Equal(Runbook(0, Options{}), Runbook(0, Options{Seed: 2})) {
		t.Fatal("the seed changes nothing")
	}
}
