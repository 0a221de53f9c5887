package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// nodeBins are what the node images are made of (scripts/sandbox-bins.sh).
var nodeBins = []string{"kube-scheduler", "kube-proxy", "coredns", "pause", "etcd-v3.7.0"}

// TestBundledKubeadmOnNodes runs content/kubeadm-ha.md from its first block
// to its last with `cairn run --yes` on sandbox nodes (cp0-cp2, w0; the
// etcd0-2 hosts for external etcd), once per way through it: stacked etcd
// with --upload-certs, external etcd with --upload-certs, and stacked etcd
// with the certificates copied by Cairn (CERT_DISTRIBUTION=copy). Every
// block that runs, runs against real components: kubeadm init and join,
// kubelet, containerd and runc, the control plane's static pods, etcd
// members, kube-proxy and CoreDNS from the images the runbook's air-gapped
// recipe imports, the bridge CNI the runbook writes, haproxy in front.
// What the test itself does is start and stop the sandbox, and read the
// cluster afterwards.
func TestBundledKubeadmOnNodes(t *testing.T) {
	bundledtest.NeedSandboxBins(t, nodeBins...)
	if os.Geteuid() != 0 {
		t.Skip("sandbox nodes need root (network, mount and PID namespaces)")
	}
	for _, tool := range []string{"containerd", "runc", "tini", "haproxy", "nc", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testrig.InCI() {
				t.Fatalf("%s not installed (scripts/ci-deps.sh installs it)", tool)
			}
			t.Skipf("%s not installed (scripts/ci-deps.sh)", tool)
		}
	}
	runs := []struct {
		name, topo, dist string
		etcdHosts        int
		exported         bool
		page             bool // the reader's walk in the page (Chromium), not cairn run
		then             func(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string)
	}{
		// The CCM runbook then runs on the control plane this run built:
		// a kubeadm-built control plane is what it starts from, and
		// building a second one would cost CI three more minutes. The
		// CCM run is the air-gapped site's: the exported script from the
		// offline bundle, with bash alone. The longest run, so it starts
		// first.
		// The kubeadm run is the reader's, in the page (#32): "Run from here"
		// and one confirmation, in at most 6 clicks.
		{"stacked-upload", "stacked", "upload", 0, false, true, runCCMExported},
		// The CCM runbook again, its node-side blocks through the API
		// (NODE_ACCESS=api: target=node), as on a cluster without SSH.
		{"external-upload", "external", "upload", 3, false, false, runCCMOnNodesAPI},
		// The manual certificate path by scp: the person at the terminal
		// (interactive); then blocks in pods and on nodes through the API.
		{"stacked-scp", "stacked", "scp", 0, false, false, runFanOutOnNodes},
		// The air-gapped site (airgap_test.go): the exported kubeadm script
		// builds this cluster from the offline bundle with bash alone, then
		// the exported Cilium script migrates it with the bundle's chart:
		// its agents as pods on these nodes. Last, and never beside a
		// cluster being built (see building).
		{"external-copy", "external", "copy", 3, true, false, runCiliumExported},
	}
	// Two clusters at a time, started in the order above: each run waits
	// on its nodes more than it computes (about a third of a core), and
	// each sandbox has its own bridge, namespaces and cgroup tree. Three
	// at a time is no faster on 2 cores (measured: each kubeadm run 300 s
	// instead of 140 to 200, and an apiserver's etcd-readiness failed
	// right after the last join). Cilium first, beside the CCM run, was
	// about 100 s faster in one CI-like run and failed the next: Cilium
	// waited for the lock while its idle cluster and a stacked cluster's
	// joins shared the cores, the joins timed out (TLS bootstrap), then
	// its own apiservers stopped answering. Last, it waits for nothing.
	// Goroutines, not t.Parallel: go test runs at most GOMAXPROCS
	// parallel subtests and picks their order itself.
	slots := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, tc := range runs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			t.Run(tc.name, func(t *testing.T) {
				runKubeadmOnNodes(t, tc.topo, tc.dist, tc.etcdHosts, tc.exported, tc.page, tc.then)
			})
		}()
	}
	wg.Wait()
}

// terminal is the person at `cairn run`'s terminal: it answers every
// confirmation with y and, at a manual step, does what the step says (do)
// before pressing Enter.
type terminal struct {
	mu      sync.Mutex
	out     bytes.Buffer
	seen    int
	block   string
	answers io.Writer
	do      func(block string) error
	errs    []error
}

