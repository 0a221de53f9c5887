package local

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// The test binary doubles as cairn's __supervise and as an executor that
// the tests kill with SIGKILL.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "__supervise" {
		os.Exit(Supervise(os.Args[2:]))
	}
	if script := os.Getenv("CAIRN_TEST_TERMINAL"); script != "" {
		// An executor with a terminal open, the script typed into it.
		term, err := supervised().Terminal([]string{"bash", "--noprofile", "--norc", "-i"}, []string{"PATH=/usr/bin:/bin"}, 80, 24)
		if err != nil {
			panic(err)
		}
		go func() { _, _ = io.Copy(io.Discard, term) }()
		term.Write([]byte(script + "\n"))
		select {}
	}
	if script := os.Getenv("CAIRN_TEST_EXECUTOR"); script != "" {
		r := &Runner{Supervisor: []string{os.Args[0], "__supervise"}}
		r.Run(context.Background(), job(script, nil), &buf{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// escapee is a script that leaves three processes behind: one in the
// background, one that started a session of its own (setsid), and one
// that double-forked away from bash. Each writes its pid to dir.
func escapee(dir string) string {
	return fmt.Sprintf(`
sleep 300 & echo $! > %[1]s/bg
setsid -f sh -c 'echo $$ > %[1]s/setsid; exec sleep 300'
( ( sh -c 'echo $$ > %[1]s/double; exec sleep 300' & ) & )
while [ ! -s %[1]s/setsid ] || [ ! -s %[1]s/double ] || [ ! -s %[1]s/bg ]; do sleep 0.02; done
echo started
`, dir)
}

func pids(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, n := range []string{"bg", "setsid", "double"} {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = pid
	}
	return out
}

// gone waits (bounded) for the processes to end and reports the living.
func gone(ps map[string]int, within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		var living []string
		for n, pid := range ps {
			if testrig.ProcessAlive(pid) {
				living = append(living, n)
			}
		}
		if len(living) == 0 || time.Now().After(deadline) {
			return living
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func killAllOf(ps map[string]int) {
	for _, pid := range ps {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

func supervised() *Runner {
	return &Runner{Supervisor: []string{os.Args[0], "__supervise"}, Grace: 500 * time.Millisecond}
}

// TestRunLeavesNoProcesses: after a normal exit, a cancel and a timeout,
// none of the three escapees lives on (the review: 7 of 7 survived).
func TestRunLeavesNoProcesses(t *testing.T) {
	for _, how := range []string{"exit", "cancel", "timeout"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			script := escapee(dir)
			if how != "exit" {
				script += "sleep 300\n"
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if how == "timeout" {
				ctx, cancel = context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
			}
			var out buf
			done := make(chan struct{})
			go func() {
				defer close(done)
				supervised().Run(ctx, job(script, nil), &out)
			}()
			if how == "cancel" {
				for !strings.Contains(out.String(), "started") {
					time.Sleep(20 * time.Millisecond)
				}
				cancel()
			}
			<-done
			ps := pids(t, dir)
			defer killAllOf(ps)
			if living := gone(ps, 5*time.Second); len(living) > 0 {
				t.Errorf("still running after %s: %v", how, living)
			}
		})
	}
}

// TestExecutorKill9LeavesNoProcesses: the executor (a child process here)
// dies by SIGKILL while a block runs; the block's processes die too (the
// review: 30 of 30 kept running).
func TestExecutorKill9LeavesNoProcesses(t *testing.T) {
	t.Run("block", func(t *testing.T) {
		kill9(t, func(dir string) string {
			return "CAIRN_TEST_EXECUTOR=" + escapee(dir) + "echo ready > " + dir + "/ready; sleep 300\n"
		})
	})
	// A terminal's shell and what was started in it end with the
	// executor too.
	t.Run("terminal", func(t *testing.T) {
		kill9(t, func(dir string) string {
			return "CAIRN_TEST_TERMINAL=" + strings.ReplaceAll(strings.TrimSpace(escapee(dir)), "\n", "; ") + "; echo ready > " + dir + "/ready; sleep 300"
		})
	})
}

// kill9 starts this test binary as an executor with env(dir) and kills it
// with SIGKILL once dir/ready exists; nothing the script started may live
// on.
func kill9(t *testing.T, env func(dir string) string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env(dir))
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go bufio.NewReader(stderr).WriteTo(os.Stderr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the block did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ps := pids(t, dir)
	defer killAllOf(ps)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if living := gone(ps, 10*time.Second); len(living) > 0 {
		t.Errorf("still running after the executor's kill -9: %v", living)
	}
}
