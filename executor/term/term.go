// Package term keeps the executor's terminals: a shell on a
// pseudo-terminal, on this machine or on a runbook's host, that the page
// attaches to (and re-attaches to after a reload), bounded in number, ended
// when nobody is attached for a grace period, and recorded: a terminal
// session is journaled like a run, with its transcript redacted of the
// runbook's secret values.
package term

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Shell is one running shell on a pseudo-terminal (local.Terminal,
// ssh.Terminal).
type Shell interface {
	io.ReadWriter
	Resize(cols, rows uint16) error
	Done() <-chan struct{}
	ExitCode() int
	Close() error
}

// Opener starts a shell on host ("" is this machine) of cols x rows.
type Opener func(ctx context.Context, host string, cols, rows uint16) (Shell, error)

// Defaults.
const (
	DefaultMax   = 4
	DefaultGrace = 30 * time.Second
	// scrollback is what a page that attaches (again) is sent first.
	scrollback = 256 << 10
	// maxTranscript bounds the transcript kept for the journal.
	maxTranscript = 1 << 20
)

// ErrTooMany: the cap on open terminals is reached.
var ErrTooMany = errors.New("too many terminals open")

// Spec says what a terminal is for.
type Spec struct {
	Runbook string // slug
	Path    string
	Step    string
	Block   string // the manual block it was opened from; "" from the target panel
	Hash    string // that block's hash
	Host    string // "" is this machine
	Where   string // the host as a reader reads it
	By      string // user@machine
	// Redactor hides secret values in the transcript (the live terminal
	// shows what the shell prints: it is the reader's own).
	Redactor *executor.Redactor
}

// ErrHostNotNamed: a terminal was asked for on a host the runbook does
// not name.
var ErrHostNotNamed = errors.New("not a host the runbook names")

// NewSpec is a terminal of rb for block b (a manual step; nil for none) on
// host, "" for this machine, else one of named (the hosts the runbook's
// host parameters name: executor.HostsNamed), by whoever runs this.
func NewSpec(rb *runbook.Runbook, b *runbook.Block, host string, named []string, red *executor.Redactor) (Spec, error) {
	spec := Spec{Runbook: rb.Slug, Path: rb.Path, Where: "this machine", By: By(), Redactor: red}
	if b != nil {
		spec.Block, spec.Hash = b.ID, b.Hash
		if b.Step != nil {
			spec.Step = b.Step.ID
		}
	}
	if host != "" {
		h := runbook.CanonicalHost(host)
		if !slices.Contains(named, h) {
			return Spec{}, fmt.Errorf("host %q: %w (runbook %q names %s); a terminal opens on this machine or on one of those",
				host, ErrHostNotNamed, rb.Slug, strings.Join(named, ", "))
		}
		spec.Host, spec.Where = h, h+" (ssh)"
	}
	return spec, nil
}

// Manager keeps the open terminals.
type Manager struct {
	Open  Opener
	Max   int           // at most this many at once; default DefaultMax
	Grace time.Duration // a terminal nobody is attached to ends after this; default DefaultGrace
	// OnEnd, if set, gets each ended terminal's record (the journal).
	OnEnd func(executor.Record)

	mu    sync.Mutex
	terms map[string]*Terminal
	wg    sync.WaitGroup
}

// Terminal is one open terminal.
type Terminal struct {
	ID      string
	Spec    Spec
	Started time.Time

	m     *Manager
	shell Shell

	mu         sync.Mutex
	scroll     []byte // the last scrollback bytes shown, for a page that attaches
	transcript bytes.Buffer
	truncated  bool
	red        *executor.LineRedactor
	att        *attachment
	idle       *time.Timer // runs while nobody is attached
	byHand     bool
	ended      chan struct{}
	endOnce    sync.Once
	closing    bool
}

// Start opens a shell for spec; nobody is attached until Attach.
func (m *Manager) Start(ctx context.Context, spec Spec, cols, rows uint16) (*Terminal, error) {
	m.mu.Lock()
	if m.terms == nil {
		m.terms = map[string]*Terminal{}
	}
	if max := m.max(); len(m.terms) >= max {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w (%d at once); close one first", ErrTooMany, max)
	}
	t := &Terminal{ID: executor.NewID(), Spec: spec, Started: time.Now(), m: m, ended: make(chan struct{})}
	m.terms[t.ID] = t // holds the place while the shell starts
	m.mu.Unlock()
	shell, err := m.Open(ctx, spec.Host, max(cols, 20), max(rows, 5))
	if err != nil {
		m.mu.Lock()
		delete(m.terms, t.ID)
		m.mu.Unlock()
		return nil, err
	}
	t.shell = shell
	t.red = executor.NewLineRedactor(spec.Redactor, t.keep)
	t.idle = time.AfterFunc(m.grace(), func() { t.Close() })
	m.wg.Add(1)
	go t.pump()
	return t, nil
}

func (m *Manager) max() int {
	if m.Max > 0 {
		return m.Max
	}
	return DefaultMax
}

func (m *Manager) grace() time.Duration {
	if m.Grace > 0 {
		return m.Grace
	}
	return DefaultGrace
}

// Get returns the open terminal id, or nil.
func (m *Manager) Get(id string) *Terminal {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.terms[id]
	if t == nil || t.shell == nil {
		return nil
	}
	return t
}

// List returns the open terminals.
func (m *Manager) List() []*Terminal {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Terminal
	for _, t := range m.terms {
		if t.shell != nil {
			out = append(out, t)
		}
	}
	return out
}

// CloseAll ends every terminal and waits until each is recorded.
func (m *Manager) CloseAll() {
	for _, t := range m.List() {
		t.Close()
	}
	m.wg.Wait()
}

// pump copies the shell's output to the scrollback, the transcript and
// whoever is attached, until the shell ends; then it records the session.
func (t *Terminal) pump() {
	defer t.m.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := t.shell.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			t.mu.Lock()
			t.scroll = append(t.scroll, b...)
			if over := len(t.scroll) - scrollback; over > 0 {
				t.scroll = append(t.scroll[:0], t.scroll[over:]...)
			}
			t.red.Write(b)
			att := t.att
			t.mu.Unlock()
			if att != nil {
				att.send(b)
			}
		}
		if err != nil {
			break
		}
	}
	// The output ended: the shell exited, or Close hung it up.
	t.shell.Close()
	t.mu.Lock()
	t.red.Flush()
	att := t.att
	t.att = nil
	t.idle.Stop()
	t.mu.Unlock()
	t.m.mu.Lock()
	delete(t.m.terms, t.ID)
	t.m.mu.Unlock()
	// Journaled before the page hears that the shell ended: the page then
	// reads the results, and they must have this session.
	if t.m.OnEnd != nil {
		t.m.OnEnd(t.Record())
	}
	if att != nil {
		att.exit(t.shell.ExitCode())
	}
	t.endOnce.Do(func() { close(t.ended) })
}

