package site

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/runbook"
)

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// IsContentFile reports whether path is a runbook file (runbook.IsContentFile).
func IsContentFile(path string) bool { return runbook.IsContentFile(path) }

// Sink receives a build's files as they are made. Put is called from
// several goroutines at once, never twice for one name, and data is reused
// by the builder once Put returns: a sink that keeps it copies it.
type Sink interface {
	Put(name string, data []byte) error
}

// memSink keeps the files in memory (Build, for the dev server and export).
type memSink struct {
	mu    sync.Mutex
	files map[string][]byte
}

func (m *memSink) Put(name string, data []byte) error {
	c := bytes.Clone(data)
	if c == nil {
		c = []byte{}
	}
	m.mu.Lock()
	m.files[name] = c
	m.mu.Unlock()
	return nil
}

// DirWriter writes a site into a fresh sibling of its folder as the files
// come, so that writing overlaps rendering, and swaps it in at Commit:
// readers never see a half-written site. Files in the folder that the
// build did not produce go with the old folder.
type DirWriter struct {
	dir, tmp string
	mu       sync.Mutex
	made     map[string]bool // folders made under tmp
	n        int
}

// NewDirWriter prepares the sibling folder of dir. Call Commit or Abort.
func NewDirWriter(dir string) (*DirWriter, error) {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("write site: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return nil, fmt.Errorf("write site: %w", err)
	}
	return &DirWriter{dir: dir, tmp: tmp, made: map[string]bool{".": true}}, nil
}

// Put writes one file; names are slash-separated and site-relative.
func (w *DirWriter) Put(name string, data []byte) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(name, "\\") {
		return fmt.Errorf("write site: %q is not a path inside the site", name)
	}
	p := filepath.Join(w.tmp, filepath.FromSlash(name))
	d := filepath.Dir(name)
	w.mu.Lock()
	made := w.made[d]
	w.mu.Unlock()
	if !made {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write site: %w", err)
		}
		w.mu.Lock()
		w.made[d] = true
		w.mu.Unlock()
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("write site: %w", err)
	}
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	return nil
}

// Files is how many files were written.
func (w *DirWriter) Files() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Abort removes what was written; the folder stays as it was.
func (w *DirWriter) Abort() error { return removeAll(w.tmp) }

// Commit replaces the folder with what was written.
func (w *DirWriter) Commit() error {
	defer removeAll(w.tmp)
	if err := os.Chmod(w.tmp, 0o755); err != nil {
		return fmt.Errorf("write site: %w", err)
	}
	old := ""
	if _, err := os.Stat(w.dir); err == nil {
		old = w.tmp + ".old"
		if err := os.Rename(w.dir, old); err != nil {
			return fmt.Errorf("write site: replace %s: %w", w.dir, err)
		}
	}
	if err := os.Rename(w.tmp, w.dir); err != nil {
		if old != "" {
			_ = os.Rename(old, w.dir)
		}
		return fmt.Errorf("write site: %w", err)
	}
	if old != "" {
		return removeAll(old)
	}
	return nil
}

// removeAll is os.RemoveAll with a few goroutines, one top-level entry
// each: a built site is thousands of small folders, and unlinking them one
// after another waits on the disk for each.
func removeAll(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return os.RemoveAll(dir)
	}
	next := make(chan string)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(len(entries), 4*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for p := range next {
				if err := os.RemoveAll(p); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, e := range entries {
		next <- filepath.Join(dir, e.Name())
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return os.RemoveAll(dir)
}

// WriteDir writes files into dir the way a DirWriter does.
func WriteDir(dir string, files map[string][]byte) error {
	w, err := NewDirWriter(dir)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.Put(name, files[name]); err != nil {
			_ = w.Abort()
			return err
		}
	}
	return w.Commit()
}
