package executor_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
)

// TestReapCommands runs the reaper as the wrappers do (a cairn_reap
// function in the shell that ran the block) on this machine's /proc: the
// run's processes die, those that left for a session of their own
// included; another run's process and the reaping shell live. Both ways of
// finding them run: GNU grep -z, and the loop for a grep without -z (a grep
// in front of PATH that refuses it).
func TestReapCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noZGrep bool
	}{{"grep -z", false}, {"grep without -z", true}} {
		t.Run(tc.name, func(t *testing.T) {
			session, other := executor.NewID(), executor.NewID()
			dir := t.TempDir()
			path := os.Getenv("PATH")
			if tc.noZGrep {
				real, err := exec.LookPath("grep")
				if err != nil {
					t.Skip("no grep")
				}
				fake := "#!/bin/sh\nfor a; do case $a in -*z*) echo \"grep: invalid option -- 'z'\" >&2; exit 2;; esac; done\nexec " + real + " \"$@\"\n"
				if err := os.WriteFile(filepath.Join(dir, "grep"), []byte(fake), 0o755); err != nil {
					t.Fatal(err)
				}
				path = dir + ":" + path
			}
			pids := filepath.Join(dir, "pids")
			script := fmt.Sprintf(`cairn_reap() { %s; } 2>/dev/null
CAIRN_SESSION=%s setsid sleep 300 >/dev/null 2>&1 & echo $! >>%[3]s
CAIRN_SESSION=%[2]s sleep 300 >/dev/null 2>&1 & echo $! >>%[3]s
CAIRN_SESSION=%[4]s sleep 300 >/dev/null 2>&1 & echo $! >>%[3]s
sleep 0.3
cairn_reap
echo alive`, executor.ReapCommands(session), session, pids, other)
			cmd := exec.Command("/bin/sh", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+path)
			out, err := cmd.CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "alive" {
				t.Fatalf("the reaping shell: %v, %q; want it to go on", err, out)
			}
			b, err := os.ReadFile(pids)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				got = append(got, n)
			}
			if len(got) != 3 {
				t.Fatalf("pids %v", got)
			}
			t.Cleanup(func() { _ = syscall.Kill(got[2], syscall.SIGKILL) })
			deadline := time.Now().Add(5 * time.Second)
			for _, p := range got[:2] {
				for alive(p) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if alive(p) {
					t.Errorf("process %d of the run outlived the reaper", p)
				}
			}
			if !alive(got[2]) {
				t.Errorf("another run's process (%d) was killed", got[2])
			}
		})
	}
}

// alive: the process exists and is not a zombie waiting for its parent.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