// promptRE finds block headers and the two prompts.
var promptRE = regexp.MustCompile(`(?m)^\[\d+/\d+\] (\S+)|press Enter when done|Run it\? \[y/N\] `)

func (tm *terminal) Write(p []byte) (int, error) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.out.Write(p)
	for {
		rest := tm.out.Bytes()[tm.seen:]
		loc := promptRE.FindSubmatchIndex(rest)
		if loc == nil {
			break
		}
		tm.seen += loc[1]
		switch m := string(rest[loc[0]:loc[1]]); {
		case loc[2] >= 0:
			tm.block = string(rest[loc[2]:loc[3]])
		case strings.HasPrefix(m, "press Enter"):
			// cairn run reads the answer after this write returns.
			go func(block string) {
				if err := tm.do(block); err != nil {
					tm.mu.Lock()
					tm.errs = append(tm.errs, fmt.Errorf("manual step %s: %w", block, err))
					tm.mu.Unlock()
				}
				tm.answer("\n")
			}(tm.block)
		default:
			go tm.answer("y\n")
		}
	}
	return len(p), nil
}

// answer types a: echoed on the terminal, as a terminal does, then read
// by cairn run.
func (tm *terminal) answer(a string) {
	tm.mu.Lock()
	tm.out.WriteString(a)
	tm.mu.Unlock()
	_, _ = tm.answers.Write([]byte(a))
}

func (tm *terminal) String() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.out.String()
}

// building keeps the Cilium run away from clusters being built: a kubeadm
// run holds it for reading from sandbox up until its kube-system pods are
// ready, the Cilium run holds it for writing. Measured in CI, four agents
// compiling their datapath and 2 GB of image imports beside another
// cluster's stacked etcd joins starved that etcd (an apiserver's etcd
// readiness failed). Beside a runbook that restarts controller managers
// (the CCM run) it is fine. A waiting writer holds back new readers, so a
// run that would start beside Cilium waits for it.
var building sync.RWMutex

