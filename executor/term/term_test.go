package term_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/executor/term"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == local.SuperviseArg {
		os.Exit(local.Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// bash opens real shells on pseudo-terminals of this machine, supervised
// as the executor runs them.
func bash(ctx context.Context, host string, cols, rows uint16) (term.Shell, error) {
	r := &local.Runner{Supervisor: []string{os.Args[0], local.SuperviseArg}}
	return r.Terminal([]string{"bash", "--noprofile", "--norc", "-i"}, []string{"PATH=/usr/bin:/bin", "PS1=$ "}, cols, rows)
}

// page is an attached page: what it was sent.
type page struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	exit   chan int
	closed chan struct{}
}

func newPage() *page { return &page{exit: make(chan int, 1), closed: make(chan struct{}, 1)} }

func (p *page) Output(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf.Write(b)
	return nil
}
func (p *page) Exit(code int) { p.exit <- code }
func (p *page) Close()        { p.closed <- struct{}{} }

func (p *page) waitFor(t *testing.T, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		got := p.buf.String()
		p.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %q:\n%s", want, got)
		}
	}
}

// records collects what the manager journals.
type records struct {
	mu   sync.Mutex
	recs []executor.Record
}

func (r *records) add(rec executor.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func (r *records) all() []executor.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]executor.Record(nil), r.recs...)
}

// TestAttachTypeReattach: a page sees what it types answered; a page that
// attaches again (a reload) gets the scrollback first, and the page it
// replaces is dropped; marking the step done ends the terminal and
// journals it as done by hand, with a transcript that masks a secret
// value the live page saw.
func TestAttachTypeReattach(t *testing.T) {
	var recs records
	m := &term.Manager{Open: bash, OnEnd: recs.add}
	defer m.CloseAll()
	red := &executor.Redactor{}
	red.AddValue("s3cr3t-token-value")
	tm, err := m.Start(context.Background(), term.Spec{Runbook: "ccm", Block: "edit-kcm-manifests", Where: "this machine", By: "me@here", Redactor: red}, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	p1 := newPage()
	detach, err := tm.Attach(p1)
	if err != nil {
		t.Fatal(err)
	}
	tm.Write([]byte("echo \"sum-$((40+2))\"; echo s3cr3t-token-value\n"))
	p1.waitFor(t, "sum-42")
	p1.waitFor(t, "\ns3cr3t-token-value") // the live terminal is the reader's own
	p2 := newPage()
	if _, err := tm.Attach(p2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p1.closed:
	case <-time.After(5 * time.Second):
		t.Error("the first page was not dropped when another attached")
	}
	detach() // the first page's connection ends: nothing changes for p2
	p2.waitFor(t, "sum-42")
	tm.Write([]byte("echo \"after-$((1+1))\"\n"))
	p2.waitFor(t, "after-2")
	tm.MarkDone()
	select {
	case code := <-p2.exit:
		if code != 0 && code != 129 && code != -1 {
			t.Logf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the page was not told the shell ended")
	}
	got := recs.all()
	if len(got) != 1 {
		t.Fatalf("records: %+v", got)
	}
	rec := got[0]
	if rec.Status != executor.StatusByHand || rec.Block != "edit-kcm-manifests" || rec.Target != "terminal" || rec.By != "me@here" || rec.Where != "this machine" {
		t.Errorf("record %+v", rec)
	}
	if strings.Contains(rec.Output, "s3cr3t-token-value") || !strings.Contains(rec.Output, executor.Mask) || !strings.Contains(rec.Output, "sum-42") {
		t.Errorf("transcript not redacted, or incomplete:\n%s", rec.Output)
	}
	if m.Get(tm.ID) != nil {
		t.Error("an ended terminal is still listed")
	}
}

// TestCapAndGrace: no more than Max terminals at once; one nobody is
// attached to ends after the grace period and is journaled.
func TestCapAndGrace(t *testing.T) {
	var recs records
	m := &term.Manager{Open: bash, Max: 2, Grace: 300 * time.Millisecond, OnEnd: recs.add}
	defer m.CloseAll()
	var open []*term.Terminal
	for range 2 {
		tm, err := m.Start(context.Background(), term.Spec{Runbook: "r"}, 80, 24)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, tm)
	}
	if _, err := m.Start(context.Background(), term.Spec{Runbook: "r"}, 80, 24); !errors.Is(err, term.ErrTooMany) {
		t.Errorf("a third terminal: %v, want ErrTooMany", err)
	}
	// Attached and detached: the grace period starts then.
	detach, err := open[0].Attach(newPage())
	if err != nil {
		t.Fatal(err)
	}
	detach()
	for _, tm := range open {
		select {
		case <-tm.Ended():
		case <-time.After(10 * time.Second):
			t.Fatal("a terminal nobody was attached to did not end")
		}
	}
	if got := recs.all(); len(got) != 2 || got[0].Status != executor.StatusTerminal {
		t.Errorf("records %+v", got)
	}
	if _, err := m.Start(context.Background(), term.Spec{Runbook: "r"}, 80, 24); err != nil {
		t.Errorf("after two ended, a new one: %v", err)
	}
}
