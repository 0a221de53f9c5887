package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

// The Cilium runbook on the cluster the kubeadm runbook built (cp0-cp2, w0):
// Cilium v1.20.2 installed by the real helm from its chart, the agents as the
// chart's DaemonSet pods on the nodes' kubelets and containerd, the operator
// as its Deployment's pod, the runbook's test workload as pods whose
// addresses the agents hand out and whose traffic crosses the nodes in
// Cilium's VXLAN tunnel.
//
// What is real: kubelet, containerd, runc; cilium-agent compiling and
// loading its datapath in each node's network namespace, its CNI plugin
// wiring every test pod; cilium-operator-generic migrating the CiliumNodes;
// helm upgrading the release; `kubectl exec` into the agents and the test
// pods; curl between pods on different nodes. What the test plays: the
// starting point (the install, the BGP advertisement a reader has), the
// images a registry would serve (built here from the same release, see
// sandbox.CiliumImages; the web server stands in for nginx), the
// control-plane taints lifted so that the four test pods spread over four
// nodes as on the runbook's kind cluster, and the person at the manual
// step. The chart values the sandbox's nodes need are sandbox.CiliumValues,
// from the file the sandbox writes for a reader.

// ciliumNodes are the nodes the agents run on.
var ciliumNodes = []string{"cp0", "cp1", "cp2", "w0"}

func runCiliumOnNodes(t *testing.T, sb *sandbox.Sandbox, dir, _ string) {
	ciliumOnNodes(t, sb, dir, nil)
}

// runCiliumExported is the air-gapped site's run (airgap_test.go): the
// Cilium script of the offline bundle with bash alone and the bundle's
// chart; the images came in with the kubeadm run's import of the bundle's
// OCI layout.
func runCiliumExported(t *testing.T, sb *sandbox.Sandbox, dir, _ string) {
	ciliumOnNodes(t, sb, dir, sharedSiteBundle(t))
}

