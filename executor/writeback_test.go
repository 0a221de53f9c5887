package executor_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

func TestWriteBack(t *testing.T) {
	src := "---\ntitle: t\n---\n\nintro ```not a fence```\n\n## s {#s}\n\n```bash {#a target=local}\necho hi\n```\ntrailing text\n\n```bash {#b target=local}\necho b\n```"
	path := filepath.Join(t.TempDir(), "t.md")
	os.WriteFile(path, []byte(src), 0o640)
	parse := func() *runbook.Runbook {
		data, _ := os.ReadFile(path)
		rb, err := runbook.Parse(path, data)
		if err != nil {
			t.Fatalf("after write-back the file does not parse: %v\n%s", err, data)
		}
		return rb
	}
	rb := parse()
	rec := &executor.Record{ID: "1", Block: "a", Hash: rb.BlockByID("a").Hash, Status: executor.StatusVerified, Target: "local",
		Start: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Duration: 0.25, Hosts: []executor.HostRecord{{Exit: 0}},
		Output: "hi\n```\nwith a fence inside\n"}
	if _, err := executor.WriteBack(rb, rec); err != nil {
		t.Fatal(err)
	}
	rb = parse()
	out := rb.Blocks[1]
	if out.Role != runbook.RoleOutput || out.OutputOf != "a" || out.Content != rec.Output || out.Recorded["status"] != "verified" || out.Recorded["at"] != "2026-12-02T10:00:00Z" {
		t.Fatalf("recorded block = %+v", out)
	}
	// Every other byte is kept.
	data, _ := os.ReadFile(path)
	without := string(data[:out.Span[0]]) + string(data[out.Span[1]:])
	if want := strings.Replace(src, "echo hi\n```\n", "echo hi\n```\n\n", 1); without != want {
		t.Errorf("other bytes changed:\n%q\n%q", without, src)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v", fi.Mode())
	}
	// A second run replaces the block in place.
	rec.Output = "second\n"
	if _, err := executor.WriteBack(rb, rec); err != nil {
		t.Fatal(err)
	}
	rb = parse()
	n := 0
	for _, b := range rb.Blocks {
		if b.Role == runbook.RoleOutput {
			n++
			if b.Content != "second\n" {
				t.Errorf("content = %q", b.Content)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d recorded blocks, want 1", n)
	}
	// The last block (no trailing newline in the file) can be written too.
	recB := *rec
	recB.Block, recB.Hash = "b", rb.BlockByID("b").Hash
	if _, err := executor.WriteBack(rb, &recB); err != nil {
		t.Fatal(err)
	}
	rb = parse()
	// A file changed on disk since it was loaded is not overwritten.
	os.WriteFile(path, append(rb.Source, []byte("\nedited by hand\n")...), 0o640)
	if _, err := executor.WriteBack(rb, rec); !errors.Is(err, executor.ErrConflict) {
		t.Errorf("conflict: %v", err)
	}
	if data, _ := os.ReadFile(path); !strings.HasSuffix(string(data), "edited by hand\n") {
		t.Error("the hand edit was lost")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
}

// TestWriteBackThroughSymlinkAndReadOnly: a symlinked runbook is written
// through its link (which stays a link); a read-only one is refused and
// left as it was.
func TestWriteBackThroughSymlinkAndReadOnly(t *testing.T) {
	dir := t.TempDir()
	src := "---\ntitle: t\n---\n## s {#s}\n\n```bash {#a target=local}\necho hi\n```\n"
	real := filepath.Join(dir, "shared", "real.md")
	os.MkdirAll(filepath.Dir(real), 0o755)
	os.WriteFile(real, []byte(src), 0o644)
	link := filepath.Join(dir, "link.md")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse(link, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rec := &executor.Record{ID: "1", Block: "a", Hash: rb.BlockByID("a").Hash, Status: executor.StatusVerified, Target: "local", Hosts: []executor.HostRecord{{}}, Output: "hi\n"}
	if _, err := executor.WriteBack(rb, rec); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi.Mode(), err)
	}
	if data, _ := os.ReadFile(real); !strings.Contains(string(data), "{output=a") {
		t.Fatalf("the target was not written:\n%s", data)
	}

	ro := filepath.Join(dir, "ro.md")
	os.WriteFile(ro, []byte(src), 0o444)
	rb, _ = runbook.Parse(ro, []byte(src))
	if _, err := executor.WriteBack(rb, rec); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("read-only runbook: %v", err)
	}
	if data, _ := os.ReadFile(ro); string(data) != src {
		t.Error("the read-only runbook changed")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("left behind: %v", entries)
	}
}
