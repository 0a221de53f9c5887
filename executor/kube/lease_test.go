package kube_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestLeaseLiveHolder: expect.lease against a real Lease on the sandbox's
// apiserver, held by client-go's leader election (the code every
// controller manager uses): verified while the holder renews; failed once
// it stops (killed, not released: its name stays in the Lease); failed for
// another expected holder.
func TestLeaseLiveHolder(t *testing.T) {
	e := setup(t, kube.Config{})
	cfg, err := clientcmd.BuildConfigFromFlags("", e.k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.k.Namespace, "cairn-lease", cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "cairn-test-a"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	leading := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second,
			ReleaseOnCancel: false, // a killed holder releases nothing
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(leading) },
				OnStoppedLeading: func() {},
			},
		})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("the elector did not take the lease")
	}
	verdict := func(id string) (executor.Verdict, string) {
		res, out := e.run(id)
		return executor.Verify(e.rb.BlockByID(id), []executor.HostResult{res}, map[string]string{res.Host: out}, kube.Checker{}), out
	}
	if v, out := verdict("lease-live"); !v.OK || !strings.Contains(out, "held by cairn-test-a, renewed") {
		t.Errorf("live holder: %v\n%s", v.Reasons, out)
	}
	if v, _ := verdict("lease-other"); v.OK || !strings.Contains(strings.Join(v.Reasons, " "), `held by "cairn-test-a"`) {
		t.Errorf("another holder expected: %v", v.Reasons)
	}
	// The exported script checks the same way.
	script := exportScript(t, e)
	out, _ := script("--step", "leases")
	if !regexp.MustCompile(`(?s)lease-live.*✓ verified.*lease-other`).MatchString(out) || !strings.Contains(out, `held by "cairn-test-a", want a holder matching`) {
		t.Errorf("exported script, live holder:\n%s", out)
	}

	stop() // the holder stops renewing without releasing
	<-done
	v, out := verdict("lease-live")
	if v.OK || !regexp.MustCompile(`did not renew while watched|stopped renewing`).MatchString(strings.Join(v.Reasons, " ")) {
		t.Errorf("dead holder passed: %v\n%s", v.Reasons, out)
	}
	if out, err := script("--step", "leases"); err == nil || !regexp.MustCompile(`did not renew while watched|stopped renewing`).MatchString(out) {
		t.Errorf("exported script passed a dead holder (%v):\n%s", err, out)
	}
}

// exportScript exports the test runbook and returns a function that runs
// it against the rig's cluster (kubectl from PATH, as a reader's site has).
func exportScript(t *testing.T, e *env) func(args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		if testrig.InCI() {
			t.Fatal("kubectl is required under CI=true")
		}
		t.Skip("no kubectl for the exported script")
	}
	src, err := export.Script(e.rb, export.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "kube-runner.sh")
	if err := os.WriteFile(path, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{path, "--kubeconfig", e.k.Kubeconfig, "--context", e.k.Context,
			"--param", "NS=" + e.k.Namespace, "--log", filepath.Join(dir, "log")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestCheckLease covers the time rules without a cluster.
func TestCheckLease(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	lease := func(holder string, renew time.Time) any {
		return map[string]any{"metadata": map[string]any{"name": "l", "namespace": "kube-system"},
			"spec": map[string]any{"holderIdentity": holder, "renewTime": renew.Format(time.RFC3339Nano), "leaseDurationSeconds": float64(15)}}
	}
	anyHolder := regexp.MustCompile(`.`)
	for _, tc := range []struct {
		name          string
		before, after []any
		re            *regexp.Regexp
		want          string // "" = ok
	}{
		{"renewed", []any{lease("a", now.Add(-3*time.Second))}, []any{lease("a", now.Add(-1*time.Second))}, anyHolder, ""},
		{"not renewed", []any{lease("a", now.Add(-3*time.Second))}, []any{lease("a", now.Add(-3*time.Second))}, anyHolder, "did not renew"},
		{"expired", nil, []any{lease("a", now.Add(-20*time.Second))}, anyHolder, "stopped renewing"},
		{"handed over", []any{lease("a", now.Add(-3*time.Second))}, []any{lease("b", now.Add(-3*time.Second))}, anyHolder, ""},
		{"no holder", nil, []any{lease("", now)}, anyHolder, "no holder"},
		{"wrong holder", nil, []any{lease("ccm-1", now)}, regexp.MustCompile(`^kcm`), `held by "ccm-1"`},
		{"two objects", nil, []any{lease("a", now), lease("b", now)}, anyHolder, "one Lease"},
	} {
		ok, why := executor.CheckLease(tc.before, tc.after, tc.re, now)
		if ok != (tc.want == "") || !strings.Contains(why, tc.want) {
			t.Errorf("%s: ok=%v %q, want %q", tc.name, ok, why, tc.want)
		}
	}
}