func ciliumOnNodes(t *testing.T, sb *sandbox.Sandbox, dir string, site *siteBundle) {
	start := time.Now()
	phase := func(what string, since time.Time) { t.Logf("phase %-28s %6.1fs", what, time.Since(since).Seconds()) }
	building.Lock()
	defer building.Unlock()
	phase("waiting for clusters being built", start)
	inv := sb.Inventory()
	bin := sandbox.BinDir()
	kubeconfig := readerKubeconfig(t, inv, dir, "cilium-kubeconfig")
	kubectl := func(stdin string, args ...string) (string, error) {
		// Long enough for the rollouts' own --timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustKubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := kubectl(stdin, args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the cluster when the Cilium run failed:\n%s", ciliumState(kubectl))
		}
	})

	// What a registry would serve: the images, imported into each node's
	// runtime.
	imgStart := time.Now()
	// One node at a time: each import writes the archives twice (content
	// store, then snapshot), about 1.4 GB, and four at once stall every
	// etcd on this disk; on 2 cores it is no slower.
	for _, h := range ciliumNodes {
		if site != nil {
			// At the site they came with the bundle's layout.
			onNodes(t, inv.SSHConfig, []string{h}, "finding the bundle's Cilium images", time.Minute,
				"crictl images | grep -E 'quay.io/cilium/cilium .*v"+sandbox.CiliumVersion+"' && crictl images | grep -E 'operator-generic|web'")
			continue
		}
		onNodes(t, inv.SSHConfig, []string{h}, "importing the Cilium images", 3*time.Minute,
			fmt.Sprintf("set -e; for f in %s/*.tar; do ctr -n k8s.io images import \"$f\" >/dev/null; done; crictl images | grep -E 'cilium|web'",
				filepath.Join(inv.ImagesDir, sandbox.CiliumImagesDir)))
	}
	phase("cilium images imported", imgStart)

	// The starting point the runbook assumes, on a cluster like its kind
	// example: pods may run on every node, Cilium is installed with Helm
	// in cluster-pool mode (10.0.0.0/8 in /24s, the chart's default), the
	// BGP control plane advertises PodCIDRs.
	mustKubectl("", "taint", "nodes", "cp0", "cp1", "cp2", "node-role.kubernetes.io/control-plane:NoSchedule-")
	installStart := time.Now()
	helmArgs := []string{"--kubeconfig", kubeconfig, "install", "cilium", sandbox.CiliumChart(bin), "--namespace", "kube-system",
		"--version", sandbox.CiliumVersion}
	// With the values the sandbox wrote for its nodes (what `cairn sandbox
	// status` tells a reader to use), and the BGP control plane on.
	helmArgs = append(helmArgs, "-f", filepath.Join(sb.Dir(), sandbox.CiliumValuesFile), "--set", "bgpControlPlane.enabled=true")
	helmCtx, cancelHelm := context.WithTimeout(context.Background(), 3*time.Minute)
	helmCmd := exec.CommandContext(helmCtx, filepath.Join(bin, sandbox.BinHelm), helmArgs...)
	helmCmd.Env = append(os.Environ(), "HOME="+dir, "HELM_CACHE_HOME="+filepath.Join(dir, "helm"), "HELM_CONFIG_HOME="+filepath.Join(dir, "helm"), "HELM_DATA_HOME="+filepath.Join(dir, "helm"))
	out, err := helmCmd.CombinedOutput()
	cancelHelm()
	if err != nil || !strings.Contains(string(out), "STATUS: deployed") {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if out, err := kubectl("", "-n", "kube-system", "rollout", "status", "daemonset/cilium", "--timeout=8m"); err != nil {
		t.Fatalf("the agents did not become ready: %v\n%s", err, out)
	}
	if out, err := kubectl("", "-n", "kube-system", "rollout", "status", "deployment/cilium-operator", "--timeout=5m"); err != nil {
		t.Fatalf("the operator did not become ready: %v\n%s", err, out)
	}
	phase("cilium installed, agents ready", installStart)
	mustKubectl(`apiVersion: cilium.io/v2
kind: CiliumBGPAdvertisement
metadata:
  name: bgp-advertisements
  labels: {advertise: bgp}
spec:
  advertisements:
    - advertisementType: "PodCIDR"
`, "apply", "-f", "-")

	params := map[string]string{
		"CILIUM_CHART": sandbox.CiliumChart(bin), "CILIUM_VERSION": sandbox.CiliumVersion,
		"CANARY_NODE": "w0", "BGP_ADVERTISES_PODCIDR": "true",
		"EGRESS_MASQUERADE_INTERFACES": "eth0",
		"TEST_IMAGE":                   sandbox.ImageWeb,
		// A private range for the second pool (the runbook's default is
		// the original example's public 11.0.0.0/8).
		"SECOND_POOL_CIDR": "172.30.0.0/16",
	}
	// Interactive, as a reader runs it: the terminal answers each
	// confirmation and does the manual step (with --yes cairn run would
	// not wait for it).
	args := []string{"run", bundledtest.Path("cilium-multipool.md"), "--sandbox", "no",
		"--kubeconfig", kubeconfig, "--journal", filepath.Join(dir, "cilium-journal.jsonl")}
	for k, v := range params {
		args = append(args, "--param", k+"="+v)
	}
	stdin, answers, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer answers.Close()
	stdout := &terminal{answers: answers, do: func(block string) error {
		if block != "edit-bgp-advertisement" {
			return fmt.Errorf("unexpected manual step")
		}
		// The person's kubectl edit, as the runbook shows it.
		out, err := kubectl(`{"spec":{"advertisements":[{"advertisementType":"CiliumPodIPPool","selector":{"matchLabels":{"pool":"default"}}}]}}`,
			"patch", "ciliumbgpadvertisement", "bgp-advertisements", "--type=merge", "--patch-file=/dev/stdin")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}}
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	runStart := time.Now()
	// The blocks' kubectl and helm are the sandbox's; helm's files and
	// backup-helm-values' go to a HOME of the test's own.
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + dir,
		"HELM_CACHE_HOME=", "HELM_CONFIG_HOME=", "HELM_DATA_HOME=", "XDG_CACHE_HOME=", "XDG_CONFIG_HOME=", "XDG_DATA_HOME="}
	siteResults := filepath.Join(dir, "cilium-multipool.results.jsonl")
	if site != nil {
		charts, _ := filepath.Glob(filepath.Join(site.root, "charts", "cilium-*.tgz"))
		if len(charts) != 1 {
			t.Fatalf("the bundle's Cilium chart: %q", charts)
		}
		params["CILIUM_CHART"] = charts[0]
		scriptArgs := []string{"--kubeconfig", kubeconfig}
		for k, v := range params {
			scriptArgs = append(scriptArgs, "--param", k+"="+v)
		}
		err = site.run(ctx, dir, "cilium-multipool.sh", siteResults, scriptArgs, stdin, stdout, &stderr)
		phase("exported cilium-multipool.sh", runStart)
	} else {
		err = cairnWith(ctx, env, stdin, stdout, &stderr, args...)
		phase("cairn run cilium-multipool", runStart)
	}
	if err != nil {
		t.Fatalf("the run: %v\n%s\n%s", err, stdout, stderr.String())
	}
	ran := checkRun(t, stdout)
	rb := bundledtest.Parse(t, "cilium-multipool.md")
	if site != nil {
		site.checkSiteResults(t, rb, params, siteResults, filepath.Join(dir, "site-journal.db"))
	}
	executable := 0
	for _, b := range rb.Blocks {
		if b.Executable() && b.Target != runbook.TargetManual {
			executable++
			if !ran[b.ID] {
				t.Errorf("block %s did not run", b.ID)
			}
		}
	}
	t.Logf("%d blocks ran on the nodes (all verified) of %d executable non-manual blocks in the runbook", len(ran), executable)

	// The runbook's promise, read from what its blocks printed: the test
	// pods were spread over nodes (so the checks crossed the tunnel), every
	// address answering during the mixed phase still answers at the end (the
	// pods kept their IPs through the agents' restarts), the restarted
	// canary restored its endpoints, and the second pool's pod got an
	// address of that pool.
	mixed := outputOf(stdout.String(), "check-connectivity-mixed")
	nodesSeen := map[string]bool{}
	for _, m := range regexp.MustCompile(`ok   \S+ \((\S+)\) -> `).FindAllStringSubmatch(mixed, -1) {
		nodesSeen[m[1]] = true
	}
	if len(nodesSeen) < 2 {
		t.Errorf("the test pods ran on %d node(s), want them spread:\n%s", len(nodesSeen), mixed)
	}
	final := outputOf(stdout.String(), "check-connectivity-final")
	for _, m := range regexp.MustCompile(`-> (\d+\.\d+\.\d+\.\d+)`).FindAllStringSubmatch(mixed, -1) {
		if !strings.Contains(final, "-> "+m[1]+"\n") {
			t.Errorf("%s answered before the agents' restarts but is not among the addresses at the end:\n%s", m[1], final)
		}
	}
	if canary := outputOf(stdout.String(), "canary-agent-status"); !strings.Contains(canary, "[restored]") {
		t.Errorf("the restarted canary agent restored no endpoint:\n%s", canary)
	}
	if v := outputOf(stdout.String(), "verify-second-pool"); !regexp.MustCompile(`OK: 172\.30\.\d+\.\d+ allocated from test-pool`).MatchString(v) {
		t.Errorf("the second pool's pod has no address from 172.30.0.0/16:\n%s", v)
	}
	t.Logf("test pods on nodes %v; every pod address kept through the migration", nodesSeen)
	pods := mustKubectl("", "get", "pods", "-A", "-o", "wide", "--no-headers")
	t.Logf("pods at the end:\n%s", pods)
	phase("cilium total", start)
}

