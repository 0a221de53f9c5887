package daemon

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/runbook"
)

// Store is loaded content the daemon may run blocks of, swapped whole
// as the content changes.
type Store struct {
	mu  sync.RWMutex
	rbs []*runbook.Runbook
}

// Runbooks is the content now.
func (s *Store) Runbooks() []*runbook.Runbook {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rbs
}

// Set swaps in new content.
func (s *Store) Set(rbs []*runbook.Runbook) {
	s.mu.Lock()
	s.rbs = rbs
	s.mu.Unlock()
}

// Replace swaps in a re-parsed runbook (after write-back).
func (s *Store) Replace(rb *runbook.Runbook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*runbook.Runbook, 0, len(s.rbs))
	for _, x := range s.rbs {
		if x.Path == rb.Path {
			x = rb
		}
		out = append(out, x)
	}
	s.rbs = out
}

// Loaded is the runbooks of set that have no problems (LoadDir's error
// lists them): a runbook with problems is not run until fixed.
func Loaded(set *runbook.Set, err error) []*runbook.Runbook {
	if set == nil {
		return nil
	}
	bad := map[string]bool{}
	for _, d := range runbook.AllDiagnostics(err) {
		bad[d.File] = true
	}
	var out []*runbook.Runbook
	for _, rb := range set.Runbooks {
		if !bad[rb.Path] {
			out = append(out, rb)
		}
	}
	return out
}

// Watch reloads the runbooks of dir into st when a file changes, until
// ctx is done, so the daemon always runs what is on disk (hash checks
// catch stale pages); problems are written to log.
func Watch(ctx context.Context, dir string, st *Store, log io.Writer) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		fmt.Fprintf(log, "watch %s: %v\n", dir, err)
		return
	}
	defer w.Close()
	if err := watchDirs(w, dir); err != nil {
		fmt.Fprintf(log, "watch %s: %v\n", dir, err)
		return
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.Errors:
		case ev := <-w.Events:
			// A new or renamed folder is watched too, and may hold runbooks.
			if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && ev.Has(fsnotify.Create) {
				_ = watchDirs(w, ev.Name)
				timer.Reset(50 * time.Millisecond)
			}
			if strings.HasSuffix(ev.Name, ".md") || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				timer.Reset(50 * time.Millisecond)
			}
		case <-timer.C:
			set, err := runbook.LoadDir(dir)
			for _, d := range runbook.AllDiagnostics(err) {
				fmt.Fprintln(log, d.String())
			}
			st.Set(Loaded(set, err))
		}
	}
}

// watchDirs watches root and every folder below it but hidden ones (.cairn
// holds the journal, which changes on every run).
func watchDirs(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}