// keep appends redacted output to the transcript, up to its bound.
func (t *Terminal) keep(b []byte) {
	if room := maxTranscript - t.transcript.Len(); room < len(b) {
		b = b[:max(room, 0)]
		t.truncated = true
	}
	t.transcript.Write(b)
}

// Ended is closed when the terminal has ended and been recorded.
func (t *Terminal) Ended() <-chan struct{} { return t.ended }

// Record is the journal's record of the session (so far).
func (t *Terminal) Record() executor.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	status := executor.StatusTerminal
	if t.byHand {
		status = executor.StatusByHand
	}
	where := t.Spec.Where
	if where == "" {
		where = t.Spec.Host
	}
	host := t.Spec.Host
	if host == "" {
		host = "local"
	}
	exit := 0
	select {
	case <-t.shell.Done():
		exit = t.shell.ExitCode()
	default:
	}
	return executor.Record{
		ID: t.ID, Runbook: t.Spec.Runbook, Path: t.Spec.Path, Block: t.Spec.Block, Step: t.Spec.Step, Hash: t.Spec.Hash,
		Target: "terminal", Where: where, Status: status, By: t.Spec.By,
		Hosts: []executor.HostRecord{{Host: host, Exit: exit}},
		Start: t.Started, Duration: time.Since(t.Started).Seconds(),
		Output: t.transcript.String(), Truncated: t.truncated,
	}
}

