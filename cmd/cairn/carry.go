package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/mirror"
	"github.com/cairn-dev/cairn/runbook"
)

// carryFlags say which images and charts an offline bundle carries.
type carryFlags struct {
	images     string
	withImages bool
	from       stringList
	charts     stringList
	omit       stringList
	platform   string
}

func (c carryFlags) any() bool {
	return c.images != "" || c.withImages || len(c.from) > 0 || len(c.charts) > 0
}

// fetch copies every image the runbooks require into an OCI layout and
// every chart into tmp, and names them in the bundle's input.
func (c carryFlags) fetch(ctx context.Context, m *Main, rbs []*runbook.Runbook, tmp string, in *export.BundleInput) error {
	var required, charts []string
	by := map[string]bool{}
	omit := map[string]bool{}
	for _, o := range c.omit {
		omit[strings.TrimSpace(o)] = true
	}
	omitted := map[string]bool{}
	for _, rb := range rbs {
		for _, im := range rb.Meta.Requires.Images {
			im = strings.TrimSpace(im)
			if omit[im] {
				// Every runbook that requires it goes without it.
				if !omitted[im] {
					omitted[im] = true
					in.Omitted = append(in.Omitted, im)
				}
				continue
			}
			required = append(required, im)
		}
		for _, ch := range rb.Meta.Requires.Charts {
			if !by[ch] {
				by[ch] = true
				charts = append(charts, ch)
			}
		}
	}
	var names []string
	for o := range omit {
		if !omitted[o] {
			names = append(names, o)
		}
	}
	if len(names) > 0 {
		sort.Strings(names)
		return &usageError{cmd: "export", msg: fmt.Sprintf("--omit %s: no runbook requires that image (give it as requires.images writes it)", strings.Join(names, ", "))}
	}
	// Everything the runbooks require, or no bundle: a site has nowhere
	// to get what is missing. Charts are checked first (no pulls wasted).
	given := map[string]string{}
	for _, f := range c.charts {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" {
			return &usageError{cmd: "export", msg: fmt.Sprintf("--chart %q: use NAME=PATH (NAME as requires.charts names it)", f)}
		}
		if !by[k] {
			return &usageError{cmd: "export", msg: fmt.Sprintf("--chart %s: no runbook requires that chart (they require: %s)", k, strings.Join(charts, ", "))}
		}
		given[k] = v
	}
	var missing []string
	for _, ch := range charts {
		if _, ok := given[ch]; !ok {
			missing = append(missing, ch)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the runbooks require charts not given: %s; add --chart NAME=PATH for each (a .tgz from helm pull, or a chart folder)", strings.Join(missing, ", "))
	}
	var list []string
	if c.images != "" {
		data, err := os.ReadFile(c.images)
		if err != nil {
			return fmt.Errorf("--images: %w", err)
		}
		list = strings.Split(string(data), "\n")
	}
	refs, err := mirror.Resolve(required, list)
	if err != nil {
		return err
	}
	from, err := mirror.ParseFrom(c.from)
	if err != nil {
		return err
	}
	plat, err := v1.ParsePlatform(c.platform)
	if err != nil {
		return fmt.Errorf("--platform %s: %w", c.platform, err)
	}

	in.Disk = map[string]string{}
	cdir := filepath.Join(tmp, "charts")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	for _, ch := range charts {
		fmt.Fprintf(m.Stderr, "chart %s from %s\n", ch, given[ch])
		packed, err := mirror.PackChart(ch, given[ch], cdir)
		if err != nil {
			return err
		}
		rel := "charts/" + filepath.Base(packed.File)
		if _, dup := in.Disk[rel]; dup {
			return fmt.Errorf("--chart: two charts are %s", rel)
		}
		in.Disk[rel] = packed.File
		in.Charts = append(in.Charts, export.BundleChart{Name: ch, Chart: packed.Chart, Version: packed.Version, Path: rel})
	}
	if len(refs) == 0 {
		return nil
	}
	dir := filepath.Join(tmp, "images")
	pulled, err := mirror.Images(ctx, refs, dir, mirror.Options{From: from, Platform: *plat,
		Progress: func(s string) { fmt.Fprintf(m.Stderr, "%s\n", s) }})
	if err != nil {
		return err
	}
	for _, p := range pulled {
		in.Images = append(in.Images, export.BundleImage{Ref: p.Ref, Digest: p.Digest, Pulled: p.Pulled, Size: p.Size})
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(tmp, p)
		in.Disk[filepath.ToSlash(rel)] = p
		return nil
	})
}
