package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cairn-dev/cairn/runbook"
)

const checkExamples = `  # Check every runbook under content/
  cairn check

  # Check one file
  cairn check content/kubeadm-ha.md`

func runCheck(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "check", "check [DIR|FILE...]", checkExamples)
	quiet := fs.Bool("quiet", false, "print only problems, not the summary line")
	if err := parseFlags(fs, args); err != nil {
		return done(err)
	}
	targets := fs.Args()
	if len(targets) == 0 {
		targets = []string{"content"}
	}
	var files []string
	for _, t := range targets {
		fi, err := os.Stat(t)
		if err != nil {
			return &usageError{cmd: "check", msg: fmt.Sprintf("%s: no such file or folder", t)}
		}
		if !fi.IsDir() {
			files = append(files, t)
			continue
		}
		set, err := runbook.LoadDir(t)
		if set != nil {
			for _, rb := range set.Runbooks {
				files = append(files, rb.Path)
			}
		}
		if err != nil && len(runbook.AllDiagnostics(err)) == 0 {
			return err
		}
	}
	set, err := runbook.LoadFiles(files)
	diags := runbook.AllDiagnostics(err)
	for _, d := range diags {
		fmt.Fprintln(m.Stdout, d.String())
	}
	if err != nil && len(diags) == 0 {
		return err
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
		fmt.Fprintf(m.Stderr, "checked %s, %s, %s: %s\n",
			count(len(set.Runbooks), "runbook"), count(steps, "step"), count(blocks, "executable block"), count(len(diags), "problem"))
	}
	if len(diags) > 0 {
		return errSilent
	}
	return errors.Join(nil)
}
