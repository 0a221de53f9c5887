package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
)

// newFlagSet returns a FlagSet whose --help prints usage, flags and examples.
func newFlagSet(m *Main, name, usage, examples string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// flag calls Usage on every parse error too; a mistyped value should
	// get one line and a pointer to --help, not the whole page
	// (parseFlags prints it for --help only).
	fs.Usage = func() {}
	usages.Store(fs, func() {
		w := m.Stdout
		fmt.Fprintf(w, "Usage:\n  cairn %s\n\nFlags:\n", usage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if examples != "" {
			fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(examples, "\n"))
		}
	})
	return fs
}

// usages holds each flag set's --help printer.
var usages sync.Map

// parseFlags parses args; --help prints usage and returns errHelp, which
// callers turn into a clean exit.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		if u, ok := usages.Load(fs); ok {
			u.(func())()
		}
		return errHelp
	}
	if err != nil {
		return &usageError{cmd: fs.Name(), msg: err.Error()}
	}
	return nil
}

// errHelp means --help was printed; the command returns nil to the user.
var errHelp = errors.New("help shown")

// done maps errHelp to success.
func done(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// parseInterleaved parses flags that may come before or after positional
// arguments (cairn run x.md --step a) and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// count says "1 runbook", "2 runbooks": messages read as sentences.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
