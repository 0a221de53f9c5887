package runbook

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Set is every runbook of a content folder, sorted by weight then title.
type Set struct {
	Runbooks []*Runbook
}

// Warnings is every runbook's warnings, sorted.
func (s *Set) Warnings() Diagnostics {
	var ws Diagnostics
	for _, rb := range s.Runbooks {
		ws = append(ws, rb.Warnings...)
	}
	ws.Sort()
	return ws
}

// LoadDir parses every .md file below dir. It returns what it could parse
// and, as err, all diagnostics of all files (a Diagnostics) or an I/O error.
func LoadDir(dir string) (*Set, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") && !strings.HasPrefix(d.Name(), "_") {
			paths = append(paths, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read content folder: %w", err)
	}
	return LoadFiles(paths)
}

// LoadFiles parses the given files as one set.
func LoadFiles(paths []string) (*Set, error) {
	set := &Set{}
	var diags Diagnostics
	var errs []error
	slugs := map[string]string{}
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("read runbook: %w", err))
			continue
		}
		rb, err := Parse(path, src)
		var ds Diagnostics
		if errors.As(err, &ds) {
			diags = append(diags, ds...)
		}
		if prev, dup := slugs[rb.Slug]; dup {
			diags = append(diags, Diagnostic{File: path, Pos: Pos{Line: 1}, Msg: fmt.Sprintf("slug %q is already used by %s; set another slug in the front matter", rb.Slug, prev)})
		}
		slugs[rb.Slug] = path
		set.Runbooks = append(set.Runbooks, rb)
	}
	set.Sort()
	if len(diags) > 0 {
		diags.Sort()
		errs = append(errs, diags)
	}
	return set, errors.Join(errs...)
}

// Sort orders runbooks by weight, then title, then path.
func (s *Set) Sort() {
	sort.SliceStable(s.Runbooks, func(i, j int) bool {
		a, b := s.Runbooks[i], s.Runbooks[j]
		if a.Meta.Weight != b.Meta.Weight {
			return a.Meta.Weight < b.Meta.Weight
		}
		if a.Meta.Title != b.Meta.Title {
			return a.Meta.Title < b.Meta.Title
		}
		return a.Path < b.Path
	})
}

// BySlug returns the runbook with that slug or nil.
func (s *Set) BySlug(slug string) *Runbook {
	for _, rb := range s.Runbooks {
		if rb.Slug == slug {
			return rb
		}
	}
	return nil
}

// AllDiagnostics extracts diagnostics from an error returned by this package.
func AllDiagnostics(err error) Diagnostics {
	var out Diagnostics
	var walk func(error)
	walk = func(e error) {
		var ds Diagnostics
		if errors.As(e, &ds) {
			out = append(out, ds...)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