// With exported, the run is the air-gapped site's: the kubeadm script of
// the offline bundle, with bash alone, its images from the bundle's OCI
// layout; its signed results are compared with cairn run's verdicts.
func runKubeadmOnNodes(t *testing.T, topo, dist string, etcdHosts int, exported, page bool, then func(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string)) {
	start := time.Now()
	// Registered first, so it logs last, after the teardown's lines: a CI
	// log that keeps only its head and tail still shows where a run failed.
	var failedRun string
	t.Cleanup(func() {
		if failedRun != "" {
			t.Logf("where the run failed (the last lines of cairn run):\n%s", failedRun)
		}
	})
	phase := func(what string, since time.Time) { t.Logf("phase %-28s %6.1fs", what, time.Since(since).Seconds()) }
	building.RLock()
	var doneBuilding sync.Once
	built := func() { doneBuilding.Do(building.RUnlock) }
	defer built()
	phase("waiting for the Cilium run", start)
	dir := t.TempDir()
	sbDir := filepath.Join(dir, "sb")
	sb, err := sandbox.Up(bundledtest.Ctx(t, 3*time.Minute), sandbox.Options{StateDir: sbDir, DieWithParent: true, Nodes: true,
		EtcdHosts: etcdHosts, Progress: func(m string) { t.Log(m) }})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = sb.Down(context.Background())
		}
	})
	phase("sandbox up", start)
	inv, lb := sb.Inventory(), sb.LoadBalancer()

	params := map[string]string{
		"ETCD_TOPOLOGY": topo, "CERT_DISTRIBUTION": dist,
		"LOAD_BALANCER_DNS": lb.Name, "LOAD_BALANCER_PORT": strconv.Itoa(lb.Port),
		"FIRST_CP": "cp0", "CONTROL_PLANE_HOSTS": "cp1 cp2", "WORKER_HOSTS": "w0",
		"IMAGE_SOURCE": "archive", "IMAGE_ARCHIVE_DIR": inv.ImagesDir,
		"PREFLIGHT_IGNORE": "SystemVerification", "CNI_PLUGIN": "bridge", "POD_NETWORK_CIDR": "10.244.0.0/16",
		"COPY_USER": inv.User,
	}
	var site *siteBundle
	if exported {
		site = sharedSiteBundle(t)
		params["IMAGE_ARCHIVE_DIR"] = filepath.Join(site.root, "images")
	}
	if dist == "upload" {
		// The refresh blocks too: a new token and certificate key before
		// the joins (what a reader does after the 2-hour key expired).
		params["REFRESH_JOIN"] = "true"
	}
	// The external-etcd upload run is a reader's `cairn run --sandbox=yes`:
	// the sandbox gives the hosts and what it knows of itself (its load
	// balancer, login, image archives, preflight allowance, CNI and pod
	// range: sandbox/facts.go); the test checks it gave what the other
	// runs pass by hand.
	fromSandbox := topo == "external" && dist == "upload"
	var fromSandboxWant []string
	args := []string{"run", bundledtest.Path("kubeadm-ha.md"), "--kubeconfig", filepath.Join(dir, "no-kubeconfig"),
		"--journal", filepath.Join(dir, "journal.jsonl")}
	if fromSandbox {
		// A cgroup v2 machine passes SystemVerification: nothing to ignore.
		_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
		cgroupV1 := err != nil
		for _, k := range []string{"COPY_USER", "IMAGE_ARCHIVE_DIR", "IMAGE_SOURCE", "LOAD_BALANCER_DNS", "LOAD_BALANCER_PORT",
			"POD_NETWORK_CIDR", "PREFLIGHT_IGNORE", "CNI_PLUGIN"} {
			if k != "PREFLIGHT_IGNORE" || cgroupV1 {
				fromSandboxWant = append(fromSandboxWant, k+"="+params[k])
			}
			delete(params, k)
		}
		args = append(args, "--sandbox", "yes")
	} else {
		args = append(args, "--sandbox", "no",
			"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile)
	}
	for k, v := range params {
		args = append(args, "--param", k+"="+v)
	}
	var stderr bytes.Buffer
	rb := bundledtest.Parse(t, "kubeadm-ha.md")
	stdin, answers, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer answers.Close()
	var adminEnv []string
	stdout := &terminal{answers: answers, do: func(block string) error {
		// The load balancer, the etcd cluster and the agent are the
		// sandbox's; the certificate copies are the person's to make.
		switch block {
		case "ssh-agent-session":
			adminEnv = bundledtest.StartAdminAgent(t, inv.IdentityFile)
		case "scp-certs", "scp-etcd-ca-key", "scp-etcd-client-cert":
			out, err := bundledtest.RunAsAdmin(bundledtest.Ctx(t, time.Minute), inv, adminEnv, "cp0", rb.BlockByID(block).Content, params)
			t.Logf("the person at the terminal ran %s on cp0:\n%s", block, out)
			return err
		}
		return nil
	}}
	if dist != "scp" {
		args = append(args, "--yes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	runStart := time.Now()
	siteResults := filepath.Join(dir, "kubeadm-ha.results.jsonl")
	var pageRan map[string]bool
	switch {
	case page:
		// What the sandbox button fills in is left for it to fill.
		typed := map[string]string{}
		for _, k := range []string{"ETCD_TOPOLOGY", "CERT_DISTRIBUTION", "FIRST_CP", "CONTROL_PLANE_HOSTS", "WORKER_HOSTS", "REFRESH_JOIN"} {
			if v, ok := params[k]; ok {
				typed[k] = v
			}
		}
		pageRan = runKubeadmViaPage(ctx, t, sbDir, dir, typed)
		phase("kubeadm-ha from the page", runStart)
	case site != nil:
		scriptArgs := []string{"--ssh-config", inv.SSHConfig}
		if dist != "scp" {
			scriptArgs = append(scriptArgs, "--yes")
		}
		for k, v := range params {
			scriptArgs = append(scriptArgs, "--param", k+"="+v)
		}
		scriptArgs = append(scriptArgs, "--log", filepath.Join(dir, "kubeadm-ha.log"))
		err = resumeKilledJoins(ctx, t, site, inv.SSHConfig, dir, siteResults, scriptArgs, stdin, stdout, &stderr)
		params["REFRESH_JOIN"] = "true" // how the run resumed
		phase("exported kubeadm-ha.sh", runStart)
	default:
		err = cairnWith(ctx, []string{sandbox.EnvStateDir + "=" + sbDir}, stdin, stdout, &stderr, args...)
		phase("cairn run kubeadm-ha", runStart)
	}
	if err != nil {
		failedRun = bundledtest.Tail(stdout.String(), 40) + "\n" + stderr.String() + "\n" + clusterState(inv.SSHConfig, sbDir)
		t.Fatalf("cairn run: %v\n%s\n%s", err, stdout, stderr.String())
	}
	if fromSandbox {
		said := regexp.MustCompile(`(?m)^executor: from the sandbox: (.*)$`).FindStringSubmatch(stderr.String())
		for _, w := range fromSandboxWant {
			if said == nil || !slices.Contains(strings.Fields(said[1]), w) {
				t.Errorf("the sandbox did not give %s; cairn run said:\n%s", w, stderr.String())
			}
		}
	}
	ran := pageRan
	if !page {
		ran = checkRun(t, stdout)
	}
	if site != nil {
		site.checkSiteResults(t, rb, params, siteResults, filepath.Join(dir, "site-journal.db"))
	}
	init := map[string]string{"stacked": "init-stacked", "external": "init-external"}[topo]
	join := "join-control-plane-upload"
	if dist != "upload" {
		init, join = init+"-no-upload", "join-control-plane-manual"
	}
	want := []string{"check-versions-first-cp", "import-images-first-cp", "import-images-other-cp", "import-images-workers",
		"check-lb", init, "check-lb-readyz", "install-bridge-cni-first-cp", "wait-first-node-ready", "check-kube-system",
		join, "install-bridge-cni-other-cp", "check-control-plane-count", "join-workers-run", "install-bridge-cni-workers",
		"check-all-nodes-ready", "final-check-lb"}
	switch {
	case topo == "stacked":
		want = append(want, "check-stacked-etcd")
	default:
		want = append(want, "check-etcd-certs", "prepare-first-cp-pki", "copy-etcd-certs", "check-etcd-health", "write-kubeadm-config")
	}
	if site != nil {
		want = append(want, "reset-unfinished-joins", "refresh-token")
	}
	switch dist {
	case "upload":
		want = append(want, "refresh-token", "refresh-cert-key-"+topo)
	case "copy":
		want = append(want, "prepare-pki-dirs", "copy-shared-certs", "secure-copied-keys",
			map[string]string{"stacked": "copy-etcd-ca-key", "external": "copy-etcd-client-cert"}[topo])
	case "scp":
		want = append(want, "move-certs", "secure-copied-keys",
			map[string]string{"stacked": "move-etcd-ca-key", "external": "move-etcd-client-cert"}[topo])
	}
	for _, id := range want {
		if !ran[id] {
			t.Errorf("block %s did not run", id)
		}
	}
	executable := 0
	for _, b := range rb.Blocks {
		if b.Executable() && b.Target != runbook.TargetManual {
			executable++
		}
	}
	t.Logf("%s/%s: %d blocks ran for real (all verified) of %d executable non-manual blocks in the runbook", topo, dist, len(ran), executable)

	// The cluster the runbook built, read from cp0. Right after the last
	// join the API server behind the load balancer can be too busy to
	// finish a TLS handshake on this 2-core machine (CI saw "TLS handshake
	// timeout" once): a read is retried for up to 2 minutes, and only an
	// API server that stays unreachable fails the test.
	kc := func(args string) string {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			out, err := onNode(inv.SSHConfig, "cp0", "kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 20s "+args, time.Minute)
			if err == nil {
				return out
			}
			if time.Now().After(deadline) {
				t.Fatalf("kubectl %s: %v\n%s", args, err, out)
			}
			t.Logf("kubectl %s: %v (retrying): %s", args, err, strings.TrimSpace(out))
			time.Sleep(5 * time.Second)
		}
	}
	nodes := kc("get nodes --no-headers")
	for _, n := range []string{"cp0", "cp1", "cp2", "w0"} {
		if !regexp.MustCompile(`(?m)^` + n + `\s+Ready\s`).MatchString(nodes) {
			t.Errorf("node %s not Ready:\n%s", n, nodes)
		}
	}
	// The runbook's last checks are about nodes; the kube-system pods of
	// the nodes that joined last are still starting then. Every one of
	// them must come up: the control plane on each control-plane node,
	// kube-proxy on every node, CoreDNS.
	wantPods := map[string]int{"kube-apiserver-": 3, "kube-controller-manager-": 3, "kube-scheduler-": 3, "kube-proxy-": 4, "coredns-": 2}
	if topo == "stacked" {
		wantPods["etcd-"] = 3
	}
	var pods string
	var short []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		pods = kc("get pods -n kube-system -o wide --no-headers")
		short = nil
		for prefix, n := range wantPods {
			got := len(regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(prefix)+`\S+\s+1/1\s+Running\s`).FindAllString(pods, -1))
			if got != n {
				short = append(short, fmt.Sprintf("%d %s* pods Running and ready, want %d", got, prefix, n))
			}
		}
		if len(short) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Second)
	}
	if len(short) > 0 {
		t.Errorf("3 minutes after the run: %s:\n%s\n%s", strings.Join(short, "; "), pods,
			kc("get events -n kube-system --field-selector type=Warning"))
	}
	phase("kube-system pods ready", runStart)
	built()
	if topo == "external" && strings.Contains(pods, "etcd-cp") {
		t.Errorf("external etcd, yet an etcd static pod runs on a control-plane node:\n%s", pods)
	}
	// The images came from the archives, never from a registry.
	if out := kc("get events -A --field-selector reason=Pulling --no-headers"); strings.TrimSpace(out) != "" && !strings.Contains(out, "No resources found") {
		t.Errorf("kubelet pulled images:\n%s", out)
	}

	t.Logf("what the cluster costs at the end of the run: %s", nodesCost(sbDir, sandbox.CgroupTree(sbDir)))
	// No kubelet ran out of inotify instances (the sandbox raises the
	// machine's limit; without that a second cluster's kubelets exit and
	// restart for minutes).
	tooMany := regexp.MustCompile(`(?m)^.*too many open files.*$`)
	logs, _ := filepath.Glob(filepath.Join(sbDir, "logs", "kubelet-*.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			if line := tooMany.Find(data); line != nil {
				t.Errorf("%s: a kubelet ran out of inotify instances or files:\n%s", filepath.Base(l), line)
			}
		}
	}

	if then != nil {
		// A subtest, so that its clean-ups (RBAC it made) run while the
		// cluster is still up.
		// The run from the sandbox got its pod range from the sandbox's
		// facts, not from params.
		podCIDR := params["POD_NETWORK_CIDR"]
		if podCIDR == "" {
			podCIDR = sandbox.NodePodNetworkCIDR
		}
		t.Run(thenName(then), func(t *testing.T) { then(t, sb, dir, podCIDR) })
	}
	holdOnFailure(t, sb)

	// Tear-down leaves nothing behind: no process of a node, no cgroup, no
	// mount, no state.
	downStart := time.Now()
	if err := sb.Down(bundledtest.Ctx(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	stopped = true
	phase("sandbox down", downStart)
	assertNodesGone(t, sbDir, sandbox.CgroupTree(sbDir))
	phase("total", start)
}

// thenName names the subtest of a run's second runbook.
func thenName(then func(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string)) string {
	switch fmt.Sprintf("%p", then) {
	case fmt.Sprintf("%p", runCiliumOnNodes), fmt.Sprintf("%p", runCiliumExported):
		return "cilium-multipool"
	case fmt.Sprintf("%p", runFanOutOnNodes):
		return "pods-and-nodes"
	case fmt.Sprintf("%p", runCCMOnNodesAPI):
		return "ccm-leader-migration-via-api"
	}
	return "ccm-leader-migration"
}

// holdOnFailure keeps a failed run's nodes up for a person to look at
// when CAIRN_NODETEST_HOLD names a file: until that file is removed, an
// hour at most. Never in CI.
func holdOnFailure(t *testing.T, sb *sandbox.Sandbox) {
	hold := os.Getenv("CAIRN_NODETEST_HOLD")
	if hold == "" || !t.Failed() || testrig.InCI() {
		return
	}
	if err := os.WriteFile(hold, []byte(sb.Inventory().SSHConfig+"\n"), 0o644); err != nil {
		t.Logf("hold: %v", err)
		return
	}
	t.Logf("holding the nodes until %s is removed (ssh -F %s cp0)", hold, sb.Inventory().SSHConfig)
	for deadline := time.Now().Add(time.Hour); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		if _, err := os.Stat(hold); err != nil {
			return
		}
	}
}

