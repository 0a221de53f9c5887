package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/site"
)

const exportExamples = `  # A standalone script for one runbook
  cairn export content/practice.md -o practice.sh
  ./practice.sh --list

  # By slug, to standard output
  cairn export kubeadm-ha > kubeadm-ha.sh

  # Everything an air-gapped site needs, in one archive
  cairn export --bundle cairn-bundle.tar.gz
  cairn export --bundle cairn-bundle.tar.gz --with-binary   # with cairn for linux/amd64 and arm64

  # ... carrying the images and charts the runbooks require: versions from a list
  # (kubeadm prints its own), pulled through the site's connected mirror
  kubeadm config images list --kubernetes-version v1.37.2 > images.txt
  echo quay.io/cilium/cilium:v1.20.2 >> images.txt
  cairn export --bundle cairn-bundle.tar.gz --images images.txt \
      --from registry.k8s.io=mirror.internal:5000/k8s --chart cilium/cilium=./cilium-1.20.2.tgz`

// bundleArches are the platforms --with-binary builds cairn for.
var bundleArches = []string{"amd64", "arm64"}

func runExport(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "export", "export RUNBOOK [-o FILE] [--content DIR]\n  cairn export --bundle OUT.tar.gz [--content DIR] [--with-binary]\n      [--images LIST | --with-images] [--from REGISTRY=MIRROR ...] [--chart NAME=PATH ...] [--omit IMAGE ...]", exportExamples)
	content := flags.String("content", "content", "content folder (a RUNBOOK given as a slug is looked up here; --bundle packs all of it)")
	out := flags.String("o", "", "write the script to this file (mode 0755) instead of standard output")
	bundle := flags.String("bundle", "", "write an offline bundle (tar.gz) of every runbook in --content")
	withBinary := flags.Bool("with-binary", false, "with --bundle: cross-compile cairn for linux/amd64 and linux/arm64 into it (needs the go toolchain and the cairn sources)")
	var carry carryFlags
	flags.StringVar(&carry.images, "images", "", "with --bundle: carry the images the runbooks require, as an OCI layout; FILE lists their versions (one full reference per line; images the runbooks pin need none)")
	flags.BoolVar(&carry.withImages, "with-images", false, "with --bundle: carry the images the runbooks require (all pinned in requires.images; else give --images FILE)")
	flags.Var(&carry.from, "from", "with --images: pull REGISTRY[/PREFIX] from MIRROR[/PREFIX] instead (repeatable): registry.k8s.io=127.0.0.1:5000/k8s")
	flags.Var(&carry.charts, "chart", "with --bundle: carry chart NAME (as requires.charts names it) from PATH, a .tgz or a chart folder (repeatable): cilium/cilium=./cilium")
	flags.Var(&carry.omit, "omit", "with --images: leave out an image the runbooks require, as requires.images writes it, because the site has it (repeatable; the README says so)")
	flags.StringVar(&carry.platform, "platform", "linux/amd64", "with --images: the platform to take from multi-platform images")
	positional, err := parseInterleaved(flags, args)
	if err != nil {
		return done(err)
	}
	if *bundle != "" {
		if len(positional) > 0 || *out != "" {
			return &usageError{cmd: "export", msg: "--bundle packs every runbook of --content; give no RUNBOOK and no -o"}
		}
		return exportBundle(ctx, m, *content, *bundle, *withBinary, carry)
	}
	if *withBinary || carry.any() {
		return &usageError{cmd: "export", msg: "--with-binary, --images, --with-images, --from and --chart need --bundle"}
	}
	if len(positional) != 1 {
		return &usageError{cmd: "export", msg: "give exactly one RUNBOOK (a file or a slug), or --bundle OUT.tar.gz"}
	}
	rb, _, err := loadRunbook(positional[0], *content)
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			ue.cmd = "export"
		}
		return err
	}
	name := export.ScriptName(rb)
	if *out != "" {
		name = filepath.Base(*out)
	}
	script, err := export.Script(rb, export.Options{Version: Version, Source: filepath.ToSlash(rb.Path), Name: name})
	if err != nil {
		return err
	}
	if *out == "" {
		_, err := m.Stdout.Write(script)
		return err
	}
	if err := atomicfile.Write(*out, script, 0o755); err != nil {
		return fmt.Errorf("write script: %w", err)
	}
	fmt.Fprintf(m.Stderr, "exported %s → %s (%s)\n", rb.Path, *out, count(len(rb.Steps), "step"))
	return nil
}

