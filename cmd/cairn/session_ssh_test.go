package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestSessionOverSSH: a session on two real sshd hosts keeps each host's
// own state (what one exported, in the directory it went to), the same in
// cairn run and in the exported script (ssh and bash alone).
func TestSessionOverSSH(t *testing.T) {
	s := testrig.SSH(t)
	inv := s.Inventory
	dir := t.TempDir()
	path := filepath.Join(dir, "sess.md")
	md := "---\ntitle: sess\nsession: remote\nparams:\n  - name: H\n    type: hosts\n    default: cp1 cp2\n---\n## one {#one}\n\n" +
		"```bash {#mark target=ssh hosts=H parallel=2}\ncd /tmp\nexport WHO=$(hostname) SEEN=$((40+2))\n```\n\n" +
		"```bash {#read target=ssh hosts=H expect.contains=\"kept\"}\necho \"kept $WHO $SEEN in $PWD on $(hostname)\"\n```\n"
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	wants := []string{"kept cp1 42 in /tmp on cp1", "kept cp2 42 in /tmp on cp2"}
	code, out, errOut := run(t, "run", path, "--yes", "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.db"),
		"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile)
	if code != 0 {
		t.Fatalf("cairn run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("cairn run lacks %q:\n%s", w, out)
		}
	}
	script := filepath.Join(dir, "sess.sh")
	if code, _, e := run(t, "export", path, "-o", script); code != 0 {
		t.Fatal(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--yes", "--ssh-config", inv.SSHConfig, "--log", filepath.Join(dir, "sess.log"))
	cmd.Dir = dir
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the exported script: %v\n%s", err, got)
	}
	for _, w := range wants {
		if !strings.Contains(string(got), w) {
			t.Errorf("the exported script lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(string(got), "cairn-session") {
		t.Errorf("the state line shows:\n%s", got)
	}
}
