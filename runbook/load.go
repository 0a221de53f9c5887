package runbook

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
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

// LoadDir parses every runbook file below dir (ContentFiles). It returns
// what it could parse and, as err, all diagnostics of all files (a
// Diagnostics) or an I/O error.
func LoadDir(dir string) (*Set, error) {
	paths, err := ContentFiles(dir)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(paths))
	for i, p := range paths {
		files[i] = File{Root: dir, Path: p}
	}
	return LoadSet(files)
}

// LoadFiles parses the given files as one set; each is read as content of
// its own folder (ReadContent).
func LoadFiles(paths []string) (*Set, error) {
	files := make([]File, len(paths))
	for i, p := range paths {
		files[i] = File{Root: filepath.Dir(p), Path: p}
	}
	return LoadSet(files)
}

// File is a runbook file and the content folder it is read from.
type File struct{ Root, Path string }

// LoadSet parses the given files as one set.
func LoadSet(files []File) (*Set, error) {
	set := &Set{}
	var diags Diagnostics
	var errs []error
	slugs := map[string]string{}
	for _, f := range files {
		path := f.Path
		src, err := ReadContent(f.Root, path)
		var ds Diagnostics
		if errors.As(err, &ds) {
			diags = append(diags, ds...)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rb, err := Parse(path, src)
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