func exportBundle(ctx context.Context, m *Main, content, out string, withBinary bool, carry carryFlags) error {
	if fi, err := os.Stat(content); err != nil || !fi.IsDir() {
		return &usageError{cmd: "export", msg: fmt.Sprintf("--content %s: not a folder", content)}
	}
	res, err := buildSite(ctx, m, site.Options{Content: content}, "bundle not written: %s", false)
	if err != nil {
		return err
	}
	// The paths scripts name: relative to the content folder's parent, so
	// that the same content gives the same bundle wherever it lies.
	sources := map[string]string{}
	base := filepath.Base(filepath.Clean(content))
	for _, rb := range res.Runbooks {
		rel, err := filepath.Rel(content, rb.Path)
		if err != nil {
			rel = filepath.Base(rb.Path)
		}
		sources[rb.Path] = filepath.ToSlash(filepath.Join(base, rel))
	}
	in := export.BundleInput{Version: Version, Runbooks: res.Runbooks, Sources: sources, Site: res.Files}
	if withBinary {
		bins, err := crossCompile(ctx, m)
		if err != nil {
			return err
		}
		in.Binaries = bins
	}
	if carry.any() {
		tmp, err := os.MkdirTemp(filepath.Dir(out), ".cairn-carry-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if err := carry.fetch(ctx, m, res.Runbooks, tmp, &in); err != nil {
			return fmt.Errorf("bundle not written: %w", err)
		}
	}
	var size int64
	err = atomicfile.WriteFunc(out, 0o644, func(w io.Writer) error {
		cw := &countWriter{w: w}
		err := export.Bundle(cw, in)
		size = cw.n
		return err
	})
	if err != nil {
		return fmt.Errorf("bundle not written: %w", err)
	}
	extra := ""
	if len(in.Images)+len(in.Charts) > 0 {
		extra = fmt.Sprintf(", %s, %s", count(len(in.Images), "image"), count(len(in.Charts), "chart"))
	}
	fmt.Fprintf(m.Stderr, "bundled %s and the site (%s%s) → %s (%d bytes)\n", count(len(res.Runbooks), "runbook"), count(len(res.Files), "file"), extra, out, size)
	if !carry.any() {
		images, charts := map[string]bool{}, map[string]bool{}
		for _, rb := range res.Runbooks {
			for _, im := range rb.Meta.Requires.Images {
				images[im] = true
			}
			for _, c := range rb.Meta.Requires.Charts {
				charts[c] = true
			}
		}
		if len(images)+len(charts) > 0 {
			fmt.Fprintf(m.Stderr, "note: the runbooks require %s and %s, and this bundle carries none; to carry them, add --images LIST (and --chart NAME=PATH); see docs/air-gapped.md\n",
				count(len(images), "image"), count(len(charts), "chart"))
		}
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// crossCompile builds cairn from the module in the working directory for
// every bundleArches, statically (CGO_ENABLED=0) and reproducibly.
func crossCompile(ctx context.Context, m *Main) (map[string][]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("--with-binary needs the go toolchain on PATH to cross-compile cairn; install Go or leave --with-binary out")
	}
	modOut, err := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Path}} {{.Dir}}").Output()
	if err != nil {
		return nil, fmt.Errorf("--with-binary: run it inside the cairn sources (go list -m: %w)", err)
	}
	path, dir, _ := strings.Cut(strings.TrimSpace(string(modOut)), " ")
	if path != "github.com/cairn-dev/cairn" {
		return nil, fmt.Errorf("--with-binary: run it inside the cairn sources (this is module %q)", path)
	}
	tmp, err := os.MkdirTemp("", "cairn-xbuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bins := map[string][]byte{}
	for _, arch := range bundleArches {
		name := "cairn-linux-" + arch
		fmt.Fprintf(m.Stderr, "building %s …\n", name)
		cmd := exec.CommandContext(ctx, goBin, "build", "-trimpath", "-buildvcs=false",
			"-ldflags", "-s -w -buildid= -X main.Version="+Version, "-o", filepath.Join(tmp, name), "./cmd/cairn")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("cross-compile %s: %w\n%s", name, err, stderr.String())
		}
		data, err := os.ReadFile(filepath.Join(tmp, name))
		if err != nil {
			return nil, err
		}
		bins[name] = data
	}
	return bins, nil
}
