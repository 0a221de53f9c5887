package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
)

// Terminal is an interactive shell on a pseudo-terminal of this machine,
// for the page's terminal. It runs under the supervisor when the Runner
// has one, so that the shell and everything started in it end when the
// terminal closes and when this process dies, even by kill -9.
type Terminal struct {
	ptmx *os.File
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	once sync.Once
}

// Terminal starts argv (a login shell) on a new pseudo-terminal of cols x
// rows, in its own session with the terminal as its controlling one.
func (r *Runner) Terminal(argv, env []string, cols, rows uint16) (*Terminal, error) {
	if len(argv) == 0 {
		return nil, errors.New("terminal: no shell to start")
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open a pseudo-terminal: %w", err)
	}
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size the pseudo-terminal: %w", err)
	}
	env = append(env[:len(env):len(env)], "TERM=xterm-256color")
	argv, env = r.supervised(argv, env, 2*time.Second, "CAIRN_SUPERVISE_TTY=1")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, r.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if len(r.Supervisor) > 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	if err := start(cmd); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	t := &Terminal{ptmx: ptmx, cmd: cmd, done: make(chan struct{})}
	go func() {
		t.err = cmd.Wait()
		close(t.done)
	}()
	return t, nil
}

// Read reads what the terminal shows.
func (t *Terminal) Read(p []byte) (int, error) { return t.ptmx.Read(p) }

// Write types into the terminal.
func (t *Terminal) Write(p []byte) (int, error) { return t.ptmx.Write(p) }

// Resize sets the terminal's size; the shell gets SIGWINCH.
func (t *Terminal) Resize(cols, rows uint16) error {
	return pty.Setsize(t.ptmx, &pty.Winsize{Cols: cols, Rows: rows})
}

// Done is closed when the shell (its supervisor) has exited.
func (t *Terminal) Done() <-chan struct{} { return t.done }

// ExitCode is the shell's exit status once Done is closed (-1 when a
// signal ended it).
func (t *Terminal) ExitCode() int {
	var ee *exec.ExitError
	switch {
	case t.err == nil:
		return 0
	case errors.As(t.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// Close hangs the terminal up: the session's processes get SIGHUP (the
// supervisor then ends every process of the shell's), and whatever is
// left after a grace period is killed.
func (t *Terminal) Close() error {
	t.once.Do(func() {
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGHUP)
		t.ptmx.Close()
		select {
		case <-t.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
			<-t.done
		}
	})
	return nil
}
