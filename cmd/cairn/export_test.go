package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestExportCLI(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "practice.sh")
	if code, _, stderr := run(t, "export", "practice", "--content", filepath.Join("..", "..", "content"), "-o", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("script not written executable: %v %v", fi, err)
	}
	code, stdout, _ := run(t, "export", filepath.Join("..", "..", "content", "practice.md"))
	if code != 0 || !strings.HasPrefix(stdout, "#!/usr/bin/env bash\n") || !strings.Contains(stdout, "# Cairn:   "+Version) {
		t.Fatalf("export to stdout: exit %d\n%.300s", code, stdout)
	}
	for _, args := range [][]string{
		{"export"},
		{"export", "a", "b"},
		{"export", "--with-binary", "practice"},
		{"export", "--bundle", filepath.Join(dir, "b.tgz"), "practice"},
		{"export", "nope", "--content", filepath.Join("..", "..", "content")},
	} {
		if code, _, _ := run(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, stdout, _ := run(t, "export", "--help"); code != 0 || !strings.Contains(stdout, "--bundle") {
		t.Errorf("--help: exit %d\n%s", code, stdout)
	}
}

// TestExportBundleDeterministic: the same content gives the same archive
// bytes, whichever path it is given by.
func TestExportBundleDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar.gz"), filepath.Join(dir, "b.tar.gz")
	abs, _ := filepath.Abs(filepath.Join("..", "..", "content"))
	if code, _, stderr := run(t, "export", "--bundle", a, "--content", filepath.Join("..", "..", "content")); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	if code, _, stderr := run(t, "export", "--bundle", b, "--content", abs); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("bundles differ (%d and %d bytes)", len(x), len(y))
	}
}

// TestExportedPracticeAgainstSandbox runs the practice runbook with `cairn
// run` and as an exported script (kubectl, ssh and scp as its only
// clients) against the same sandbox: the same blocks pass, the same block
// fails, and --from resumes with the captures of the earlier run.
func TestExportedPracticeAgainstSandbox(t *testing.T) {
	for _, tool := range []string{"kubectl", "ssh", "scp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testrig.InCI() {
				t.Fatalf("%s is required under CI=true", tool)
			}
			t.Skipf("skipping: %s not installed", tool)
		}
	}
	k := testrig.Kube(t)
	s := testrig.SSH(t)
	inv := s.Inventory
	dir := t.TempDir()
	content := filepath.Join(dir, "content")
	if err := os.MkdirAll(content, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "content", "practice.md"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(content, "practice.md"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	ns := "--param=NAMESPACE=" + k.Namespace

	// 1. cairn run, in process.
	var stdout, stderr bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	err = m.Run(ctx, []string{"run", filepath.Join(content, "practice.md"), "--content", content, ns, "--sandbox", "no",
		"--kubeconfig", k.Kubeconfig, "--context", k.Context,
		"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile,
		"--journal", filepath.Join(dir, "journal.jsonl")})
	if err == nil {
		t.Fatalf("cairn run passed the failing step:\n%s", stdout.String())
	}
	// pod-running fails; only the always=true clean-up runs after it (its
	// host clean-up; the deletions need a confirmation nobody gives here).
	want := bundledtest.Outcomes(stdout.String())
	if strings.Join(want[max(len(want)-3, 0):], ",") != "pod-running ✗ failed,ssh-cleanup ✓ verified,ssh-cleanup-source ✓ verified" ||
		!strings.Contains(stderr.String(), `(block "pod-running"); after fixing, resume with: cairn run`) {
		t.Fatalf("cairn run did not stop at pod-running and clean up: %v\n%s\n%s", want, stdout.String(), stderr.String())
	}
	// The sandbox's hosts share this machine's /tmp: nothing of the run is left there.
	if left, _ := filepath.Glob("/tmp/cairn-practice*"); len(left) > 0 {
		t.Errorf("the clean-up left %v", left)
	}

	// 2. The exported script.
	script := filepath.Join(dir, "practice.sh")
	if code, _, e := run(t, "export", filepath.Join(content, "practice.md"), "-o", script); code != 0 {
		t.Fatal(e)
	}
	log := filepath.Join(dir, "practice.log")
	// The SSH config comes the way `eval "$(cairn sandbox env)"` gives it.
	common := []string{ns, "--kubeconfig", k.Kubeconfig, "--context", k.Context, "--log", log}
	sh := func(args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, append(common, args...)...)...)
		cmd.Dir = dir
		// kubectl, ssh and scp only: no cairn on PATH, no KUBECONFIG.
		cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "CAIRN_SSH_CONFIG=" + inv.SSHConfig}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("script %v did not finish in time:\n%s\n%s", args, o.String(), e.String())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	code, out, errOut := sh()
	if code != 1 {
		t.Fatalf("script: exit %d, want 1 (the failing step)\n%s\n%s", code, out, errOut)
	}
	if got := bundledtest.Outcomes(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the script and cairn run differ:\nscript:    %v\ncairn run: %v\n%s", got, want, out)
	}
	for _, w := range []string{`block "pod-running" (step "fail"`, `expected: exit status 0; output contains "Running"`, `problem:  output does not contain "Running"`, "--from fail"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("failure report lacks %q:\n%s", w, errOut)
		}
	}
	logText, _ := os.ReadFile(log)
	if !regexp.MustCompile(`(?m)\tfail\tpod-running\t0\tfailed\toutput does not contain "Running"$`).Match(logText) ||
		!regexp.MustCompile(`(?m)\tssh\tssh-copy\t0,0,0\tverified\t`).Match(logText) {
		t.Errorf("log:\n%s", logText)
	}

	// 3. Resume at a step that reads an earlier capture (check-stamp needs
	// STAMP from make-stamp): it comes from the saved captures.
	code, out, errOut = sh("--step", "kube-patch")
	if code != 0 || !strings.Contains(out, "stamp ok: ") {
		t.Fatalf("--step kube-patch: exit %d\n%s\n%s", code, out, errOut)
	}

	// 4. --from after the failure: confirmations need --yes, then it passes.
	code, out, _ = sh("--from", "cleanup")
	if code != 1 || !strings.Contains(out, "needs confirmation") {
		t.Errorf("--from cleanup without --yes: exit %d\n%s", code, out)
	}
	code, out, errOut = sh("--from", "cleanup", "--yes")
	if code != 0 || strings.Join(bundledtest.Outcomes(out), ",") != "ssh-cleanup ✓ verified,ssh-cleanup-source ✓ verified,delete-ns ✓ verified,delete-crd ✓ verified" {
		t.Fatalf("--from cleanup --yes: exit %d\n%s\n%s", code, out, errOut)
	}
}
