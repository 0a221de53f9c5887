// Package atomicfile replaces files so that a reader sees the old bytes or
// the new ones, never half of them, and a crash leaves no torn file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same folder,
// fsync'd, renamed over it, the folder fsync'd. A symlink at path is
// written through (the link stays a link, as editors and write-back keep
// it). The file gets mode, or keeps its mode when mode is 0 and it exists
// (0o644 when it does not).
func Write(path string, data []byte, mode os.FileMode) error {
	return WriteFunc(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write for content too large to hold: fill writes it into
// the temporary file; when fill fails, path is left as it was.
func WriteFunc(path string, mode os.FileMode, fill func(io.Writer) error) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("write %s: the link's target: %w", path, err)
		}
		path = target
	}
	if mode == 0 {
		mode = 0o644
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	name := tmp.Name()
	werr := fill(tmp)
	err = errors.Join(werr, tmp.Chmod(mode), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
