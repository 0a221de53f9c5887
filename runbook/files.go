package runbook

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsContentFile reports whether path is a runbook file: a .md file whose
// name starts with neither "_" (a draft) nor "." (hidden). The one rule for
// build, check, serve, the daemon, export and the bundle.
func IsContentFile(path string) bool {
	base := filepath.Base(path)
	return strings.HasSuffix(base, ".md") && !strings.HasPrefix(base, "_") && !strings.HasPrefix(base, ".")
}

// ContentFiles lists the runbook files below dir, sorted. Hidden folders
// are skipped, and so are symlinked folders (the walk does not follow
// them).
func ContentFiles(dir string) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && IsContentFile(p) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read content folder: %w", err)
	}
	sort.Strings(paths)
	return paths, nil
}

// ReadContent reads the runbook file path of the content folder root.
// Content is what is inside the folder: a symlink whose target lies
// outside it (a private key, another user's notes) is refused with a
// diagnostic at path:1, so nothing outside the folder reaches a page, the
// search index or a bundle. Links within the folder are read.
func ReadContent(root, path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("read runbook: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		if err := checkLink(root, path); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read runbook: %w", err)
	}
	return b, nil
}

// checkLink refuses a symlink at path that leaves root.
func checkLink(root, path string) error {
	diag := func(msg string) error {
		return Diagnostics{{File: path, Pos: Pos{Line: 1}, Msg: msg, Code: "symlink"}}
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return diag(fmt.Sprintf("broken symlink: %v", err))
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fmt.Errorf("read content folder: %w", err)
	}
	rel, err := filepath.Rel(realRoot, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return diag(fmt.Sprintf("symlink to outside the content folder (%s); Cairn publishes only what is inside %s: copy the file into the folder instead", target, root))
	}
	return nil
}
