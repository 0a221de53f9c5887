package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// followRunbook has a kube block and an ssh block on the sandbox's hosts.
const followRunbook = `---
title: Follow
params:
  - name: HOSTS
    type: hosts
    default: cp0 w0
---

# Follow

## 1. Cluster {#cluster}

` + "```text {#ns target=kube action=get kind=Namespace name=default}\n```" + `

## 2. Hosts {#hosts}

` + "```bash {#host target=ssh hosts=HOSTS}\nhostname\n```\n"

// health reads GET /api/health's targets.
func (d *realDaemon) targets(t *testing.T) targets.TargetsView {
	t.Helper()
	code, body, _ := d.call(t, "GET", "/api/health", nil, nil)
	if code != 200 {
		t.Fatalf("health: %d %s", code, body)
	}
	var h struct{ Targets targets.TargetsView }
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("health: %v: %s", err, body)
	}
	return h.Targets
}

// waitTargets polls health until ok holds (bounded), recording every
// sandbox state seen.
func (d *realDaemon) waitTargets(t *testing.T, within time.Duration, what string, ok func(targets.TargetsView) bool) (targets.TargetsView, []string) {
	t.Helper()
	var seen []string
	deadline := time.Now().Add(within)
	for {
		v := d.targets(t)
		if s := v.Sandbox.State + ": " + v.Sandbox.Message; len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		if ok(v) {
			return v, seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; states seen:\n%s\nexecutor said:\n%s", what, within, strings.Join(seen, "\n"), d.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSaid waits (bounded) until the executor has printed line.
func (d *realDaemon) waitSaid(t *testing.T, line string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(d.stderr.String(), line); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the terminal was not told %q:\n%s", line, d.stderr.String())
			return
		}
	}
}

// sandboxCLI runs `cairn sandbox ARGS...` in-process.
func sandboxCLI(t *testing.T, args ...string) string {
	t.Helper()
	out := &syncBuffer{}
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: out}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := m.Run(ctx, append([]string{"sandbox"}, args...)); err != nil {
		t.Fatalf("cairn sandbox %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// TestExecutorFollowsSandbox starts the executor before any sandbox, as a
// reader who runs `make run` and `make sandbox` in that order would: kube
// and ssh blocks are refused with the reason, then run on the real sandbox
// once `cairn sandbox up` has started it, and are refused again (not
// "connection refused" mid-run) after `cairn sandbox down`.
func TestExecutorFollowsSandbox(t *testing.T) {
	bundledtest.NeedSandboxBins(t)
	sbDir := filepath.Join(t.TempDir(), "sb")
	t.Setenv(sandbox.EnvStateDir, sbDir)
	t.Setenv("KUBECONFIG", "")
	t.Cleanup(func() { sandboxCLI(t, "down", "--state-dir", sbDir) })
	d := startDaemon(t, contentDir(t, map[string]string{"follow.md": followRunbook}), "--sandbox", "auto", "--kubeconfig", "")

	v := d.targets(t)
	if v.Sandbox.State != "absent" || v.Kube != "" || len(v.Hosts) != 0 {
		t.Fatalf("before the sandbox: %+v", v)
	}
	// The start-up message says what is missing, not that a kubeconfig
	// nobody has is broken.
	if home, _ := os.UserHomeDir(); !isFile(filepath.Join(home, ".kube", "config")) &&
		!strings.Contains(d.stderr.String(), "kube blocks are off: no cluster: no --kubeconfig, $KUBECONFIG is unset and "+filepath.Join(home, ".kube", "config")+" does not exist") {
		t.Errorf("start-up message:\n%s", d.stderr.String())
	}
	code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": "follow", "block": "ns", "hash": d.blockHash(t, "follow", "ns")}, nil)
	if code != 503 || !strings.Contains(body, "target_off") || !strings.Contains(body, "kube blocks are off") || !strings.Contains(body, "cairn sandbox up") {
		t.Errorf("kube block without a cluster: %d %s", code, body)
	}

	sandboxCLI(t, "up", "--state-dir", sbDir)
	v, _ = d.waitTargets(t, 20*time.Second, "the executor picks up the sandbox", func(v targets.TargetsView) bool {
		return v.Sandbox.State == "running" && v.Kube != "" && len(v.Hosts) == 7 // cp0-2, w0, etcd0-2
	})
	if !strings.Contains(v.Kube, `context "cairn-sandbox"`) {
		t.Errorf("kube target: %q", v.Kube)
	}
	if rec, _ := d.run(t, "follow", "ns", nil, false); rec.Status != "verified" || !strings.Contains(rec.Output, "default") {
		t.Errorf("kube block on the sandbox: %s %q %v", rec.Status, rec.Output, rec.Reasons)
	}
	if rec, _ := d.run(t, "follow", "host", nil, false); rec.Status != "verified" || !strings.Contains(rec.Output, "cp0") || !strings.Contains(rec.Output, "w0") {
		t.Errorf("ssh block on the sandbox: %s %q %v", rec.Status, rec.Output, rec.Reasons)
	}
	d.waitSaid(t, "executor: the sandbox is up")
	// cairn run --sandbox=yes finds the sandbox CAIRN_SANDBOX_DIR names
	// (what `cairn sandbox env` exports for one started with --state-dir).
	code, out, errOut := run(t, "run", filepath.Join(d.content, "follow.md"), "--content", d.content, "--sandbox", "yes", "--block", "ns",
		"--journal", filepath.Join(t.TempDir(), "j.db"))
	if code != exitOK || !strings.Contains(out+errOut, "using the running sandbox ("+sbDir+")") {
		t.Errorf("cairn run --sandbox=yes with %s=%s: exit %d\n%s%s", sandbox.EnvStateDir, sbDir, code, out, errOut)
	}

	sandboxCLI(t, "down", "--state-dir", sbDir)
	d.waitTargets(t, 20*time.Second, "the executor notices the sandbox is gone", func(v targets.TargetsView) bool {
		return v.Sandbox.State == "absent" && v.Kube == "" && len(v.Hosts) == 0
	})
	code, body, _ = d.call(t, "POST", "/api/runs", map[string]any{"runbook": "follow", "block": "ns", "hash": d.blockHash(t, "follow", "ns")}, nil)
	if code != 503 || !strings.Contains(body, "no sandbox runs") {
		t.Errorf("kube block after the sandbox went: %d %s", code, body)
	}
	d.waitSaid(t, "executor: the sandbox went away")
}

// TestServeStartsSandbox is `make run` on a machine without a sandbox: the
// executor builds the binaries with the given command (here a stand-in
// that links the cached ones, printing progress as scripts/sandbox-bins.sh
// does; the real script is what CI runs before the tests), starts the real
// sandbox in the background, reports each stage, and then runs blocks on
// it. A second executor reuses the running sandbox.
func TestServeStartsSandbox(t *testing.T) {
	bundledtest.NeedSandboxBins(t)
	real := sandbox.BinDir()
	tmp := t.TempDir()
	sbDir, binDir := filepath.Join(tmp, "sb"), filepath.Join(tmp, "bin")
	script := filepath.Join(tmp, "build.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/bash
set -e
echo "sandbox-bins: building etcd"
sleep 1
mkdir -p "$CAIRN_SANDBOX_BIN"
for b in etcd kube-apiserver kube-controller-manager kubeadm kubectl; do ln -sf %q/$b "$CAIRN_SANDBOX_BIN/$b"; echo "sandbox-bins: $b ready"; done
`, real)), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(sandbox.EnvStateDir, sbDir)
	t.Setenv(sandbox.EnvBinDir, binDir)
	t.Setenv("KUBECONFIG", "")
	t.Cleanup(func() { sandboxCLI(t, "down", "--state-dir", sbDir) })
	dir := contentDir(t, map[string]string{"follow.md": followRunbook})
	d := startDaemon(t, dir, "--sandbox", "start", "--sandbox-build", script, "--kubeconfig", "")

	_, seen := d.waitTargets(t, 3*time.Minute, "the sandbox comes up", func(v targets.TargetsView) bool {
		return v.Sandbox.State == "running" && v.Kube != "" && len(v.Hosts) == 7 // cp0-2, w0, etcd0-2
	})
	all := strings.Join(seen, "\n")
	for _, want := range []string{"building: sandbox-bins: building etcd", "starting: "} {
		if !strings.Contains(all, want) {
			t.Errorf("the page was not shown %q; states seen:\n%s", want, all)
		}
	}
	for _, want := range []string{"executor: sandbox: sandbox-bins: building etcd", "executor: sandbox: starting in " + sbDir, "executor: the sandbox is up"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("the terminal was not shown %q:\n%s", want, d.stderr.String())
		}
	}
	if rec, _ := d.run(t, "follow", "ns", nil, false); rec.Status != "verified" {
		t.Errorf("kube block on the started sandbox: %s %q %v", rec.Status, rec.Output, rec.Reasons)
	}
	st, err := sandbox.StatusOf(context.Background(), sbDir)
	if err != nil || !st.Healthy() {
		t.Fatalf("sandbox: %v %+v", err, st)
	}
	pids := map[int]bool{}
	for _, p := range st.Procs {
		pids[p.PID] = true
	}

	// The sandbox outlives the executor that started it, and the next one
	// reuses it instead of starting another.
	d.stop()
	d2 := startDaemon(t, dir, "--sandbox", "start", "--sandbox-build", script, "--kubeconfig", "")
	d2.waitTargets(t, 20*time.Second, "the second executor uses the running sandbox", func(v targets.TargetsView) bool {
		return v.Sandbox.State == "running" && v.Kube != ""
	})
	st2, err := sandbox.StatusOf(context.Background(), sbDir)
	if err != nil || !st2.Healthy() {
		t.Fatalf("sandbox after restart: %v", err)
	}
	for _, p := range st2.Procs {
		if !pids[p.PID] {
			t.Errorf("a second sandbox process %s (pid %d) was started", p.Name, p.PID)
		}
	}
	if strings.Contains(d2.stderr.String(), "starting in") {
		t.Errorf("the second executor started a sandbox:\n%s", d2.stderr.String())
	}
}

// TestSandboxCannotStartPage: no binaries and no build command. The page
// says why the sandbox cannot start and what still works, and a local
// block still runs.
func TestSandboxCannotStartPage(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	bctx := testrig.Browser(t)
	tmp := t.TempDir()
	t.Setenv(sandbox.EnvStateDir, filepath.Join(tmp, "sb"))
	t.Setenv(sandbox.EnvBinDir, filepath.Join(tmp, "no-bin"))
	t.Setenv("KUBECONFIG", "")
	dir := contentDir(t, map[string]string{"follow.md": followRunbook + "\n## 3. Local {#local}\n\n```bash {#here target=local}\necho here\n```\n"})

	base, token, stderr := startServe(t, "--content", dir, "--sandbox", "start", "--journal", filepath.Join(tmp, "j.db"))
	pg := testrig.NewPage(t, bctx, 60*time.Second, stderr, `(document.getElementById("cairn-exec-status") || {}).textContent`)
	pg.Run("open the page", chromedp.Navigate(base+"follow/#cairn-token="+token))
	pg.Poll("the pill says local blocks still run", `(((document.getElementById("cairn-exec-status") || {}).textContent || "").indexOf("local blocks still run") > 0)`, 20*time.Second)
	pill := pg.Eval(`document.getElementById("cairn-exec-status").textContent`)
	pg.Run("run here", chromedp.Click(chromedp.CSS(`#block-here .cb-run`)))
	pg.Poll("here verified", `!!document.querySelector("#block-here.cb-verified")`, 20*time.Second)
	out := pg.Eval(`document.querySelector("#block-here .cb-result pre").textContent`)
	for _, want := range []string{"the sandbox cannot start", "etcd not found", "scripts/sandbox-bins.sh"} {
		if !strings.Contains(pill, want) {
			t.Errorf("pill %q lacks %q", pill, want)
		}
	}
	if !strings.Contains(out, "here") {
		t.Errorf("local block output: %q", out)
	}
	if !strings.Contains(stderr.String(), "sandbox cannot start") {
		t.Errorf("terminal:\n%s", stderr.String())
	}
}

// startServe runs `cairn serve --port 0 ARGS...` in this process until the
// test ends and returns its address, its pairing token and what it prints.
func startServe(t *testing.T, args ...string) (base, token string, out *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: out}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, append([]string{"serve", "--port", "0"}, args...)) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if mm := pairRe.FindStringSubmatch(out.String()); mm != nil {
			return mm[1], mm[2], out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pairing URL:\n%s", out.String())
		}
	}
}
