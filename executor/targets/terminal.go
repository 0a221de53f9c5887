package targets

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/local"
	sshrunner "github.com/cairn-dev/cairn/executor/ssh"
	"github.com/cairn-dev/cairn/executor/term"
)

// WireTerminals gives the server the page's terminals (cairn serve
// --terminal): on this machine, the reader's login shell under the
// supervisor; on a host, its login shell over SSH as blocks reach it (the
// sandbox's hosts when the sandbox is the target). Each session is
// journaled when it ends.
// ended, if set, is called after each record is journaled (serve bakes
// it into the page).
func (x *Executor) WireTerminals(d *daemon.Server, max int, grace time.Duration, ended func(executor.Record)) {
	d.Terminals = &term.Manager{Open: x.OpenTerminal, Max: max, Grace: grace, OnEnd: func(rec executor.Record) {
		if x.Engine.Journal != nil {
			_ = x.Engine.Journal.Append(rec)
		}
		if ended != nil {
			ended(rec)
		}
	}}
}

// OpenTerminal starts a login shell on host ("" is this machine): what
// the page's terminals and cairn run's [t]erminal open.
func (x *Executor) OpenTerminal(ctx context.Context, host string, cols, rows uint16) (term.Shell, error) {
	if host == "" {
		shell := os.Getenv("SHELL")
		if shell == "" {
			shell = "bash"
		}
		r := &local.Runner{Supervisor: x.supervisor}
		return r.Terminal([]string{shell, "-l"}, os.Environ(), cols, rows)
	}
	sr, ok := x.Targets.get().ssh.(*sshrunner.Runner)
	if !ok || sr == nil {
		return nil, errors.New("ssh is off here: " + x.Targets.get().sshNote)
	}
	return sr.Terminal(ctx, host, cols, rows)
}
