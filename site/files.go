package site

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/cairn-dev/cairn/runbook"
)

func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// IsContentFile reports whether path is a runbook file (runbook.IsContentFile).
func IsContentFile(path string) bool { return runbook.IsContentFile(path) }

// WriteDir writes files into dir so that readers never see a half-written
// site: everything goes to a fresh sibling folder first, which then replaces
// dir. Files in dir that the build did not produce are removed with it.
func WriteDir(dir string, files map[string][]byte) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("write site: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return fmt.Errorf("write site: %w", err)
	}
	defer os.RemoveAll(tmp)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write site: %w", err)
		}
		if err := os.WriteFile(p, files[name], 0o644); err != nil {
			return fmt.Errorf("write site: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("write site: %w", err)
	}
	old := ""
	if _, err := os.Stat(dir); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("write site: replace %s: %w", dir, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			_ = os.Rename(old, dir)
		}
		return fmt.Errorf("write site: %w", err)
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}
