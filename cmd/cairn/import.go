package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/importer"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/runbook"
)

const importExamples = `  # See what a README becomes (printed, nothing written)
  cairn import README.md

  # Convert a Runme notebook in place, its shell blocks runnable on this machine
  cairn import --target local --write docs/setup.md

  # Convert a folder's pages into content/
  cairn import --out content docs/*.md`

func runImport(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "import", "import [--target local|kube] [--write | --out DIR] FILE...", importExamples)
	target := fs.String("target", "", "make bash, sh and shell blocks without a role executable there: local or kube (default: they stay display-only)")
	write := fs.Bool("write", false, "rewrite each FILE in place")
	out := fs.String("out", "", "write the converted files into this folder (same names)")
	if err := parseFlags(fs, args); err != nil {
		return done(err)
	}
	files := fs.Args()
	switch {
	case len(files) == 0:
		return &usageError{cmd: "import", msg: "no FILE given"}
	case *write && *out != "":
		return &usageError{cmd: "import", msg: "--write and --out exclude each other"}
	case !*write && *out == "" && len(files) > 1:
		return &usageError{cmd: "import", msg: "several files: choose --write (in place) or --out DIR"}
	case *target != "" && *target != "local" && *target != "kube":
		return &usageError{cmd: "import", msg: fmt.Sprintf("--target %q: use local or kube", *target)}
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
	}
	failed := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return &usageError{cmd: "import", msg: fmt.Sprintf("%s: %v", f, err)}
		}
		res, err := importer.Convert(f, src, importer.Options{Target: runbook.Target(*target)})
		var ds runbook.Diagnostics
		if errors.As(err, &ds) {
			for _, d := range ds {
				fmt.Fprintln(m.Stderr, d.String())
			}
			fmt.Fprintf(m.Stderr, "%s: not imported: fix the problems above first\n", f)
			failed++
			continue
		}
		if err != nil {
			return err
		}
		for _, w := range res.Warnings {
			fmt.Fprintln(m.Stderr, w.String())
		}
		dest := ""
		switch {
		case *write:
			dest = f
		case *out != "":
			dest = filepath.Join(*out, filepath.Base(f))
		}
		if dest == "" {
			m.Stdout.Write(res.Source)
		} else {
			mode := os.FileMode(0o644)
			if fi, err := os.Stat(f); err == nil {
				mode = fi.Mode().Perm()
			}
			if err := atomicfile.Write(dest, res.Source, mode); err != nil {
				return err
			}
		}
		for _, c := range res.Changes {
			fmt.Fprintf(m.Stderr, "  %s\n", c)
		}
		where := "printed"
		if dest != "" {
			where = "→ " + dest
		}
		confirm := ""
		if res.Confirm > 0 {
			confirm = fmt.Sprintf(" (%d ask for confirmation before they run: they change things; review them, then remove confirm= where it is not needed)", res.Confirm)
		}
		fmt.Fprintf(m.Stderr, "imported %s %s: %s, %s%s, %s\n", f, where, count(res.Steps, "step"), count(res.Blocks, "executable block"), confirm, count(len(res.Warnings), "warning"))
	}
	if failed > 0 {
		return errSilent
	}
	return nil
}
