package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/results"
	"github.com/cairn-dev/cairn/runbook"
)

const journalExamples = `  # Every run as JSON lines, oldest first, for an auditor
  cairn journal export > runs.jsonl

  # Another content folder's journal
  cairn journal export --journal runbooks/.cairn/journal.db

  # Results an exported script brought back from an air-gapped site,
  # signed there with --sign KEY and checked here against allowed signers
  cairn journal import kubeadm-ha.results.jsonl --allowed-signers ops-signers

  # ... and only if they came from this bundle's scripts
  cairn journal import kubeadm-ha.results.jsonl --allowed-signers ops-signers --bundle cairn-bundle.tar.gz

  # Read an older Cairn's JSON-lines journal (or an export) into the journal
  cairn journal import old-journal.jsonl

  # SQLite's integrity check
  cairn journal check`

// runJournal reads and maintains the run journal.
func runJournal(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "journal", "journal export|import FILE|check [--journal PATH]\n  cairn journal import RESULTS [--allowed-signers FILE] [--signature SIG] [--bundle BUNDLE] [--content DIR]", journalExamples)
	content := flags.String("content", "content", "content folder: results are checked against its runbooks (and the journal is its .cairn/journal.db unless --journal)")
	path := flags.String("journal", "", "the journal database (default CONTENT/.cairn/journal.db)")
	allowed := flags.String("allowed-signers", "", "import: check the results' signature (FILE.sig) against this OpenSSH allowed signers file; a file without one is refused")
	sigFile := flags.String("signature", "", "import: the signature of the results file (default FILE.sig, when it exists)")
	bundle := flags.String("bundle", "", "import: refuse results that do not come from this bundle's scripts (the .tar.gz, or the folder it was unpacked to)")
	rest, err := parseInterleaved(flags, args)
	if err != nil {
		return done(err)
	}
	if len(rest) == 0 {
		return &usageError{cmd: "journal", msg: "say export, import FILE or check"}
	}
	if *path == "" {
		*path = filepath.Join(*content, ".cairn", "journal.db")
	}
	importing := rest[0] == "import" && len(rest) == 2
	if !importing && (*allowed != "" || *sigFile != "" || *bundle != "") {
		return &usageError{cmd: "journal", msg: "--allowed-signers, --signature and --bundle are for import"}
	}
	if _, err := os.Stat(*path); err != nil && !importing {
		return fmt.Errorf("journal %s: %w (give --journal PATH)", *path, err)
	}
	if importing {
		return importJournal(ctx, m, rest[1], *path, *content, *allowed, *sigFile, *bundle)
	}
	j, err := executor.OpenJournal(*path)
	if err != nil {
		return err
	}
	defer j.Close()
	switch {
	case rest[0] == "export" && len(rest) == 1:
		n, err := j.Export(ctx, m.Stdout)
		if err == nil {
			fmt.Fprintf(m.Stderr, "exported %d runs\n", n)
		}
		return err
	case rest[0] == "check" && len(rest) == 1:
		if err := j.Check(ctx); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s: ok\n", *path)
		return nil
	}
	return &usageError{cmd: "journal", msg: fmt.Sprintf("unknown use %q: say export, import FILE or check", rest)}
}

// importJournal imports name: an exported script's results (checked
// whole before the journal is opened, so that a refused file leaves no
// trace), or a JSON-lines journal, streamed (it may be any size). The
// first line says which.
func importJournal(ctx context.Context, m *Main, name, path, content, allowed, sigFile, bundle string) error {
	fh, err := os.Open(name)
	if err != nil {
		return err
	}
	defer fh.Close()
	br := bufio.NewReaderSize(fh, 1<<20)
	first, err := br.ReadBytes('\n')
	if err != nil && err != io.EOF {
		return err
	}
	if !results.IsResults(first) {
		if allowed != "" || sigFile != "" || bundle != "" {
			return fmt.Errorf("%s: not a results file of an exported script (no \"site\" in its first record); --allowed-signers, --signature and --bundle apply only to those", name)
		}
		j, err := executor.OpenJournal(path)
		if err != nil {
			return err
		}
		defer j.Close()
		n, err := j.Import(ctx, io.MultiReader(bytes.NewReader(first), br))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(m.Stderr, "imported %d runs\n", n)
		return nil
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		return err
	}
	f, err := checkResults(ctx, m, name, append(first, rest...), content, allowed, sigFile, bundle)
	if err != nil {
		return err
	}
	j, err := executor.OpenJournal(path)
	if err != nil {
		return err
	}
	defer j.Close()
	n, err := j.AppendAll(ctx, f.Records)
	if err != nil {
		return fmt.Errorf("%s: nothing imported: %w", name, err)
	}
	sig := "unsigned"
	if len(f.Records) > 0 {
		switch s := f.Records[0].Site; s.Signature {
		case executor.SignatureChecked:
			sig = "signature checked: " + s.Signer
		case executor.SignatureUnchecked:
			sig = "signed, signature NOT checked (give --allowed-signers)"
		}
	}
	fmt.Fprintf(m.Stderr, "imported %d of %s from %s (%s; %s not journaled; %d already there) into %s\n",
		n, count(len(f.Records), "result"), name, sig, count(len(f.Skipped), "skipped block"), len(f.Records)-n, path)
	return nil
}

// checkResults reads an exported script's results file and checks its
// signature, its blocks against content and, given one, its bundle.
func checkResults(ctx context.Context, m *Main, name string, data []byte, content, allowed, sigFile, bundle string) (*results.File, error) {
	f, err := results.Read(name, data)
	if err != nil {
		return nil, err
	}
	var sig []byte
	if sigFile == "" {
		if s, err := os.ReadFile(name + ".sig"); err == nil {
			sig = s
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	} else if sig, err = os.ReadFile(sigFile); err != nil {
		return nil, fmt.Errorf("--signature: %w", err)
	}
	s, err := results.Verify(ctx, name, data, sig, allowed)
	if err != nil {
		return nil, err
	}
	if s.State == executor.SignatureUnchecked {
		fmt.Fprintf(m.Stderr, "warning: %s is signed, but without --allowed-signers the signature is not checked; the page will say so\n", name)
	}
	set, err := runbook.LoadDir(content)
	if err != nil {
		var d runbook.Diagnostics
		if !errors.As(err, &d) || set == nil {
			return nil, fmt.Errorf("--content %s: %w", content, err)
		}
	}
	if err := results.CheckContent(f, set); err != nil {
		return nil, err
	}
	if bundle != "" {
		b, err := results.ReadBundle(bundle)
		if err != nil {
			return nil, err
		}
		if err := results.CheckBundle(f, b); err != nil {
			return nil, err
		}
	}
	results.Stamp(f, s, time.Now())
	return f, nil
}