// SetByHand marks the session as the one in which its manual step was
// done, without ending it (cairn run asks once the shell has ended).
func (t *Terminal) SetByHand() {
	t.mu.Lock()
	t.byHand = true
	t.mu.Unlock()
}

// By is who this process works for, as user@machine: a terminal
// session's record.
func By() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	h, _ := os.Hostname()
	return name + "@" + h
}

// MarkDone records that the reader did the terminal's manual step here,
// and ends the terminal.
func (t *Terminal) MarkDone() {
	t.mu.Lock()
	t.byHand = true
	t.mu.Unlock()
	t.Close()
}

// Close hangs the terminal up and waits until it is recorded.
func (t *Terminal) Close() {
	t.mu.Lock()
	first := !t.closing
	t.closing = true
	t.mu.Unlock()
	if first {
		t.shell.Close()
	}
	<-t.ended
}

// Write types into the shell.
func (t *Terminal) Write(p []byte) (int, error) { return t.shell.Write(p) }

// Resize sets the terminal's size.
func (t *Terminal) Resize(cols, rows uint16) error {
	if cols == 0 || rows == 0 || cols > 1000 || rows > 1000 {
		return fmt.Errorf("terminal size %dx%d is out of range", cols, rows)
	}
	return t.shell.Resize(cols, rows)
}

// Conn is one attached page: what the shell prints goes to Output, in
// order; Exit tells it the shell ended (then nothing more is sent).
type Conn interface {
	Output(b []byte) error
	Exit(code int)
	Close() // drops the page's connection (another page attached instead)
}

// attachment feeds one Conn from its own goroutine, so that a slow page
// slows the shell (the queue is bounded) without holding t.mu.
type attachment struct {
	c    Conn
	q    chan []byte
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func (a *attachment) run() {
	defer close(a.done)
	for {
		select {
		case b, ok := <-a.q:
			if !ok {
				return // the shell ended: all of it was sent
			}
			if a.c.Output(b) != nil {
				a.close()
				return
			}
		case <-a.stop:
			return
		}
	}
}

// send queues b (pump's goroutine only).
func (a *attachment) send(b []byte) {
	select {
	case a.q <- b:
	case <-a.stop:
	}
}

func (a *attachment) close() { a.once.Do(func() { close(a.stop) }) }

// exit sends what is queued, then the exit status (pump's goroutine, after
// its last send).
func (a *attachment) exit(code int) {
	close(a.q)
	<-a.done
	a.c.Exit(code)
}

// Attach makes c the terminal's page: it is sent the scrollback, then
// everything the shell prints. A page already attached is dropped (a
// reload attaches again). detach ends the attachment (the page went away):
// if nobody attaches within the grace period, the terminal ends.
func (t *Terminal) Attach(c Conn) (detach func(), err error) {
	t.mu.Lock()
	select {
	case <-t.ended:
		t.mu.Unlock()
		return nil, errors.New("the terminal has ended")
	default:
	}
	old := t.att
	a := &attachment{c: c, q: make(chan []byte, 64), stop: make(chan struct{}), done: make(chan struct{})}
	if len(t.scroll) > 0 {
		a.q <- append([]byte(nil), t.scroll...)
	}
	t.att = a
	t.idle.Stop()
	t.mu.Unlock()
	if old != nil {
		old.close()
		old.c.Close()
	}
	go a.run()
	return func() {
		t.mu.Lock()
		if t.att == a {
			t.att = nil
			if !t.closing {
				t.idle.Reset(t.m.grace())
			}
		}
		t.mu.Unlock()
		a.close()
	}, nil
}
