package bundledtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

var ciliumBGPAdverts = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumbgpadvertisements"}

// The nodes: the test's own sandbox runs the cluster on cp0 and a real
// cilium-agent on each of these hosts.
var agentHosts = []string{"w0", "w1", "w2"}

// ciliumRig is the Cilium runbook against the sandbox cluster with the real
// parts: Cilium's Helm chart of v1.20.2 installed by the real helm, and the
// real cilium-operator-generic of the same release running out of cluster
// with the configuration the chart produced (sandbox.CiliumOperator), and a
// real cilium-agent of that release on each node (sandbox.CiliumAgent: the
// agent in an SSH host's namespaces, its datapath compiled and loaded there,
// configured by the chart's ConfigMap). The agents create their CiliumNodes
// and, restarted after the upgrade, request their addresses from the pools.
// The test plays the kubelets (it registers the Node objects) and two nodes
// no agent runs on: one whose pod asks for a second pool (an agent asks
// only for pods it runs, and the hosts run none), and one holding a
// PodCIDR from outside the pool.
type ciliumRig struct {
	k     *testrig.KubeEnv
	hosts *testrig.SSHEnv
	chart string
	ns    string // CILIUM_NAMESPACE
}

func newCiliumRig(t *testing.T) *ciliumRig {
	t.Helper()
	bundledtest.NeedSandboxBins(t, sandbox.BinCiliumOperator, sandbox.BinHelm, "charts/cilium/Chart.yaml",
		sandbox.BinCiliumAgent, "charts/cilium-bpf/bpf_host.c")
	if os.Geteuid() != 0 {
		if testrig.InCI() {
			t.Fatal("the Cilium agents need root (network and mount namespaces)")
		}
		t.Skip("the Cilium agents need root (network and mount namespaces)")
	}
	// A sandbox of the test's own: the agents change their hosts' network
	// namespaces (devices, routes, iptables, BPF programs) as on a node.
	hosts := []sandbox.HostSpec{{Name: "cp0", Groups: []string{sandbox.GroupControlPlane}}}
	for _, h := range agentHosts {
		hosts = append(hosts, sandbox.HostSpec{Name: h, Groups: []string{sandbox.GroupWorkers}})
	}
	k, hostsEnv := testrig.Own(t, sandbox.Options{Hosts: hosts, Network: sandbox.NetworkNamespaces})
	bin := sandbox.BinDir()
	// The blocks' helm and kubectl are the sandbox's; helm keeps its
	// configuration and cache, and backup-helm-values its file, in a HOME
	// of the test's own.
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HOME", t.TempDir())
	for _, v := range []string{"HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	return &ciliumRig{k: k, hosts: hostsEnv, chart: sandbox.CiliumChart(bin), ns: "kube-system"}
}

// helm runs the sandbox's helm against the sandbox cluster.
func (r *ciliumRig) helm(t *testing.T, args ...string) string {
	t.Helper()
	ctx := bundledtest.Ctx(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, "helm", append([]string{"--kubeconfig", r.k.Kubeconfig, "--kube-context", r.k.Context}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// operator starts (or restarts, as the Deployment's rollout would) the real
// operator, reading cilium-config as it is now.
func (r *ciliumRig) operator(t *testing.T, restart bool) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 2*time.Minute)
	op := &sandbox.CiliumOperator{Namespace: r.ns}
	if restart {
		if err := r.k.Sandbox.Remove(ctx, op.Name(), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.k.Sandbox.Add(ctx, op); err != nil {
		t.Fatal(err)
	}
}

// waitNodes polls the CiliumNodes until ok holds for each, or fails t.
func (r *ciliumRig) waitNodes(t *testing.T, what string, names []string, ok func(u *unstructured.Unstructured) bool) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 2*time.Minute)
	nodes := r.k.Dynamic.Resource(ciliumNodes)
	var last []string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		last = nil
		for _, n := range names {
			u, err := nodes.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !ok(u) {
				last = append(last, n)
			}
		}
		return len(last) == 0, nil
	}); err != nil {
		t.Fatalf("%s: not on %v after 90s (see the operator's log in the sandbox's logs/cilium-operator.log)", what, last)
	}
}

