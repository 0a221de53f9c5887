package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	xterm "golang.org/x/term"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/executor/term"
	"github.com/cairn-dev/cairn/runbook"
)

// runShells opens cairn run's terminals at manual steps: the reader's
// shell here or on a host the runbook names, in this terminal, recorded in
// the journal like the page's.
type runShells struct {
	x     *targets.Executor
	rb    *runbook.Runbook
	in    *os.File // the terminal, in raw mode while a shell runs
	out   io.Writer
	terms term.Manager
}

func newRunShells(x *targets.Executor, rb *runbook.Runbook, in *os.File, out io.Writer) *runShells {
	s := &runShells{x: x, rb: rb, in: in, out: out}
	s.terms = term.Manager{Open: x.OpenTerminal, Max: 1, Grace: time.Hour}
	return s
}

// stdoutConn shows a shell's output in this terminal.
type stdoutConn struct {
	w    io.Writer
	exit chan int
}

func (c *stdoutConn) Output(b []byte) error { _, err := c.w.Write(b); return err }
func (c *stdoutConn) Exit(code int)         { c.exit <- code }
func (c *stdoutConn) Close()                {}

// open runs a shell on host ("" here) for the manual step p until the
// reader leaves it, then asks whether the step is done; the session is
// journaled, as done by hand when it is. It reports whether it is done.
func (s *runShells) open(ctx context.Context, p *executor.Prompt, host string, ask func(string) string) (bool, error) {
	spec, err := term.NewSpec(s.rb, p.Block, host, p.Hosts, s.x.Engine.Redactor(s.rb, p.Values))
	if err != nil {
		return false, err
	}
	where := spec.Where
	cols, rows, err := xterm.GetSize(int(s.in.Fd()))
	if err != nil {
		cols, rows = 80, 24
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t, err := s.terms.Start(octx, spec, uint16(cols), uint16(rows))
	cancel()
	if err != nil {
		return false, fmt.Errorf("open a terminal on %s: %w", where, err)
	}
	fmt.Fprintf(s.out, "  a shell on %s: do the step, then leave it (exit or Ctrl+D); the session is recorded\n", where)
	conn := &stdoutConn{w: s.out, exit: make(chan int, 1)}
	state, err := xterm.MakeRaw(int(s.in.Fd()))
	if err != nil {
		t.Close()
		return false, err
	}
	detach, err := t.Attach(conn)
	if err != nil {
		_ = xterm.Restore(int(s.in.Fd()), state)
		return false, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.typeInto(t, stop) })
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	wg.Go(func() {
		for {
			select {
			case <-winch:
				if c, r, err := xterm.GetSize(int(s.in.Fd())); err == nil {
					_ = t.Resize(uint16(c), uint16(r))
				}
			case <-stop:
				return
			}
		}
	})
	select {
	case <-conn.exit:
	case <-ctx.Done():
		t.Close()
	}
	close(stop)
	wg.Wait()
	signal.Stop(winch)
	detach()
	_ = xterm.Restore(int(s.in.Fd()), state)
	<-t.Ended()
	done := ask("\r\n  was the step done in that shell? [Y/n] ")
	yes := done == "" || strings.HasPrefix(strings.ToLower(done), "y")
	if yes {
		t.SetByHand()
	}
	if j := s.x.Engine.Journal; j != nil {
		if err := j.Append(t.Record()); err != nil {
			fmt.Fprintf(s.out, "  journal: %v\n", err)
		}
	}
	return yes, ctx.Err()
}

// typeInto passes what is typed here to the shell until stop. It polls,
// so that no read is left waiting on the terminal after the shell ends
// (it would take the reader's next answer).
func (s *runShells) typeInto(t *term.Terminal, stop <-chan struct{}) {
	fd := int(s.in.Fd())
	buf := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return
		default:
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 100)
		if err != nil && err != unix.EINTR {
			return
		}
		if n <= 0 || fds[0].Revents&unix.POLLIN == 0 {
			continue
		}
		m, err := unix.Read(fd, buf)
		if m > 0 {
			if _, werr := t.Write(buf[:m]); werr != nil {
				return
			}
		}
		if err != nil && err != unix.EAGAIN && err != unix.EINTR {
			return
		}
	}
}
