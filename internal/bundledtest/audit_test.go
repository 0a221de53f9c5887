package bundledtest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
)

// The content errors an outside audit of the CCM and Cilium runbooks found
// (against kubernetes/website, kubernetes/cloud-provider and cilium/cilium
// sources), each held by a test that fails on the old text. The blocks'
// behaviour is tested by running their bodies in bash with a kubectl that
// answers what a cluster in that state would; the node tests run them on
// real clusters.

// runBody runs b's body as the executor runs a local block (bash -euo
// pipefail, the values in the environment) with a kubectl on PATH that
// prints kubectlOut, and returns the output and whether it exited 0.
func runBody(t *testing.T, b *runbook.Block, env map[string]string, kubectlOut string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	stub := "#!/bin/sh\ncat <<'CAIRN_STUB_EOF'\n" + kubectlOut + "\nCAIRN_STUB_EOF\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", b.Content)
	cmd.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func block(t *testing.T, rb *runbook.Runbook, id string) *runbook.Block {
	t.Helper()
	b := rb.BlockByID(id)
	if b == nil {
		t.Fatalf("%s has no block %q", rb.Path, id)
	}
	return b
}

// Blocks that passed on any output now check what they list.
func TestAuditListBlocksCheckWhatTheyList(t *testing.T) {
	ccm, cil := bundledtest.Parse(t, "ccm-leader-migration.md"), bundledtest.Parse(t, "cilium-multipool.md")
	for _, b := range []*runbook.Block{block(t, ccm, "list-kcm-images"), block(t, cil, "list-agents-after-upgrade"), block(t, cil, "list-test-pods")} {
		e := b.Expect
		if len(e.Contains)+len(e.Match)+len(e.NotContains)+len(e.Similar) == 0 {
			t.Errorf("%s passes on any output (no expectation)", b.ID)
		}
	}
	// Mixed images after the upgrade fail; one image passes.
	b := block(t, ccm, "list-kcm-images")
	if out, ok := runBody(t, b, nil, "cp0   registry.k8s.io/kube-controller-manager:v1.37.2\ncp1   cairn.internal/kube-controller-manager:v1.30.14"); ok {
		t.Errorf("list-kcm-images passed with two images:\n%s", out)
	}
	out, ok := runBody(t, b, nil, "cp0   registry.k8s.io/kube-controller-manager:v1.37.2\ncp1   registry.k8s.io/kube-controller-manager:v1.37.2")
	if !ok || len(b.Expect.Match) == 0 || !b.Expect.Match[0].MatchString(out) {
		t.Errorf("list-kcm-images with one image: ok=%v\n%s", ok, out)
	}
	// Pending test pods fail the list.
	b = block(t, cil, "list-test-pods")
	if out, ok := runBody(t, b, map[string]string{"TEST_NAMESPACE": "t"}, "Running 10.0.0.1\nPending "); ok {
		t.Errorf("list-test-pods passed with a Pending pod:\n%s", out)
	}
	if out, ok := runBody(t, b, map[string]string{"TEST_NAMESPACE": "t"}, "Running 10.0.0.1\nRunning 10.0.1.2"); !ok || !strings.Contains(out, "2 of 2 test pods Running with an IP") {
		t.Errorf("list-test-pods with two running pods: ok=%v\n%s", ok, out)
	}
}

// Nothing verified that the Helm upgrade left the agents un-restarted: the
// agents are recorded before it and compared after.
func TestAuditAgentsNotRestartedByUpgrade(t *testing.T) {
	cil := bundledtest.Parse(t, "cilium-multipool.md")
	rec, after := block(t, cil, "record-agents-before-upgrade"), block(t, cil, "list-agents-after-upgrade")
	if rec.Index > block(t, cil, "helm-upgrade-multipool").Index || len(rec.Captures) != 1 || rec.Captures[0].Name != "AGENTS_BEFORE_UPGRADE" {
		t.Fatalf("record-agents-before-upgrade must capture AGENTS_BEFORE_UPGRADE before the upgrade")
	}
	before := "cilium-a 1111 0\ncilium-b 2222 0"
	env := map[string]string{"CILIUM_NAMESPACE": "kube-system", "AGENTS_BEFORE_UPGRADE": before}
	if out, ok := runBody(t, after, env, before); !ok || len(after.Expect.Contains) == 0 || !strings.Contains(out, after.Expect.Contains[0]) {
		t.Errorf("the same agents: ok=%v\n%s", ok, out)
	}
	if out, ok := runBody(t, after, env, "cilium-a 1111 0\ncilium-c 3333 0"); ok {
		t.Errorf("a restarted agent (new pod) passed:\n%s", out)
	}
	if out, ok := runBody(t, after, env, "cilium-a 1111 1\ncilium-b 2222 0"); ok {
		t.Errorf("a restarted agent container passed:\n%s", out)
	}
	// Pending pods have no restart count: kubectl prints a trailing space
	// there, which the captured value (trimmed) no longer has.
	env["AGENTS_BEFORE_UPGRADE"] = "cilium-a 1111\ncilium-b 2222"
	if out, ok := runBody(t, after, env, "cilium-a 1111 \ncilium-b 2222 "); !ok {
		t.Errorf("the same Pending agents:\n%s", out)
	}
}