// podCIDRs is each named CiliumNode's spec.ipam.podCIDRs (cluster-pool)
// or, with pool set, its allocation from that pool (multi-pool).
func (r *ciliumRig) podCIDRs(t *testing.T, names []string, pool string) map[string][]string {
	t.Helper()
	ctx := bundledtest.Ctx(t, 30*time.Second)
	got := map[string][]string{}
	for _, n := range names {
		u, err := r.k.Dynamic.Resource(ciliumNodes).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got[n] = nodeCIDRs(u, pool)
	}
	return got
}

func nodeCIDRs(u *unstructured.Unstructured, pool string) []string {
	if pool == "" {
		c, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ipam", "podCIDRs")
		return c
	}
	allocs, _, _ := unstructured.NestedSlice(u.Object, "spec", "ipam", "pools", "allocated")
	for _, a := range allocs {
		m, _ := a.(map[string]any)
		if m["pool"] == pool {
			c, _, _ := unstructured.NestedStringSlice(m, "cidrs")
			return c
		}
	}
	return nil
}

// registerNodes does what each host's kubelet would: its Node object, with
// the host's address (where the agent finds its node IP).
func (r *ciliumRig) registerNodes(t *testing.T, names []string) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 30*time.Second)
	inv := r.k.Sandbox.Inventory()
	for _, n := range names {
		if _, err := r.k.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n,
			Labels: map[string]string{"kubernetes.io/hostname": n, "kubernetes.io/os": "linux"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		h, ok := inv.Host(n)
		if !ok {
			t.Fatalf("no host %s", n)
		}
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: h.Address}, {Type: corev1.NodeHostName, Address: n}}}})
		if _, err := r.k.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
}

// startAgents starts (restart: deletes the pod of, and so restarts) the
// real agent on each host, reading cilium-config as it is now, and waits
// until each says it is healthy.
func (r *ciliumRig) startAgents(t *testing.T, hosts []string, restart bool) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 4*time.Minute)
	for _, h := range hosts {
		a := &sandbox.CiliumAgent{Host: h, Namespace: r.ns}
		if restart {
			if err := r.k.Sandbox.Remove(ctx, a.Name(), false); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := r.k.Sandbox.Add(ctx, a); err != nil {
			t.Fatalf("%v\n%s", err, agentLogTail(r, h))
		}
		t.Logf("cilium-agent on %s healthy in %.1fs", h, time.Since(start).Seconds())
	}
}

// agentLogTail is what the agent's log on host says went wrong (its
// errors and a panic's first lines) and how it ends.
func agentLogTail(r *ciliumRig, host string) string {
	b, _ := os.ReadFile(filepath.Join(r.k.Sandbox.Dir(), "logs", (&sandbox.CiliumAgent{Host: host}).Name()+".log"))
	var bad []string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		switch {
		case strings.Contains(l, "level=error") || strings.Contains(l, "level=fatal"):
			bad = append(bad, l)
		case strings.HasPrefix(l, "panic:"):
			bad = append(bad, lines[i:min(len(lines), i+12)]...)
		}
	}
	return strings.Join(bad[max(0, len(bad)-20):], "\n") + "\n...\n" + bundledtest.Tail(string(b), 10)
}

// playedNodes does what a kubelet and a cluster-pool cilium-agent do when a
// node joins, for nodes no agent runs on: the Node object, then a
// CiliumNode (with podCIDRs[n] if set; else the operator fills it in).
func (r *ciliumRig) playedNodes(t *testing.T, names []string, podCIDRs map[string]string) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 30*time.Second)
	for _, n := range names {
		if _, err := r.k.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n}}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		ipam := map[string]any{}
		if c := podCIDRs[n]; c != "" {
			ipam["podCIDRs"] = []any{c}
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cilium.io/v2", "kind": "CiliumNode",
			"metadata": map[string]any{"name": n},
			"spec":     map[string]any{"ipam": ipam},
		}}
		if _, err := r.k.Dynamic.Resource(ciliumNodes).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// request is what a multi-pool agent writes to its CiliumNode when its pods
