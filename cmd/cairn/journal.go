package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairn-dev/cairn/executor"
)

const journalExamples = `  # Every run as JSON lines, oldest first, for an auditor
  cairn journal export > runs.jsonl

  # Another content folder's journal
  cairn journal export --journal runbooks/.cairn/journal.db

  # Read an older Cairn's JSON-lines journal (or an export) into the journal
  cairn journal import old-journal.jsonl

  # SQLite's integrity check
  cairn journal check`

// runJournal reads and maintains the run journal.
func runJournal(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "journal", "journal export|import FILE|check [--journal PATH]", journalExamples)
	path := flags.String("journal", filepath.Join("content", ".cairn", "journal.db"), "the journal database")
	rest, err := parseInterleaved(flags, args)
	if err != nil {
		return done(err)
	}
	if len(rest) == 0 {
		return &usageError{cmd: "journal", msg: "say export, import FILE or check"}
	}
	if _, err := os.Stat(*path); err != nil {
		return fmt.Errorf("journal %s: %w (give --journal PATH)", *path, err)
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
	case rest[0] == "import" && len(rest) == 2:
		f, err := os.Open(rest[1])
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := j.Import(ctx, f)
		if err != nil {
			return fmt.Errorf("%s: %w", rest[1], err)
		}
		fmt.Fprintf(m.Stderr, "imported %d runs\n", n)
		return nil
	case rest[0] == "check" && len(rest) == 1:
		if err := j.Check(ctx); err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "%s: ok\n", *path)
		return nil
	}
	return &usageError{cmd: "journal", msg: fmt.Sprintf("unknown use %q: say export, import FILE or check", rest)}
}