// readerKubeconfig writes the cluster's admin credentials (cp0's admin.conf)
// under the context the bundled runbooks allow (kube.contexts), as a
// reader's kubeconfig, and returns its path.
func readerKubeconfig(t testing.TB, inv *sandbox.Inventory, dir, name string) string {
	t.Helper()
	root := ""
	for _, h := range inv.Hosts {
		if h.Name == "cp0" {
			root = h.Root
		}
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(root, "etc/kubernetes/admin.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range admin.Contexts {
		admin.Contexts["cairn-sandbox"] = admin.Contexts[name]
		delete(admin.Contexts, name)
		break
	}
	admin.CurrentContext = "cairn-sandbox"
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*admin, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// ciliumState is what a failed Cilium run leaves to read: pods, CiliumNodes,
// the agents' and operator's last log lines, warnings.
func ciliumState(kubectl func(string, ...string) (string, error)) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "ciliumnodes", "-o", "yaml"},
		{"get", "events", "-A", "--field-selector", "type=Warning"},
		{"-n", "kube-system", "logs", "-l", "app.kubernetes.io/name=cilium-agent", "-c", "cilium-agent", "--tail=20", "--prefix"},
		{"-n", "kube-system", "logs", "-l", "app.kubernetes.io/name=cilium-operator", "--tail=20", "--prefix"},
	} {
		out, err := kubectl("", append([]string{"--request-timeout=20s"}, args...)...)
		fmt.Fprintf(&b, "--- kubectl %s", strings.Join(args, " "))
		if err != nil {
			fmt.Fprintf(&b, " (%v)", err)
		}
		fmt.Fprintf(&b, "\n%s\n", bundledtest.Tail(out, 60))
	}
	return b.String()
}
