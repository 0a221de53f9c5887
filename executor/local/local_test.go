package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

type buf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *buf) Output(_ string, p []byte) { s.mu.Lock(); s.b.Write(p); s.mu.Unlock() }
func (s *buf) Event(executor.Event)      {}
func (s *buf) String() string            { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func job(script string, env map[string]string) *executor.Job {
	return &executor.Job{Block: &runbook.Block{ID: "b", Content: script}, Env: env, RunID: "r1"}
}

func TestRunOutputAndExit(t *testing.T) {
	for _, tc := range []struct {
		script string
		env    map[string]string
		exit   int
		out    string
	}{
		{"echo hello; echo err >&2", nil, 0, "hello\nerr\n"},
		{"exit 3", nil, 3, ""},
		{"false; echo not reached", nil, 1, ""},         // -e
		{"echo $UNSET_VAR", nil, 1, "unbound variable"}, // -u
		{"false | true; echo not reached", nil, 1, ""},  // pipefail
		{`printf '%s' "$V"`, map[string]string{"V": `x"; rm -rf ~ #`}, 0, `x"; rm -rf ~ #`},
		{`printf '%s' "$V"`, map[string]string{"V": "$(touch /tmp/cairn-pwned) `id` ; | & \n'"}, 0, "$(touch /tmp/cairn-pwned) `id` ; | & \n'"},
		{`echo "$CAIRN_RUN_ID $CAIRN_BLOCK"`, nil, 0, "r1 b\n"},
	} {
		var out buf
		res, err := (&Runner{}).Run(context.Background(), job(tc.script, tc.env), &out)
		if err != nil || len(res) != 1 {
			t.Fatalf("%q: %v", tc.script, err)
		}
		if res[0].Exit != tc.exit || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%q: exit %d out %q; want %d %q", tc.script, res[0].Exit, out.String(), tc.exit, tc.out)
		}
	}
	if _, err := os.Stat("/tmp/cairn-pwned"); err == nil {
		t.Fatal("a parameter value was executed")
	}
}

// TestTimeoutKillsGroup: a script that starts background children and hangs
// is killed as a whole when its context ends; nothing survives it.
func TestTimeoutKillsGroup(t *testing.T) {
	marker := fmt.Sprintf("cairn-test-%d", time.Now().UnixNano())
	script := fmt.Sprintf(`(exec -a %[1]s sleep 300) & (exec -a %[1]s sleep 300) & echo started; wait`, marker)
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	var out buf
	start := time.Now()
	res, _ := (&Runner{Grace: 200 * time.Millisecond}).Run(ctx, job(script, nil), &out)
	if !errors.Is(res[0].Err, executor.ErrTimeout) || res[0].Exit != -1 {
		t.Fatalf("result = %+v", res[0])
	}
	t.Logf("stopped after %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out.String(), "started") {
		t.Errorf("output = %q", out.String())
	}
	assertNoProcess(t, marker)
}

// TestBackgroundChildKilledAfterExit: a child left running when bash exits
// does not outlive the run (no orphans).
func TestBackgroundChildKilledAfterExit(t *testing.T) {
	marker := fmt.Sprintf("cairn-orphan-%d", time.Now().UnixNano())
	script := fmt.Sprintf(`(exec -a %s sleep 300) >/dev/null 2>&1 & echo done`, marker)
	var out buf
	res, _ := (&Runner{Grace: 200 * time.Millisecond}).Run(context.Background(), job(script, nil), &out)
	if res[0].Exit != 0 {
		t.Fatalf("exit %d", res[0].Exit)
	}
	assertNoProcess(t, marker)
}

func assertNoProcess(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived the run: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
