package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// requiresRunbook needs a binary no machine has, here and on its hosts, and
// an API resource the sandbox does not serve; its first block would leave
// a file behind if it ran.
func requiresRunbook(marker string) string {
	return `---
title: Requires
kube:
  contexts: [cairn-sandbox]
requires:
  binaries: [bash, cairn-no-such-tool]
  hosts:
    NODES: [hostname, cairn-no-such-host-tool]
  resources: [leases.coordination.k8s.io, ciliumnodes.cilium.io]
params:
  - name: NODES
    type: hosts
    default: cp0 w0
---

# Requires

## 1. First {#first}

` + "```bash {#first-block target=local}\ntouch " + marker + "\n```\n"
}

// TestRequiresCheckedFirst: the daemon (the page's path), cairn run and an
// exported script all check requires before the first block, against the
// sandbox's real hosts and apiserver, and name everything missing in one
// message; the block never runs.
func TestRequiresCheckedFirst(t *testing.T) {
	k := testrig.Kube(t)
	s := testrig.SSH(t)
	inv := s.Inventory
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	content := contentDir(t, map[string]string{"requires.md": requiresRunbook(marker)})
	want := []string{
		"not installed on this machine: cairn-no-such-tool",
		"not installed on cp0: cairn-no-such-host-tool", "not installed on w0: cairn-no-such-host-tool",
		"API resources not served", "ciliumnodes.cilium.io",
	}
	check := func(where, msg string) {
		t.Helper()
		t.Logf("%s said:\n%s", where, msg)
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the message lacks %q:\n%s", where, w, msg)
			}
		}
		if strings.Contains(msg, "leases.coordination.k8s.io") {
			t.Errorf("%s: a served resource is reported missing:\n%s", where, msg)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the first block ran", where)
		}
	}
	execFlags := []string{"--kubeconfig", k.Kubeconfig, "--context", k.Context,
		"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile}

	// 1. The daemon: what Run on the page does.
	d := startDaemon(t, content, execFlags...)
	rec, _ := d.run(t, "requires", "first-block", nil, false)
	if rec.Status == "verified" || len(rec.Reasons) != 1 {
		t.Errorf("daemon: %s %q", rec.Status, rec.Reasons)
	}
	check("daemon", strings.Join(rec.Reasons, "\n"))

	// 2. cairn run.
	code, out, errOut := run(t, append([]string{"run", filepath.Join(content, "requires.md"), "--content", content, "--sandbox", "no",
		"--journal", filepath.Join(dir, "j.db")}, execFlags...)...)
	if code != exitFailure {
		t.Errorf("cairn run: exit %d", code)
	}
	check("cairn run", out+errOut)

	// 3. The exported script.
	if _, err := exec.LookPath("kubectl"); err != nil {
		if testrig.InCI() {
			t.Fatal("kubectl is required under CI=true")
		}
		t.Skip("no kubectl for the exported script")
	}
	script := filepath.Join(dir, "requires.sh")
	if code, _, e := run(t, "export", filepath.Join(content, "requires.md"), "-o", script); code != 0 {
		t.Fatal(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--kubeconfig", k.Kubeconfig, "--context", k.Context, "--log", filepath.Join(dir, "r.log"))
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "CAIRN_SSH_CONFIG=" + inv.SSHConfig}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err == nil {
		t.Errorf("the exported script passed:\n%s", o.String())
	}
	check("exported script", o.String()+e.String())
}
