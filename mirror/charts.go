package mirror

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Chart is a Helm chart for the bundle.
type Chart struct {
	Name    string // as requires.charts names it (cilium/cilium)
	Chart   string // its own name (Chart.yaml)
	Version string
	File    string // the .tgz on disk
}

// PackChart gives the chart at path as a .tgz in dir: a .tgz (helm pull's
// output) is copied as it is; a chart folder is packed as `helm package`
// would, deterministically (sorted, fixed times and owners). name is the
// requires.charts entry it stands for.
func PackChart(name, path, dir string) (*Chart, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	var meta []byte
	if fi.IsDir() {
		if meta, err = os.ReadFile(filepath.Join(path, "Chart.yaml")); err != nil {
			return nil, fmt.Errorf("chart %s: %s is not a chart folder: %w", name, path, err)
		}
	} else if meta, err = chartYAMLFromTgz(path); err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	var cy struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if err := yaml.Unmarshal(meta, &cy); err != nil || cy.Name == "" || cy.Version == "" {
		return nil, fmt.Errorf("chart %s: Chart.yaml of %s has no name and version (%v)", name, path, err)
	}
	c := &Chart{Name: name, Chart: cy.Name, Version: cy.Version, File: filepath.Join(dir, cy.Name+"-"+cy.Version+".tgz")}
	out, err := os.Create(c.File)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	if fi.IsDir() {
		err = packDir(out, path, cy.Name)
	} else {
		var in *os.File
		if in, err = os.Open(path); err == nil {
			_, err = io.Copy(out, in)
			in.Close()
		}
	}
	if err == nil {
		err = out.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	return c, nil
}

func chartYAMLFromTgz(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a .tgz: %w", path, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: no CHART/Chart.yaml in it (%v)", path, err)
		}
		if parts := strings.Split(h.Name, "/"); len(parts) == 2 && parts[1] == "Chart.yaml" {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}

func packDir(w io.Writer, dir, chart string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	zw := gzip.NewWriter(w)
	zw.Header = gzip.Header{OS: 255}
	tw := tar.NewWriter(zw)
	epoch := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: chart + "/" + f, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
