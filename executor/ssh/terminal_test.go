package ssh

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTerminal: a login shell on a real sshd host behind a pseudo-terminal:
// it answers what is typed on that host, follows a resize, and when the
// terminal closes its background job ends with it (the host hangs the
// terminal up).
func TestTerminal(t *testing.T) {
	_, r := rig(t)
	term, err := r.Terminal(ctxT(t, 30*time.Second), "cp1", 90, 20)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := term.Read(b)
			mu.Lock()
			screen.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got := screen.String()
			mu.Unlock()
			if strings.Contains(got, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the terminal never showed %q:\n%s", want, got)
			}
		}
	}
	// What is typed is echoed: the answers are built so the echo cannot
	// match them.
	term.Write([]byte(`[ -t 0 ] && echo "on-$(hostname)-$((6*7))"; stty size` + "\n"))
	waitFor("on-cp1-42")
	waitFor("20 90")
	if err := term.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("stty size\n"))
	waitFor("43 132")
	marker := fmt.Sprintf("cairn-ssh-term-%d", time.Now().UnixNano())
	term.Write([]byte(fmt.Sprintf("(exec -a %s sleep 300) & echo \"bg-$((1+1))\"\n", marker)))
	waitFor("bg-2")
	term.Close()
	select {
	case <-term.Done():
	default:
		t.Fatal("Close returned before the session ended")
	}
	assertNoProcess(t, marker)
}
