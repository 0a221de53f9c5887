package export_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }

const contentDir = "../content"

func loadContent(t *testing.T) []*runbook.Runbook {
	t.Helper()
	set, err := runbook.LoadDir(contentDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Runbooks) < 4 {
		t.Fatalf("want the 4 bundled runbooks, have %d", len(set.Runbooks))
	}
	return set.Runbooks
}

func scriptFor(t *testing.T, rb *runbook.Runbook) []byte {
	t.Helper()
	b, err := export.Script(rb, export.Options{Version: "test", Source: "content/" + filepath.Base(rb.Path)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeScript writes the script into dir and returns its path.
func writeScript(t *testing.T, dir, name string, script []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, script, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGolden compares the exported scripts of the bundled runbooks with
// testdata/SLUG.golden (go test ./export -update rewrites them).
func TestGolden(t *testing.T) {
	for _, rb := range loadContent(t) {
		t.Run(rb.Slug, func(t *testing.T) {
			got := scriptFor(t, rb)
			again := scriptFor(t, rb)
			if !bytes.Equal(got, again) {
				t.Fatal("two exports of the same runbook differ")
			}
			golden := filepath.Join("testdata", rb.Slug+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./export -update)", err)
			}
			if !bytes.Equal(got, want) {
				gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
				for i := 0; i < len(gl) && i < len(wl); i++ {
					if gl[i] != wl[i] {
						t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test ./export -update if the change is meant)", golden, i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("%s differs in length: %d vs %d lines", golden, len(gl), len(wl))
			}
		})
	}
}

// shellcheck returns the shellcheck binary, or skips (fails under CI=true).
func shellcheck(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("shellcheck")
	if err != nil {
		if testrig.InCI() {
			t.Fatal("shellcheck is required under CI=true (scripts/ci-deps.sh installs it)")
		}
		t.Skip("skipping: shellcheck not installed (apt-get install -y shellcheck, or scripts/ci-deps.sh)")
	}
	return p
}

func runShellcheck(t *testing.T, sc, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, sc, "--shell=bash", "--severity=style", path).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck %s: %v\n%s", filepath.Base(path), err, out)
	}
}

// TestShellcheck lints every exported script at every severity.
func TestShellcheck(t *testing.T) {
	sc := shellcheck(t)
	dir := t.TempDir()
	for _, rb := range loadContent(t) {
		t.Run(rb.Slug, func(t *testing.T) {
			t.Parallel()
			runShellcheck(t, sc, writeScript(t, dir, rb.Slug+".sh", scriptFor(t, rb)))
		})
	}
	t.Run("hostile", func(t *testing.T) {
		runShellcheck(t, sc, writeScript(t, dir, "hostile.sh", scriptFor(t, parse(t, hostileRunbook))))
	})
}

func parse(t *testing.T, src string) *runbook.Runbook {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "hostile.md")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse(p, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// runScript runs an exported script with bash in dir; it returns the exit
// code and the combined output.
func runScript(t *testing.T, dir, path string, env []string, stdin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{path}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish in time:\n%s", filepath.Base(path), args, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}
