package local

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// screen collects what a terminal shows.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) read(t *Terminal) {
	b := make([]byte, 4096)
	for {
		n, err := t.Read(b)
		s.mu.Lock()
		s.buf.Write(b[:n])
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (s *screen) waitFor(tb testing.TB, want string) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		got := s.buf.String()
		s.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the terminal never showed %q:\n%s", want, got)
		}
	}
}

// TestTerminal: a shell on a pseudo-terminal under the supervisor answers
// what is typed, knows its size, and when the terminal closes nothing it
// started lives on: not a background job, not a process that started its
// own session, not one that double-forked away.
func TestTerminal(t *testing.T) {
	dir := t.TempDir()
	term, err := supervised().Terminal([]string{"bash", "--noprofile", "--norc", "-i"}, []string{"PATH=/usr/bin:/bin", "PS1=$ "}, 100, 30)
	if err != nil {
		t.Fatal(err)
	}
	var s screen
	go s.read(term)
	if _, err := term.Write([]byte("[ -t 0 ] && echo tty-$((6*7)); stty size\n")); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, "tty-42")
	s.waitFor(t, "30 100")
	if err := term.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("stty size\n"))
	s.waitFor(t, "40 120")
	// (The echo of what is typed must not match: "st""arted".)
	script := strings.ReplaceAll(escapee(dir), "echo started", `echo "st""arted"`)
	term.Write([]byte(strings.ReplaceAll(strings.TrimSpace(script), "\n", "; ") + "\n"))
	s.waitFor(t, "\nstarted")
	ps := pids(t, dir)
	defer killAllOf(ps)
	start := time.Now()
	term.Close()
	select {
	case <-term.Done():
	default:
		t.Fatal("Close returned before the shell ended")
	}
	if living := gone(ps, 5*time.Second); len(living) > 0 {
		t.Errorf("still running after the terminal closed: %v", living)
	}
	t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
}