// checkRun logs what cairn run printed at the terminal, reports the manual
// steps the terminal failed to do, and fails each block that ran and was
// not verified. It returns the blocks that ran.
func checkRun(t *testing.T, tm *terminal) map[string]bool {
	t.Helper()
	t.Logf("cairn run output:\n%s", tm.String())
	for _, e := range tm.errs {
		t.Error(e)
	}
	ran := map[string]bool{}
	for _, o := range bundledtest.Outcomes(tm.String()) {
		id, status, _ := strings.Cut(o, " ")
		if status != "✓ verified" {
			t.Errorf("block %s: %s", id, status)
		}
		ran[id] = true
	}
	return ran
}

// assertNodesGone fails if anything of the node sandbox in dir is left:
// a process of a node (a container's included), a mount, a cgroup.
func assertNodesGone(t *testing.T, dir, cgroupTree string) {
	t.Helper()
	for _, pid := range testrig.PIDs() {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		c := strings.ReplaceAll(string(cmd), "\x00", " ")
		if strings.Contains(c, dir) {
			t.Errorf("left running: pid %d %s", pid, c)
		}
		if cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); strings.Contains(string(cg), cgroupTree+"/") {
			t.Errorf("left in a node's cgroup: pid %d %s", pid, c)
		}
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), dir) {
		t.Errorf("mounts of %s left", dir)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/*" + cgroupTree); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s left", dir)
	}
	// containerd pins pod network namespaces in /run/netns: the nodes'
	// own, never this machine's.
	if left, _ := filepath.Glob("/run/netns/cni-*"); len(left) > 0 {
		t.Errorf("pod network namespaces left in this machine's /run/netns: %v", left)
	}
}

// nodesCost sums what the node sandbox in dir costs now: the resident
// memory and the CPU time of the nodes' own daemons (kubelet, containerd
// and its shims: the processes carrying the sandbox's marker) and of the
// pods (the kubelets' cgroup tree, whose CPU count includes exited
// containers).
func nodesCost(dir, tree string) string {
	marker := []byte("CAIRN_SANDBOX_SESSION=" + dir + "\x00")
	var daemonRSS, podRSS, daemonTicks int64
	for _, pid := range testrig.PIDs() {
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		var rss int64
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				rss, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		switch {
		case strings.Contains(string(cg), tree+"/"):
			podRSS += rss
		case bytes.Contains(append(env, 0), marker):
			daemonRSS += rss
			if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
				if i := bytes.LastIndexByte(st, ')'); i > 0 {
					if f := strings.Fields(string(st[i+1:])); len(f) > 12 {
						u, _ := strconv.ParseInt(f[11], 10, 64)
						s, _ := strconv.ParseInt(f[12], 10, 64)
						daemonTicks += u + s
					}
				}
			}
		}
	}
	podCPU := "?"
	if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct" + tree + "/cpuacct.usage"); err == nil {
		if ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			podCPU = fmt.Sprintf("%.0f s", float64(ns)/1e9)
		}
	}
	return fmt.Sprintf("memory %d MiB resident (pods %d MiB, node daemons %d MiB); CPU: pods %s, node daemons %.0f s (live ones)",
		(podRSS+daemonRSS)/1024, podRSS/1024, daemonRSS/1024, podCPU, float64(daemonTicks)/100)
}

// clusterState is what a failed run leaves to read before teardown: the
// nodes and kube-system pods as cp0 sees them, the last lines of each
// kube-controller-manager (it allocates pod CIDRs) and of each kubelet.
// Every probe is bounded; a probe that fails says so and the rest go on.
func clusterState(sshConfig, sbDir string) string {
	var b strings.Builder
	probe := func(host, cmd string) {
		out, err := onNode(sshConfig, host, cmd, 20*time.Second)
		fmt.Fprintf(&b, "--- %s: %s", host, cmd)
		if err != nil {
			fmt.Fprintf(&b, " (%v)", err)
		}
		fmt.Fprintf(&b, "\n%s\n", bundledtest.Tail(string(out), 30))
	}
	kc := "kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 10s "
	probe("cp0", kc+"get nodes -o wide")
	probe("cp0", kc+"get pods -n kube-system -o wide")
	probe("cp0", kc+"get leases -n kube-system")
	for _, h := range []string{"cp0", "cp1", "cp2"} {
		probe(h, "tail -n 15 /var/log/pods/kube-system_kube-controller-manager-*/*/*.log 2>&1")
	}
	for _, h := range []string{"cp0", "cp1", "cp2", "w0"} {
		if data, err := os.ReadFile(filepath.Join(sbDir, "logs", "kubelet-"+h+".log")); err == nil {
			fmt.Fprintf(&b, "--- kubelet-%s.log\n%s\n", h, bundledtest.Tail(string(data), 25))
		}
	}
	return b.String()
}
