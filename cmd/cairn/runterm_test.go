package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestRunTerminalAtManualStep: cairn run at a terminal offers a shell at a
// manual step, here or on a host the runbook names (a real sshd host):
// the reader does the step in it, leaves it, says it is done, and the run
// goes on; the session is journaled as done by hand, with its transcript.
func TestRunTerminalAtManualStep(t *testing.T) {
	s := testrig.SSH(t)
	inv := s.Inventory
	dir := t.TempDir()
	path := filepath.Join(dir, "byhand.md")
	md := "---\ntitle: by hand\nslug: byhand\nparams:\n  - name: NODE\n    type: host\n    default: cp1\n---\n## s {#s}\n\n" +
		"```text {#edit target=manual}\nEdit the file on $NODE.\n```\n\n" +
		"```bash {#after target=local expect.contains=after}\necho after\n```\n"
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, open, typed, want, where string }{
		{"here", "t", `echo "sum-$((40+2))"`, "sum-42", "this machine"},
		{"on cp1", "t cp1", `echo "on-$(hostname)-$((6*7))"`, "on-cp1-42", "cp1 (ssh)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "j.db")
			cmd := exec.Command(os.Args[0], "run", path, "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", journal,
				"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile)
			cmd.Env = append(os.Environ(), "CAIRN_TEST_MAIN=1", "SHELL=/bin/bash", "HOME="+t.TempDir())
			tty, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer tty.Close()
			out := &syncBuffer{}
			go io.Copy(out, tty)
			waitFor := func(want string) {
				t.Helper()
				for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), want); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						t.Fatalf("never showed %q:\n%s", want, out.String())
					}
				}
			}
			waitFor("Start?")
			tty.Write([]byte("y\r"))
			waitFor("t for a shell here, or t HOST on cp1")
			tty.Write([]byte(tc.open + "\r"))
			waitFor("a shell on " + tc.where)
			tty.Write([]byte(tc.typed + "\r"))
			waitFor(tc.want)
			tty.Write([]byte("exit\r"))
			waitFor("was the step done in that shell?")
			tty.Write([]byte("y\r"))
			waitFor("done by hand in the shell")
			if err := cmd.Wait(); err != nil {
				t.Fatalf("cairn run: %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "1 verified") {
				t.Errorf("the run did not go on:\n%s", out.String())
			}
			j, err := executor.OpenJournal(journal)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			recs, err := j.Records("byhand", 10)
			if err != nil {
				t.Fatal(err)
			}
			var rec executor.Record
			for _, r := range recs {
				if r.Target == "terminal" {
					rec = r
				}
			}
			if rec.Status != executor.StatusByHand || rec.Block != "edit" || rec.Where != tc.where || !strings.Contains(rec.Output, tc.want) || rec.By == "" {
				t.Errorf("the journaled session: %+v", rec)
			}
		})
	}
}
