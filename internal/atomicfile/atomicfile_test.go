package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteThroughSymlink: a linked file is replaced at its target and the
// link stays a link (cairn import --write replaced links with files).
func TestWriteThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.md")
	link := filepath.Join(dir, "link.md")
	if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.md", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link is no longer a link: %v %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(target)
	fi, _ := os.Stat(target)
	if string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("target %q mode %v, want new 0600", b, fi.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left behind: %v", ents)
	}
}
