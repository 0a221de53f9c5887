// Command cairn turns Markdown runbooks into an interactive documentation
// site, checks them, and (through the executor) runs their steps.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cairn-dev/cairn/executor/local"
	"k8s.io/klog/v2"
	// The content lints (runbook.RegisterLint) apply to every command.
	_ "github.com/cairn-dev/cairn/lint"
)

// superviseCmd is the hidden command that runs a block's bash for the local
// runner (local.Supervise); it is not meant to be typed.
const superviseCmd = local.SuperviseArg

// Version is set at link time (-X main.Version=...).
var Version = "dev"

// Exit codes follow kubectl/Hugo: 0 success, 1 failure, 2 usage error.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == superviseCmd {
		os.Exit(local.Supervise(os.Args[2:]))
	}
	// client-go logs through klog to standard error (a cancelled exec's
	// "Copying stdout failed"), which would cut into the terminal's
	// output; every error that matters comes back to Cairn, which reports
	// it where it belongs.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal forces exit, as in litestream: the first one only
		// cancels ctx so that commands can clean up.
		<-ctx.Done()
		stop()
	}()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(m.Exit(m.Run(ctx, os.Args[1:])))
}

// Main holds the process's streams so that tests can run commands in-process.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// command is one subcommand: cairn NAME [flags] [args].
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, m *Main, args []string) error
}

func (m *Main) commands() []command {
	return []command{
		{"build", "render runbooks into a static site", runBuild},
		{"serve", "build, serve and live-reload the site on 127.0.0.1", runServe},
		{"check", "validate runbooks and report problems as file:line: message", runCheck},
		{"import", "rewrite plain, Runme or Hugo Markdown into Cairn runbooks", runImport},
		{"run", "run a runbook's steps in the terminal, verified and journaled", runRun},
		{"daemon", "run the executor alone, for a site served elsewhere", runDaemon},
		{"export", "export runbooks as standalone scripts or an offline bundle", runExport},
		{"journal", "export, import or check the run journal", runJournal},
		{"sandbox", "start or stop the local sandbox cluster and SSH hosts", runSandbox},
		{"version", "print the cairn version", runVersion},
	}
}

// Run dispatches args to a subcommand.
func (m *Main) Run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			return m.Run(ctx, []string{args[1], "--help"})
		}
		m.usage(m.Stdout)
		if len(args) == 0 {
			return usageErrorf("no command given")
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" {
		return runVersion(ctx, m, nil)
	}
	for _, c := range m.commands() {
		if c.name == args[0] {
			return c.run(ctx, m, args[1:])
		}
	}
	return usageErrorf("unknown command %q", args[0])
}

func (m *Main) usage(w io.Writer) {
	fmt.Fprint(w, "cairn turns Markdown runbooks into an interactive documentation site.\n\nUsage:\n  cairn COMMAND [flags] [args]\n\nCommands:\n")
	for _, c := range m.commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'cairn COMMAND --help' for a command's flags and examples.\n")
}

// Exit prints err and maps it to an exit code.
func (m *Main) Exit(err error) int {
	if err == nil {
		return exitOK
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(m.Stderr, "error: %s\nTry: cairn %s--help\n", ue.msg, ue.cmdPrefix())
		return exitUsage
	case errors.Is(err, errSilent):
		return exitFailure
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(m.Stderr, "interrupted")
		return exitFailure
	default:
		fmt.Fprintf(m.Stderr, "error: %v\n", err)
		return exitFailure
	}
}

// errSilent reports failure whose details the command already printed
// (cairn check prints every problem, then exits 1).
var errSilent = errors.New("failed")

type usageError struct {
	cmd string
	msg string
}

func (e *usageError) Error() string { return e.msg }

func (e *usageError) cmdPrefix() string {
	if e.cmd == "" {
		return ""
	}
	return e.cmd + " "
}

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func runVersion(_ context.Context, m *Main, args []string) error {
	fmt.Fprintf(m.Stdout, "cairn %s\n", Version)
	return nil
}
