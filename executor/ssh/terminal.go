package ssh

import (
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Terminal is an interactive login shell on a host, on a pseudo-terminal
// sshd allocates (ssh -t), for the page's terminal. Closing it closes the
// session and the connection: sshd hangs the terminal up, and the shell
// and its jobs get SIGHUP on the host.
type Terminal struct {
	c    *client
	sess *ssh.Session
	in   io.WriteCloser
	out  io.Reader
	done chan struct{}
	err  error
	once sync.Once
}

// Terminal connects to host (a host value as blocks name them, resolved
// and its key checked as for any block) and starts its login shell on a
// cols x rows terminal. ctx bounds the connecting only.
func (r *Runner) Terminal(ctx context.Context, host string, cols, rows uint16) (*Terminal, error) {
	h, err := r.Resolve(host)
	if err != nil {
		return nil, err
	}
	c, err := r.dial(ctx, h, func(string) {})
	if err != nil {
		return nil, err
	}
	t := &Terminal{c: c, done: make(chan struct{})}
	fail := func(what string, err error) (*Terminal, error) {
		c.Close()
		return nil, fmt.Errorf("%s: %s: %w", h, what, err)
	}
	if t.sess, err = c.NewSession(); err != nil {
		return fail("open a session", err)
	}
	if t.in, err = t.sess.StdinPipe(); err != nil {
		return fail("terminal input", err)
	}
	out, err := t.sess.StdoutPipe()
	if err != nil {
		return fail("terminal output", err)
	}
	t.out = out
	modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
	if err := t.sess.RequestPty("xterm-256color", int(rows), int(cols), modes); err != nil {
		return fail("allocate a terminal (does sshd allow PermitTTY?)", err)
	}
	if err := t.sess.Shell(); err != nil {
		return fail("start the login shell", err)
	}
	stop := make(chan struct{})
	go r.keepAlive(c, stop)
	go func() {
		t.err = t.sess.Wait()
		close(stop)
		close(t.done)
	}()
	return t, nil
}

// Read reads what the terminal shows.
func (t *Terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

// Write types into the terminal.
func (t *Terminal) Write(p []byte) (int, error) { return t.in.Write(p) }

// Resize tells sshd the terminal's new size (window-change).
func (t *Terminal) Resize(cols, rows uint16) error { return t.sess.WindowChange(int(rows), int(cols)) }

// Done is closed when the shell has exited or the connection ended.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// ExitCode is the shell's exit status once Done is closed (-1 when the
// connection ended first or a signal ended it).
func (t *Terminal) ExitCode() int {
	if t.err == nil {
		return 0
	}
	if ee, ok := t.err.(*ssh.ExitError); ok && ee.Signal() == "" {
		return ee.ExitStatus()
	}
	return -1
}

// Close ends the session and the connection.
func (t *Terminal) Close() error {
	t.once.Do(func() {
		_ = t.sess.Close()
		_ = t.c.Close()
		<-t.done
	})
	return nil
}
