package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// CopySource says why fi cannot be an action=copy source, or nil: a copy
// takes regular files, each on its own line (every runner says it so).
func CopySource(fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return errors.New("the source is a directory; list each file on its own line")
	case !fi.Mode().IsRegular():
		return fmt.Errorf("the source is not a regular file (%s)", fi.Mode().Type())
	}
	return nil
}

// ExpandHome is p with a leading ~ or ~/ made home.
func ExpandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(home, p[2:])
	}
	return p
}
