package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

// TestContentSymlinkOutsideRefused (review, Medium): a symlinked .md in the
// content folder that points outside it published a private 0600 file in
// the page, search.json and the bundle, and the build exited 0. Content is
// what is inside the folder: build, check, export, the bundle and the
// daemon's loader refuse the link at file:1; links within the folder work.
func TestContentSymlinkOutsideRefused(t *testing.T) {
	const marker = "PRIVATE-KEY-MATERIAL-7f3c"
	private := filepath.Join(t.TempDir(), "id_notes.md")
	if err := os.WriteFile(private, []byte("---\ntitle: Leak\n---\n\n"+marker+"\n\n## Step {#s}\n\n```bash {#b target=local}\necho "+marker+"\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	outsideDir := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.MkdirAll(outsideDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outsideDir, "more.md"), []byte("---\ntitle: More\n---\n\n"+marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	content := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(content, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.md", "---\ntitle: Good\n---\n\n## Step {#s}\n\n```bash {#b target=local}\necho ok\n```\n")
	write("_shared.md", "---\ntitle: Shared\nslug: shared\n---\n\nwithin the folder\n")
	for link, target := range map[string]string{
		"leak.md":   private,
		"inside.md": "_shared.md", // a link within the folder is content
		"linked":    outsideDir,   // a linked folder is not walked
	} {
		if err := os.Symlink(target, filepath.Join(content, link)); err != nil {
			t.Fatal(err)
		}
	}
	leakLine := filepath.Join(content, "leak.md") + ":1: symlink to outside the content folder"

	code, stdout, stderr := run(t, "check", content)
	if code != exitFailure || !strings.Contains(stdout, leakLine) || strings.Contains(stdout+stderr, marker) {
		t.Errorf("check: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	out := filepath.Join(t.TempDir(), "public")
	code, stdout, stderr = run(t, "build", "--content", content, "--out", out)
	if code != exitFailure || !strings.Contains(stdout+stderr, leakLine) {
		t.Errorf("build: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	noMarker(t, out, marker)

	bundle := filepath.Join(t.TempDir(), "b.tar.gz")
	code, stdout, stderr = run(t, "export", "--bundle", bundle, "--content", content)
	if code == exitOK || !strings.Contains(stdout+stderr, leakLine) {
		t.Errorf("bundle: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if b, err := os.ReadFile(bundle); err == nil {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			all, _ := io.ReadAll(zr)
			if bytes.Contains(all, []byte(marker)) {
				t.Error("the bundle holds the private file")
			}
		}
	}
	code, stdout, stderr = run(t, "export", filepath.Join(content, "leak.md"))
	if code == exitOK || strings.Contains(stdout, marker) {
		t.Errorf("export of the link: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}

	// The daemon's and cairn run's loader.
	set, err := runbook.LoadDir(content)
	var slugs []string
	for _, rb := range set.Runbooks {
		slugs = append(slugs, rb.Slug)
	}
	if !strings.Contains(err.Error(), leakLine) || strings.Join(slugs, " ") != "good shared" {
		t.Errorf("LoadDir: runbooks %v, err %v", slugs, err)
	}

	// Without the link, the same folder builds, the inside link included.
	if err := os.Remove(filepath.Join(content, "leak.md")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run(t, "build", "--content", content, "--out", out)
	if code != exitOK || !strings.Contains(stderr, "built 2 runbooks") {
		t.Errorf("build without the link: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	noMarker(t, out, marker)
}

// noMarker fails t if any file below dir holds marker.
func noMarker(t *testing.T, dir, marker string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(marker)) {
			t.Errorf("%s holds the private file's text", p)
		}
		return nil
	})
}