// need addresses from pools: played for a node no agent runs on.
func (r *ciliumRig) request(t *testing.T, node string, needs map[string]int) {
	t.Helper()
	var req []any
	for pool, n := range needs {
		req = append(req, map[string]any{"pool": pool, "needed": map[string]any{"ipv4-addrs": n}})
	}
	sort.Slice(req, func(i, j int) bool {
		return req[i].(map[string]any)["pool"].(string) < req[j].(map[string]any)["pool"].(string)
	})
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"ipam": map[string]any{"pools": map[string]any{"requested": req}}}})
	if _, err := r.k.Dynamic.Resource(ciliumNodes).Patch(bundledtest.Ctx(t, 30*time.Second), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cleanup removes what the test put in the cluster: the release, the
// operator's CRDs (and with them every Cilium object), the Nodes.
func (r *ciliumRig) cleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = r.k.Sandbox.Remove(ctx, (&sandbox.CiliumOperator{}).Name(), false)
	if out, err := exec.CommandContext(ctx, "helm", "--kubeconfig", r.k.Kubeconfig, "--kube-context", r.k.Context, "uninstall", "cilium", "-n", r.ns, "--ignore-not-found").CombinedOutput(); err != nil {
		t.Errorf("helm uninstall: %v\n%s", err, out)
	}
	list, err := r.k.Dynamic.Resource(crds).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, u := range list.Items {
			if strings.HasSuffix(u.GetName(), ".cilium.io") {
				_ = r.k.Dynamic.Resource(crds).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	for _, n := range append(slices.Clone(agentHosts), "pool-node", "stale-node") {
		_ = r.k.Client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{})
	}
}

// TestBundledCiliumMigration runs the Cilium runbook's blocks in order
// through the executor against the real chart, helm, operator and agents;
// see ciliumRig for what the test plays. What needs the agents as pods
// (deleting them, kubectl exec, the test workload's connectivity) waits for
// a Cilium image on sandbox nodes; the test restarts the agents itself and
// asks them with cilium-dbg on their hosts.
func TestBundledCiliumMigration(t *testing.T) {
	r := newCiliumRig(t)
	k := r.k
	ctx := bundledtest.Ctx(t, 10*time.Minute)
	r.cleanup(t)
	t.Cleanup(func() { r.cleanup(t) })
	testNS := k.Namespace + "-ipam"
	t.Cleanup(func() { k.KubectlErr(t, "", "delete", "namespace", testNS, "--ignore-not-found", "--wait=false") })

	// The starting point the runbook assumes: Cilium installed with Helm in
	// cluster-pool mode (the chart's default, 10.0.0.0/8 in /24s), with the
	// BGP control plane on (the BGP steps below). The DaemonSet's pods stay
	// Pending (no kubelets); the agents run on the hosts instead.
	out := r.helm(t, "install", "cilium", r.chart, "--namespace", r.ns, "--version", sandbox.CiliumVersion,
		"--set", "bgpControlPlane.enabled=true", "--set", "operator.replicas=1")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", out)
	}
	r.operator(t, false)
	// The operator registers Cilium's CRDs itself, as in a cluster.
	for _, name := range []string{"ciliumnodes.cilium.io", "ciliumpodippools.cilium.io", "ciliumbgpadvertisements.cilium.io"} {
		waitEstablished(t, k, name)
	}
	r.registerNodes(t, agentHosts)
	r.startAgents(t, agentHosts, false)
	r.waitNodes(t, "the operator's cluster-pool PodCIDRs", agentHosts, func(u *unstructured.Unstructured) bool { return len(nodeCIDRs(u, "")) == 1 })
	before := r.podCIDRs(t, agentHosts, "")
	var beforeLines []string
	for _, n := range agentHosts {
		beforeLines = append(beforeLines, n+" "+strings.Join(before[n], " "))
	}
	sort.Strings(beforeLines)
	t.Logf("the operator's cluster-pool allocation: %v", before)

	// The reader's existing BGP configuration: pod CIDRs advertised the
	// cluster-pool way.
	k.Kubectl(t, `apiVersion: cilium.io/v2
kind: CiliumBGPAdvertisement
metadata:
  name: bgp-advertisements
  labels: {advertise: bgp}
spec:
  advertisements:
    - advertisementType: "PodCIDR"
`, "apply", "-f", "-")

	b := newBundled(t, "cilium-multipool.md", k, nil, map[string]string{
		"CILIUM_VERSION":         sandbox.CiliumVersion,
		"CILIUM_CHART":           r.chart,
		"CILIUM_NAMESPACE":       r.ns,
		"TEST_NAMESPACE":         testNS,
		"BGP_ADVERTISES_PODCIDR": "true",
		"CANARY_NODE":            "w1",
		// The hosts' way out; the chart's default masquerading is
		// iptables, which multi-pool agents need it for.
		"EGRESS_MASQUERADE_INTERFACES": "eth0",
	})

	t.Run("preflight", func(t *testing.T) {
		rec := b.verify(t, "check-helm-release", false)
		if !strings.Contains(rec.Output, "installed chart: cilium-"+sandbox.CiliumVersion) || strings.Contains(rec.Output, "WARNING") {
			t.Errorf("check-helm-release:\n%s", rec.Output)
		}
		rec = b.verify(t, "check-cluster-pool-config", false)
		if !strings.Contains(rec.Output, "POOL_CIDR 10.0.0.0/8 covers 10.0.0.0/8") {
			t.Errorf("check-cluster-pool-config:\n%s", rec.Output)
		}
		// A pool that does not cover the cluster-pool CIDR, or another
		// mask size, must stop the reader here.
		for _, bad := range [][2]string{{"POOL_CIDR", "10.0.0.0/16"}, {"POOL_MASK_SIZE", "26"}} {
			old := b.params[bad[0]]
			b.params[bad[0]] = bad[1]
			rec := b.run(t, "check-cluster-pool-config", false, time.Minute)
			if old == "" {
				delete(b.params, bad[0])
			} else {
				b.params[bad[0]] = old
			}
			if rec.Status == executor.StatusVerified {
				t.Errorf("check-cluster-pool-config verified with %s=%s:\n%s", bad[0], bad[1], rec.Output)
			}
		}
		// Without the interfaces, the check stops the reader: a multi-pool
		// agent would not start (the canary below shows it does with them).
		b.params["EGRESS_MASQUERADE_INTERFACES"] = ""
		if rec := b.run(t, "check-masquerade-config", false, time.Minute); rec.Status == executor.StatusVerified {
			t.Errorf("check-masquerade-config verified without EGRESS_MASQUERADE_INTERFACES:\n%s", rec.Output)
		}
		b.params["EGRESS_MASQUERADE_INTERFACES"] = "eth0"
		rec = b.verify(t, "check-masquerade-config", false)
		if !strings.Contains(rec.Output, "masquerade: iptables; the upgrade sets egress-masquerade-interfaces=eth0") {
			t.Errorf("check-masquerade-config:\n%s", rec.Output)
		}
		rec = b.verify(t, "record-podcidrs", false)
		if got, want := rec.Captures["PODCIDRS_BEFORE"], strings.Join(beforeLines, "\n"); got != want {
			t.Errorf("PODCIDRS_BEFORE = %q, want the operator's %q", got, want)
		}
		b.verify(t, "check-podcidrs-in-pool", false)
	})

	t.Run("test-workload", func(t *testing.T) {
		// Namespace, Deployment, scale and pods are real; without a
		// scheduler and kubelets the pods stay Pending, so
		// wait-test-workload and wait-scaled-workload are not run.
		b.verify(t, "apply-test-workload", false)
		b.verify(t, "scale-test-workload", false)
		d, err := k.Client.AppsV1().Deployments(testNS).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil || d.Spec.Replicas == nil || *d.Spec.Replicas != 8 {
			t.Fatalf("nginx after scale-test-workload: %v (%v)", d.Spec.Replicas, err)
		}
		// The controller manager's ReplicaSet controller made the pods.
		// list-test-pods lists them and, Pending as they are here, fails:
		// it passes only when every test pod runs with an address (the
		// node tests).
		var last *executor.Record
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			last = b.run(t, "list-test-pods", false, 30*time.Second)
			return strings.Count(last.Output, "nginx-") == 8, nil
		}); err != nil {
			t.Errorf("list-test-pods never listed 8 nginx pods: %v", err)
		} else if last.Status == executor.StatusVerified || !strings.Contains(last.Output, "only 0 of 8 test pods are Running with an IP") {
			t.Errorf("list-test-pods with 8 Pending pods: %s\n%s", last.Status, last.Output)
		}
	})

	dsBefore := daemonSetTemplate(t, k, r.ns, "cilium")
	opBefore := deploymentTemplate(t, k, r.ns, "cilium-operator")

	t.Run("helm-upgrade", func(t *testing.T) {
		rec := b.verify(t, "backup-helm-values", false)
		saved := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rec.Output), "saved "))
		if data, err := os.ReadFile(saved); err != nil || !strings.Contains(string(data), "bgpControlPlane") {
			t.Errorf("backup %q: %v\n%s", saved, err, data)
		}
		if rec := b.verify(t, "record-agents-before-upgrade", false); !strings.Contains(rec.Output, "cilium-") {
			t.Errorf("record-agents-before-upgrade recorded:\n%s", rec.Output)
		}
		if _, err := b.prepare(t, "helm-upgrade-multipool", false); err == nil {
			t.Fatal("helm-upgrade-multipool ran without confirmation")
		}
		rec = b.verify(t, "helm-upgrade-multipool", true)
		t.Logf("helm upgrade: %s", firstLines(rec.Output, 3))

		b.verify(t, "check-multipool-config", false)
		cm, err := k.Client.CoreV1().ConfigMaps(r.ns).Get(ctx, "cilium-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.Data["egress-masquerade-interfaces"]; got != "eth0" {
			t.Errorf("egress-masquerade-interfaces = %q, want eth0", got)
		}
		if got := cm.Data["auto-create-cilium-pod-ip-pools"]; got != "default=ipv4-cidrs:10.0.0.0/8;ipv4-mask-size:24" {
			t.Errorf("auto-create-cilium-pod-ip-pools = %q", got)
		}
		// rollOutCiliumPods=false: the agents' template is untouched;
		// operator.rollOutPods=true: the operator's changed, so its
		// Deployment rolls out.
		if got := daemonSetTemplate(t, k, r.ns, "cilium"); !reflect.DeepEqual(got, dsBefore) {
			t.Errorf("the agent DaemonSet's pod template changed:\nbefore %v\nafter  %v", dsBefore.Annotations, got.Annotations)
		}
		if got := deploymentTemplate(t, k, r.ns, "cilium-operator"); reflect.DeepEqual(got.Annotations, opBefore.Annotations) {
			t.Errorf("the operator's pod template did not change (annotations %v): it would not restart", got.Annotations)
		}
		b.verify(t, "list-agents-after-upgrade", false)
	})

	// The rollout: the operator restarts with the new cilium-config and
	// migrates the CiliumNodes that exist at its start.
	r.operator(t, true)

	t.Run("migration", func(t *testing.T) {
		rec := b.verify(t, "check-default-pool", false)
		if !strings.Contains(rec.Output, "default pool: cidrs=10.0.0.0/8 maskSize=24") {
			t.Errorf("check-default-pool:\n%s", rec.Output)
		}
		rec = b.verify(t, "wait-pools-allocated", false)
		for _, n := range agentHosts {
			if !strings.Contains(rec.Output, "ciliumnode.cilium.io/"+n+" condition met") {
				t.Errorf("wait output lacks %s:\n%s", n, rec.Output)
			}
		}
		if got := r.podCIDRs(t, agentHosts, "default"); !reflect.DeepEqual(got, before) {
			t.Errorf("the operator moved %v, before %v", got, before)
		}
		if got := r.podCIDRs(t, agentHosts, ""); fmt.Sprint(got) != fmt.Sprint(map[string][]string{"w0": nil, "w1": nil, "w2": nil}) {
			t.Errorf("spec.ipam.podCIDRs left after the migration: %v", got)
		}
		rec = b.verify(t, "compare-podcidrs", false)
		if !strings.Contains(rec.Output, strings.Join(beforeLines, "\n")+"\nPodCIDRs unchanged on every node") {
			t.Errorf("compare-podcidrs:\n%s", rec.Output)
		}
	})

	t.Run("bgp", func(t *testing.T) {
		rec := b.verify(t, "get-bgp-advertisements", false)
		if !strings.Contains(rec.Output, "bgp-advertisements") {
			t.Errorf("get-bgp-advertisements:\n%s", rec.Output)
		}
		b.verify(t, "label-default-pool", false)
		// Before the reader's edit the check must fail.
		if rec := b.run(t, "check-bgp-advertisements", false, time.Minute); rec.Status == executor.StatusVerified {
			t.Errorf("check-bgp-advertisements verified before the edit:\n%s", rec.Output)
		}
		// edit-bgp-advertisement is manual: the test makes the change the
		// runbook shows.
		k.Kubectl(t, `{"spec":{"advertisements":[{"advertisementType":"CiliumPodIPPool","selector":{"matchLabels":{"pool":"default"}}}]}}`,
			"patch", "ciliumbgpadvertisement", "bgp-advertisements", "--type=merge", "--patch-file=/dev/stdin")
		b.verify(t, "check-bgp-advertisements", false)
	})

	t.Run("canary", func(t *testing.T) {
		// restart-canary-agent deletes the agent's pod; here the agent is
		// a process on the host, and the test restarts it (wait-canary-agent
		// and canary-agent-status need the pod; the test asks the agent
		// itself instead). Before the restart the cluster-pool agent has
		// asked for nothing; restarted in multi-pool mode it asks the
		// default pool for its addresses.
		canary := b.params["CANARY_NODE"]
		if rec := b.run(t, "check-canary-requested", false, 30*time.Second); rec.Status == executor.StatusVerified && strings.Contains(rec.Output, `"requested"`) {
			t.Errorf("check-canary-requested verified before the canary restarted:\n%s", rec.Output)
		}
		r.startAgents(t, []string{canary}, true)
		rec := b.verify(t, "check-canary-requested", false)
		if !strings.Contains(rec.Output, "default") {
			t.Errorf("check-canary-requested: no request from the default pool:\n%s", rec.Output)
		}
		if st := agentStatus(t, r, canary); !strings.Contains(st, "Ok") {
			t.Errorf("the canary agent after its restart: %s", st)
		}
		// What canary-agent-status checks in the pod, asked of the agent
		// on its host with the same cilium-dbg.
		dbg := r.hosts.Run(t, canary, "/var/lib/cairn-host/cilium/bin/cilium-dbg status")
		if !regexp.MustCompile(`IPAM:\s+IPv4: \d+ IPAM pool\(s\) available`).MatchString(dbg) {
			t.Errorf("cilium-dbg status on %s does not say the agent allocates from pools:\n%s", canary, dbg)
		}
		t.Logf("cilium-dbg status on %s after the restart:\n%s", canary, dbg)
		// The operator keeps the migrated CIDR for the request rather
		// than handing out another.
		time.Sleep(2 * time.Second)
		if got := r.podCIDRs(t, []string{canary}, "default"); !reflect.DeepEqual(got[canary], before[canary]) {
			t.Errorf("%s's default allocation after the request: %v, before %v", canary, got[canary], before[canary])
		}
		// Every agent restarted (restart-remaining-agents deletes the
		// pods; the test restarts the processes): the CIDRs stay.
		var rest []string
		for _, n := range agentHosts {
			if n != canary {
				rest = append(rest, n)
			}
		}
		r.startAgents(t, rest, true)
		r.waitNodes(t, "the restarted agents' requests", agentHosts, func(u *unstructured.Unstructured) bool {
			req, _, _ := unstructured.NestedSlice(u.Object, "spec", "ipam", "pools", "requested")
			return len(req) > 0
		})
		rec = b.verify(t, "compare-podcidrs-final", false)
		if !strings.Contains(rec.Output, "PodCIDRs unchanged on every node") {
			t.Errorf("compare-podcidrs-final:\n%s", rec.Output)
		}
	})

	t.Run("second-pool", func(t *testing.T) {
		b.verify(t, "apply-second-pool", false)
		// A pod of the new pool on pool-node: its agent asks for one
		// address of test-pool; the operator allocates a /24 of 11.0.0.0/8.
		// Played: an agent asks only for the pods it runs.
		r.playedNodes(t, []string{"pool-node"}, nil)
		r.request(t, "pool-node", map[string]int{"default": 16, "test-pool": 1})
		r.waitNodes(t, "a test-pool allocation", []string{"pool-node"}, func(u *unstructured.Unstructured) bool {
			c := nodeCIDRs(u, "test-pool")
			return len(c) == 1 && strings.HasPrefix(c[0], "11.") && strings.HasSuffix(c[0], "/24")
		})
		if got := r.podCIDRs(t, []string{"pool-node"}, "default"); len(got["pool-node"]) != 1 {
			t.Errorf("pool-node's default allocation: %v", got)
		}
		b.verify(t, "apply-other-pool-pod", false)
		p, err := k.Client.CoreV1().Pods(testNS).Get(ctx, "nginx-other-pool", metav1.GetOptions{})
		if err != nil || p.Annotations["ipam.cilium.io/ip-pool"] != "test-pool" {
			t.Errorf("nginx-other-pool: %v %v", p.Annotations, err)
		}
	})

	t.Run("cleanup", func(t *testing.T) {
		b.verify(t, "delete-test-namespace", true)
		b.verify(t, "wait-test-namespace-gone", false)
	})

	// A node the operator cannot carry over: its agent holds a PodCIDR from
	// outside the pool (from an earlier cluster-pool CIDR, say). The real
	// operator first moves it to spec.ipam.pools.allocated (the wait's
	// condition holds for a moment) and then, failing to find it in the
	// default pool ("cidr ... is not part of the requested pool"), drops the
	// allocation without recording an error. So the runbook stops the
	// reader before the upgrade (check-podcidrs-in-pool), and afterwards
	// the wait and compare-podcidrs fail naming the node.
	t.Run("node-outside-the-pool", func(t *testing.T) {
		r.playedNodes(t, []string{"stale-node"}, map[string]string{"stale-node": "192.168.77.0/24"})
		rec := b.verify(t, "record-podcidrs", false)
		if !strings.Contains(rec.Captures["PODCIDRS_BEFORE"], "stale-node 192.168.77.0/24") {
			t.Fatalf("PODCIDRS_BEFORE = %q", rec.Captures["PODCIDRS_BEFORE"])
		}
		rec = b.run(t, "check-podcidrs-in-pool", false, time.Minute)
		if rec.Status == executor.StatusVerified || !strings.Contains(rec.Output, "FAIL stale-node: 192.168.77.0/24") || strings.Contains(rec.Output, "FAIL w") {
			t.Errorf("check-podcidrs-in-pool: %s\n%s", rec.Status, rec.Output)
		}

		// The reader goes on regardless: the operator's next start.
		r.operator(t, true)
		r.waitNodes(t, "the operator dropping stale-node's allocation", []string{"stale-node"}, func(u *unstructured.Unstructured) bool {
			return len(nodeCIDRs(u, "")) == 0 && len(nodeCIDRs(u, "default")) == 0
		})
		rec = b.run(t, "wait-pools-allocated", false, 10*time.Second)
		reasons := strings.Join(rec.Reasons, "; ")
		if rec.Status == executor.StatusVerified || !strings.Contains(reasons, "stale-node") || strings.Contains(reasons, "w0") {
			t.Errorf("wait-pools-allocated: %s: %s\n%s", rec.Status, reasons, rec.Output)
		}
		rec = b.run(t, "compare-podcidrs", false, time.Minute)
		if rec.Status == executor.StatusVerified || !strings.Contains(rec.Output, "stale-node 192.168.77.0/24") || !strings.Contains(rec.Output, "PodCIDR mismatch") {
			t.Errorf("compare-podcidrs: %s\n%s", rec.Status, rec.Output)
		}
		// The migrated nodes kept theirs.
		if got := r.podCIDRs(t, agentHosts, "default"); !reflect.DeepEqual(got, before) {
			t.Errorf("after the operator's restart: %v, before %v", got, before)
		}
	})
}