// On a dual-stack cluster the preflight skipped IPv6, and the mismatch
// only showed after the irreversible upgrade: it stops before it now.
func TestAuditPreflightStopsOnIPv6(t *testing.T) {
	b := block(t, bundledtest.Parse(t, "cilium-multipool.md"), "check-podcidrs-in-pool")
	env := map[string]string{"POOL_CIDR": "10.0.0.0/8", "POOL_MASK_SIZE": "24"}
	env["PODCIDRS_BEFORE"] = "n1 10.0.1.0/24\nn2 10.0.2.0/24"
	if out, ok := runBody(t, b, env, ""); !ok {
		t.Fatalf("an IPv4 cluster inside the pool failed:\n%s", out)
	}
	env["PODCIDRS_BEFORE"] = "n1 10.0.1.0/24 fd00:10:244:1::/64\nn2 10.0.2.0/24 fd00:10:244:2::/64"
	if out, ok := runBody(t, b, env, ""); ok || !strings.Contains(out, "IPv6") {
		t.Errorf("a dual-stack cluster passed the preflight:\n%s", out)
	}
}

// The kubeadm tip: the v1beta4 list form of extraArgs, and the flags taken
// out of kubeadm-config before the upgrade to N+1.
func TestAuditKubeadmTip(t *testing.T) {
	src, err := os.ReadFile(bundledtest.Path("ccm-leader-migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, "::: tip kubeadm")
	if i < 0 {
		t.Fatal("no kubeadm tip")
	}
	tip := text[i:]
	tip = tip[:strings.Index(tip, "\n:::\n")]
	y := tip[strings.Index(tip, "```yaml\n")+len("```yaml\n"):]
	y = y[:strings.Index(y, "```")]
	var cfg struct {
		ControllerManager struct {
			ExtraArgs []struct{ Name, Value string } `yaml:"extraArgs"`
		} `yaml:"controllerManager"`
	}
	if err := yaml.Unmarshal([]byte(y), &cfg); err != nil {
		t.Errorf("the tip's ClusterConfiguration is not kubeadm v1beta4 (extraArgs a list of name and value): %v\n%s", err, y)
	} else if len(cfg.ControllerManager.ExtraArgs) == 0 || cfg.ControllerManager.ExtraArgs[0].Name != "enable-leader-migration" {
		t.Errorf("extraArgs = %+v", cfg.ControllerManager.ExtraArgs)
	}
	if !strings.Contains(tip, "N+1로 `kubeadm upgrade`하기 전에") || !strings.Contains(tip, "지웁니다") {
		t.Errorf("the tip does not say to take the flags out before the upgrade to N+1:\n%s", tip)
	}
}

// The default tab: through v1.27 the built-in configuration used exactly
// the legacy names.
func TestAuditDefaultTabNamesByVersion(t *testing.T) {
	src, err := os.ReadFile(bundledtest.Path("ccm-leader-migration.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	i := strings.Index(text, "기본 구성의 리더 이름은")
	if i < 0 {
		t.Fatal("no default tab text")
	}
	tab := text[i : i+strings.Index(text[i:], "::::")]
	for _, want := range []string{"`route`, `service`,\n`cloud-node-lifecycle`", "v0.27", "v0.28"} {
		if !strings.Contains(tab, want) {
			t.Errorf("the default tab does not say %q:\n%s", want, tab)
		}
	}
	if strings.Contains(tab, "하나도\n맞지 않습니다") || strings.Contains(tab, "하나도 맞지 않습니다") {
		t.Errorf("the default tab still says no legacy name matches:\n%s", tab)
	}
}

// The kubeadm blocks mute what kubeadm v1.37 prints on the sandbox's
// containerd 1.6 and on a cgroup v1 host (lines taken from a node run) and
// nothing that says how the join went.
func TestAuditKubeadmMutes(t *testing.T) {
	rb := bundledtest.Parse(t, "kubeadm-ha.md")
	noise := []string{
		`E1207 01:50:46.004775     435 remote_runtime.go:1359] "RuntimeConfig from runtime service failed" err="rpc error: code = Unimplemented desc = unknown method RuntimeConfig for service runtime.v1.RuntimeService"`,
		"\t[WARNING ContainerRuntimeVersion]: You must update your container runtime to a version that supports the CRI method RuntimeConfig.",
		"[preflight] The system verification failed. Printing the output from the verification:",
		"\x1b[0;37mCONFIG_NAMESPACES\x1b[0m: \x1b[0;32menabled\x1b[0m",
		"\x1b[0;37mCONFIG_AUFS_FS\x1b[0m: \x1b[0;33mnot set - Required for aufs.\x1b[0m",
		"\t[WARNING SystemVerification]: cgroups v1 support is deprecated and will be removed in a future release.",
	}
	signal := []string{
		"This node has joined the cluster and a new control plane instance was created:",
		"[preflight] Running pre-flight checks",
		"error execution phase preflight: [preflight] Some fatal errors occurred:",
		"\t[ERROR FileAvailable--etc-kubernetes-kubelet.conf]: /etc/kubernetes/kubelet.conf already exists",
		"[WARNING Port-6443]: Port 6443 is in use",
	}
	for _, id := range []string{"init-stacked", "init-external-no-upload", "join-control-plane-upload", "join-control-plane-manual", "join-workers-run"} {
		b := rb.BlockByID(id)
		if b.MuteWhy == "" {
			t.Errorf("%s: no mute.why", id)
		}
		for _, l := range noise {
			if !b.Muted(l) {
				t.Errorf("%s: not muted: %q", id, l)
			}
		}
		for _, l := range signal {
			if b.Muted(l) {
				t.Errorf("%s: muted, though it tells how the join went: %q", id, l)
			}
		}
	}
}
