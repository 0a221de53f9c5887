package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportedBlocksAskFirst (review, Medium): cairn import made every shell
// block of a README runnable, an Uninstall block inside <details> included,
// and the exported script ran it in a normal run. Now the import marks it
// confirm=, says so, and the exported script asks before it runs.
func TestImportedBlocksAskFirst(t *testing.T) {
	dir := t.TempDir()
	safe, undo := filepath.Join(dir, "safe-ran"), filepath.Join(dir, "uninstall-ran")
	readme := filepath.Join(dir, "README.md")
	src := "# Widget\n\n## Check\n\n```sh\ntouch " + safe + "\n```\n\n<details>\n<summary>Uninstall</summary>\n\n```sh\ntouch " + undo + "\n```\n\n</details>\n"
	if err := os.WriteFile(readme, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "import", "--target", "local", "--write", readme)
	if code != exitOK || !strings.Contains(stderr, "2 executable blocks (1 ask for confirmation") || !strings.Contains(stderr, "inside <details>") {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	script := filepath.Join(dir, "widget.sh")
	if code, _, stderr := run(t, "export", readme, "-o", script); code != exitOK {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	runScript := func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", append([]string{script}, args...)...)
		c.Stdin = strings.NewReader(stdin)
		b, err := c.CombinedOutput()
		return string(b), err
	}
	out, err := runScript("")
	if err == nil || !strings.Contains(out, "needs confirmation") {
		t.Errorf("a normal run with no answer: %v\n%s", err, out)
	}
	if _, err := os.Stat(safe); err != nil {
		t.Errorf("the read-only block did not run: %v\n%s", err, out)
	}
	if _, err := os.Stat(undo); err == nil {
		t.Fatalf("the uninstall block ran without confirmation:\n%s", out)
	}
	out, err = runScript("n\n")
	if _, serr := os.Stat(undo); err == nil || serr == nil {
		t.Errorf("answered no: %v, ran=%v\n%s", err, serr == nil, out)
	}
	out, err = runScript("y\n")
	if _, serr := os.Stat(undo); err != nil || serr != nil {
		t.Errorf("answered yes: %v %v\n%s", err, serr, out)
	}
}

// TestImportWriteKeepsLinks (review, Low): import --write replaced a
// symlinked file with a regular one; it writes through the link, as
// write-back does.
func TestImportWriteKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.md")
	link := filepath.Join(dir, "link.md")
	if err := os.WriteFile(real, []byte("# Notes\n\n## Run it\n\n```sh\necho hi\n```\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.md", link); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := run(t, "import", "--target", "local", "--write", link); code != exitOK {
		t.Fatalf("import: %d %s", code, stderr)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v", err)
	}
	b, _ := os.ReadFile(real)
	fi, _ := os.Stat(real)
	if !strings.Contains(string(b), "target=local") || fi.Mode().Perm() != 0o640 {
		t.Errorf("the target was not rewritten in place (mode %v):\n%s", fi.Mode().Perm(), b)
	}
}