// agentStatus is what the agent on host says of itself (cilium-dbg status
// --brief reads the same).
func agentStatus(t *testing.T, r *ciliumRig, host string) string {
	t.Helper()
	sock, err := (&sandbox.CiliumAgent{Host: host}).Socket(r.k.Sandbox)
	if err != nil {
		return err.Error()
	}
	st, err := sandbox.CiliumAgentStatus(bundledtest.Ctx(t, 10*time.Second), sock)
	if err != nil {
		return err.Error()
	}
	return st
}

func waitEstablished(t *testing.T, k *testrig.KubeEnv, name string) {
	t.Helper()
	ctx := bundledtest.Ctx(t, 2*time.Minute)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := k.Dynamic.Resource(crds).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("CRD %s not established (the operator registers it): %v", name, err)
	}
}

func daemonSetTemplate(t *testing.T, k *testrig.KubeEnv, ns, name string) corev1.PodTemplateSpec {
	t.Helper()
	ds, err := k.Client.AppsV1().DaemonSets(ns).Get(bundledtest.Ctx(t, 30*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Spec.Template
}

func deploymentTemplate(t *testing.T, k *testrig.KubeEnv, ns, name string) corev1.PodTemplateSpec {
	t.Helper()
	var d *appsv1.Deployment
	d, err := k.Client.AppsV1().Deployments(ns).Get(bundledtest.Ctx(t, 30*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}
