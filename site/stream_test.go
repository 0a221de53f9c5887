package site_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/bench/gen"
	"github.com/cairn-dev/cairn/site"
)

// mapSink collects what BuildTo puts, copying it (the builder reuses it).
type mapSink struct {
	mu    sync.Mutex
	files map[string][]byte
	fail  string // Put of this name fails
}

func (s *mapSink) Put(name string, data []byte) error {
	if name == s.fail {
		return errors.New("disk full")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.files[name]; dup {
		return errors.New("put twice: " + name)
	}
	s.files[name] = append([]byte{}, data...)
	return nil
}

// TestBuildToMatchesBuild: the streaming build puts the same bytes under the
// same names as the in-memory build, for the bundled runbooks and for a
// generated site big enough for the compact navigation (nav.js).
func TestBuildToMatchesBuild(t *testing.T) {
	genDir := t.TempDir()
	if _, err := gen.Generate(genDir, gen.Options{N: site.NavInlineMax + 7, Steps: 3}); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../content", genDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want := build(t, dir)
			b, err := site.New(site.Options{Content: dir})
			if err != nil {
				t.Fatal(err)
			}
			sink := &mapSink{files: map[string][]byte{}}
			res, err := b.BuildTo(context.Background(), sink, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Diagnostics)+len(res.Warnings) > 0 {
				t.Fatalf("problems: %v %v", res.Diagnostics, res.Warnings)
			}
			if got, w := slices.Sorted(maps.Keys(sink.files)), slices.Sorted(maps.Keys(want.Files)); !slices.Equal(got, w) {
				t.Fatalf("files differ:\nstream %v\nmemory %v", got, w)
			}
			for name, data := range want.Files {
				if string(sink.files[name]) != string(data) {
					t.Errorf("%s differs between BuildTo and Build", name)
				}
			}
			if res.Pages != len(want.Runbooks) || res.Written != len(want.Files) || res.Runbooks != nil || res.Files != nil {
				t.Errorf("result: %d pages, %d written, runbooks %v files %v; want %d pages, %d files and nothing kept",
					res.Pages, res.Written, res.Runbooks != nil, res.Files != nil, len(want.Runbooks), len(want.Files))
			}
		})
	}
}

// TestBuildToWritesNothingOnProblems: a broken runbook (or, strictly, a
// warning) stops the build before the first file; a sink that fails stops
// it with that error.
func TestBuildToWritesNothingOnProblems(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.md"), runbookMD("좋음", "## 하나 {#one}\n\n본문\n"))
	b, err := site.New(site.Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sink := &mapSink{files: map[string][]byte{}, fail: "good/index.html"}
	if _, err := b.BuildTo(ctx, sink, false); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("failing sink: %v", err)
	}

	writeFile(t, filepath.Join(dir, "odd.md"), "---\ntitle: Odd\ncolour: blue\n---\n\n## One {#one}\n\ntext\n")
	sink = &mapSink{files: map[string][]byte{}}
	res, err := b.BuildTo(ctx, sink, true)
	if err != nil || len(res.Warnings) == 0 || len(sink.files) > 0 {
		t.Errorf("strict with a warning: %v, warnings %v, %d files put", err, res.Warnings, len(sink.files))
	}
	if res, err = b.BuildTo(ctx, sink, false); err != nil || len(sink.files) == 0 || len(res.Warnings) == 0 {
		t.Errorf("not strict: %v, %d files put, warnings %v", err, len(sink.files), res.Warnings)
	}

	writeFile(t, filepath.Join(dir, "bad.md"), runbookMD("나쁨", "## 하나 {#one}\n\n```bash {target=nowhere}\n```\n"))
	sink = &mapSink{files: map[string][]byte{}}
	res, err = b.BuildTo(ctx, sink, false)
	if err != nil || len(res.Diagnostics) != 1 || len(sink.files) > 0 {
		t.Errorf("broken runbook: %v, diagnostics %v, %d files put", err, res.Diagnostics, len(sink.files))
	}
}

// TestDirWriter: files appear only at Commit, Abort leaves the folder as
// it was, and a name that leaves the site is refused.
func TestDirWriter(t *testing.T) {
	out := filepath.Join(t.TempDir(), "public")
	if err := site.WriteDir(out, map[string][]byte{"index.html": []byte("1")}); err != nil {
		t.Fatal(err)
	}
	w, err := site.NewDirWriter(out)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, name := range []string{"index.html", "a/index.html", "a/b/c.css", "z/index.html"} {
		wg.Go(func() {
			if err := w.Put(name, []byte(name)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, bad := range []string{"../x", "/etc/x", "a/../../x", ""} {
		if err := w.Put(bad, nil); err == nil {
			t.Errorf("Put(%q) was allowed", bad)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "index.html")); string(b) != "1" || w.Files() != 4 {
		t.Fatalf("before Commit: index.html = %q, %d files", b, w.Files())
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "index.html")); string(b) != "1" {
		t.Fatalf("after Abort: index.html = %q", b)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("Abort left %v", entries)
	}
	w, err = site.NewDirWriter(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put("a/b/c.css", []byte("css")); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "a", "b", "c.css")); string(b) != "css" {
		t.Errorf("after Commit: %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); !os.IsNotExist(err) {
		t.Error("a file of the old site survived Commit")
	}
}
