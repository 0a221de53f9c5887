package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/site"
)

const checkExamples = `  # Check every runbook under content/
  cairn check

  # Check one file
  cairn check content/kubeadm-ha.md

  # In CI: warnings (unknown front-matter keys, no front matter) fail too
  cairn check --strict`

func runCheck(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "check", "check [DIR|FILE...]", checkExamples)
	quiet := fs.Bool("quiet", false, "print only problems, not the summary line")
	strict := fs.Bool("strict", false, "count warnings as problems (exit 1 on any)")
	var sf siteFlags
	fs.StringVar(&sf.config, "config", "", "site configuration to check against (default: "+site.ConfigFile+" here, if there is one)")
	if err := parseFlags(fs, args); err != nil {
		return done(err)
	}
	targets := fs.Args()
	if len(targets) == 0 {
		targets = []string{"content"}
	}
	var files []runbook.File
	for _, t := range targets {
		fi, err := os.Stat(t)
		if err != nil {
			return &usageError{cmd: "check", msg: fmt.Sprintf("%s: no such file or folder", t)}
		}
		if !fi.IsDir() {
			files = append(files, runbook.File{Root: filepath.Dir(t), Path: t})
			continue
		}
		paths, err := runbook.ContentFiles(t)
		if err != nil {
			return err
		}
		for _, p := range paths {
			files = append(files, runbook.File{Root: t, Path: p})
		}
	}
	set, err := runbook.LoadSet(files)
	diags := runbook.AllDiagnostics(err)
	if err != nil && len(diags) == 0 {
		return err
	}
	cfg, err := sf.siteConfig()
	if err != nil {
		return err
	}
	warnings := site.Warnings(set.Warnings(), cfg.RawHTML)
	all := append(append(runbook.Diagnostics{}, diags...), warnings...)
	all.Sort()
	for _, d := range all {
		fmt.Fprintln(m.Stdout, d.String())
	}
	steps, blocks := 0, 0
	for _, rb := range set.Runbooks {
		steps += len(rb.Steps)
		for _, b := range rb.Blocks {
			if b.Executable() {
				blocks++
			}
		}
	}
	if !*quiet {
		fmt.Fprintf(m.Stderr, "checked %s, %s, %s: %s, %s\n",
			count(len(set.Runbooks), "runbook"), count(steps, "step"), count(blocks, "executable block"), count(len(diags), "problem"), count(len(warnings), "warning"))
	}
	if len(diags) > 0 || *strict && len(warnings) > 0 {
		return errSilent
	}
	return errors.Join(nil)
}
