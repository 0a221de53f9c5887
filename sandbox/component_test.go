package sandbox_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestAddedControllerManager adds a real kube-controller-manager to the
// shared sandbox as a component, authenticated with a client certificate
// for system:kube-controller-manager from the sandbox CA: it leader-elects
// under RBAC (the bootstrap policy, as on a kubeadm cluster), is probed
// like the sandbox's own servers, and Remove(kill) stops it the way a lost
// node does, leaving its Lease unreleased.
func TestAddedControllerManager(t *testing.T) {
	k := testrig.Kube(t)
	sb := k.Sandbox
	ctx := ctxT(t, 3*time.Minute)
	lease := "cairn-test-" + k.Namespace[len(k.Namespace)-6:]
	name := "kcm-" + lease
	cm := &sandbox.ControllerManager{
		ComponentName: name,
		Bin:           "kube-controller-manager",
		User:          "system:kube-controller-manager",
		Args: []string{"--leader-elect=true", "--leader-elect-resource-name=" + lease,
			"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
			"--controllers=serviceaccount-token-controller"},
	}
	if err := sb.Add(ctx, cm); err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_ = sb.Remove(context.Background(), name, true)
		}
		_ = k.Client.CoordinationV1().Leases("kube-system").Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	// It authenticates as system:kube-controller-manager.
	kc, err := os.ReadFile(sb.Dir() + "/kube/" + name + ".kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`client-certificate-data: (\S+)`).FindSubmatch(kc)
	if m == nil {
		t.Fatalf("no client certificate in the kubeconfig:\n%s", kc)
	}
	der, _ := base64.StdEncoding.DecodeString(string(m[1]))
	blk, _ := pem.Decode(der)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || cert.Subject.CommonName != "system:kube-controller-manager" {
		t.Fatalf("client certificate %v: CN %q", err, cert.Subject.CommonName)
	}
	// It takes its lease under that identity's RBAC.
	var holder string
	for deadline := time.Now().Add(30 * time.Second); holder == ""; time.Sleep(200 * time.Millisecond) {
		if l, err := k.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if time.Now().After(deadline) {
			t.Fatalf("no holder of %s after 30s; log:\n%s", lease, tailOf(sb.Dir()+"/logs/"+name+".log"))
		}
	}
	st := sb.Status(ctx)
	var found *sandbox.ComponentStatus
	for i := range st.Components {
		if st.Components[i].Name == name {
			found = &st.Components[i]
		}
	}
	if found == nil || !found.Healthy || len(found.PIDs) != 1 || found.Probe.Kind != sandbox.ProbeHTTP {
		t.Fatalf("status of %s: %+v (%s)", name, found, st.Summary())
	}
	pid := found.PIDs[0]

	if err := sb.Remove(ctx, name, true); err != nil {
		t.Fatal(err)
	}
	removed = true
	if testrig.ProcessAlive(pid) {
		t.Errorf("pid %d still runs after Remove", pid)
	}
	st = sb.Status(ctx)
	for _, c := range st.Components {
		if c.Name == name {
			t.Errorf("%s still in the status after Remove", name)
		}
	}
	if !st.Healthy() {
		t.Errorf("sandbox unhealthy after Remove: %s", st.Summary())
	}
	// Killed, not stopped: the Lease still names it.
	if l, err := k.Client.CoordinationV1().Leases("kube-system").Get(ctx, lease, metav1.GetOptions{}); err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		t.Errorf("lease after kill: %v %v, want holder %s", err, l.Spec.HolderIdentity, holder)
	}
	if err := sb.Remove(ctx, name, true); err == nil {
		t.Error("a second Remove of the same component succeeded")
	}
}

// TestComponentThatFailsToStart: a bad flag gives an error with the log's
// tail, and nothing of it is left running or recorded.
func TestComponentThatFailsToStart(t *testing.T) {
	k := testrig.Kube(t)
	sb := k.Sandbox
	ctx := ctxT(t, time.Minute)
	before := len(sb.Status(ctx).Procs)
	err := sb.Add(ctx, &sandbox.ControllerManager{ComponentName: "kcm-bad-flag", Bin: "kube-controller-manager", Args: []string{"--no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "exited during start-up") {
		t.Fatalf("Add with a bad flag: %v", err)
	}
	st := sb.Status(ctx)
	if len(st.Procs) != before || !st.Healthy() {
		t.Errorf("after a failed Add: %d processes (was %d), %s", len(st.Procs), before, st.Summary())
	}
	if _, ok := sb.Component("kcm-bad-flag"); ok {
		t.Error("the failed component is recorded")
	}
}

func tailOf(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }
