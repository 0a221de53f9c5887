package nodetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

// The CCM runbook on the control plane the kubeadm runbook built: cp0-cp2
// run kube-controller-manager as kubeadm's static pod, and every change the
// runbook asks for is an edit of a manifest that kubelet acts on.
//
// What is real: kubelet, containerd and the static pods it restarts on each
// edit; kube-controller-manager v1.30.14 (version N, the last release with
// in-tree cloud providers, here the library's fake one) from an image;
// kube-controller-manager v1.37.2 (N+1, --cloud-provider=external) from
// kubeadm's own image; cloud-controller-manager v1.37.2 (k8s.io/cloud-provider
// with the fake provider) from an image; the RBAC, leases and leader
// election of a kubeadm-built cluster. What the test plays: the provider's
// part (images in each node's runtime, the CCM's credentials and RBAC, the
// CCM's manifest) and the person doing the manual steps. The pairing is
// outside Kubernetes' skew policy (a v1.30 controller manager against a
// v1.37 apiserver, where one minor is allowed): no v1.30 apiserver, kubelet
// and kubeadm are built here, and the runbook's subject, leader election
// on Leases, is the same API on both.

// cmLogGlob finds the controller managers' container logs on a node.
const cmLogGlob = "/var/log/pods/kube-system_*-controller-manager-*/*/*.log"

// cmLogs copies the controller managers' container logs off the nodes as
// they grow: kubelet deletes a static pod's logs soon after its manifest
// changes, and the proof is in the logs of the pods that are gone.
type cmLogs struct {
	dir   string
	roots map[string]string // host → its private root
	mu    sync.Mutex
	seen  map[string]time.Time // copy → when it was first seen
	size  map[string]int
}

func (l *cmLogs) sweep() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for host, root := range l.roots {
		files, _ := filepath.Glob(filepath.Join(root, cmLogGlob))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || len(data) <= l.size[f] {
				continue
			}
			rel, _ := filepath.Rel(filepath.Join(root, "var/log/pods"), f)
			dst := filepath.Join(l.dir, host, rel)
			if _, ok := l.seen[dst]; !ok {
				l.seen[dst] = time.Now()
			}
			l.size[f] = len(data)
			_ = os.MkdirAll(filepath.Dir(dst), 0o755)
			_ = os.WriteFile(dst, data, 0o644)
		}
	}
}

// follow sweeps every second until ctx ends, then once more; the returned
// function waits for that.
func (l *cmLogs) follow(ctx context.Context) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				l.sweep()
				return
			case <-t.C:
				l.sweep()
			}
		}
	}()
	return func() { <-done }
}

// tails is the last n lines of every log copied, oldest first.
func (l *cmLogs) tails(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	files := make([]string, 0, len(l.seen))
	for f := range l.seen {
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b string) int { return l.seen[a].Compare(l.seen[b]) })
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		rel, _ := filepath.Rel(l.dir, f)
		fmt.Fprintf(&b, "--- %s (first seen %s)\n%s\n", rel, l.seen[f].Format(time.TimeOnly), bundledtest.Tail(string(data), n))
	}
	return b.String()
}

// cmLine is one line of a container log: when, and klog's message.
type cmLine struct {
	at  time.Time
	msg string
}

func readCMLog(path string) []cmLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cmLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// CRI log format: RFC3339Nano stream tag message.
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) < 4 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, parts[0])
		if err != nil {
			continue
		}
		out = append(out, cmLine{at, parts[3]})
	}
	return out
}

// ccmStages are the times the test changed the controller managers: the
// first CCM manifest written, and the first CCM manifest without Leader
// Migration written.
type ccmStages struct {
	firstCCM, migrationOff time.Time
}

// lockViolations reads every controller manager log copied and lists each
// start of a cloud controller that broke the runbook's promise: from the
// first CCM on, a cloud controller starts only under the migration lock
// (after "leader migration: starting migrated controllers" in the same
// process's log), until Leader Migration is turned off on the CCMs, when
// kube-controller-manager must not start one at all.
func (l *cmLogs) lockViolations(st ccmStages) (violations []string, underLock map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	underLock = map[string]int{}
	for file, firstSeen := range l.seen {
		rel, _ := filepath.Rel(l.dir, file)
		kcm := strings.Contains(rel, "kube-controller-manager")
		migrated := false
		for _, ln := range readCMLog(file) {
			if strings.Contains(ln.msg, "leader migration: starting migrated controllers") {
				migrated = true
				continue
			}
			for _, c := range bundledtest.CloudControllers {
				if !bundledtest.StartedRe(c).MatchString(ln.msg) {
					continue
				}
				switch {
				case migrated:
					underLock[map[bool]string{true: "kube-controller-manager", false: "cloud-controller-manager"}[kcm]]++
				case ln.at.Before(st.firstCCM):
					// Version N before any CCM: the starting state.
				case !kcm && !st.migrationOff.IsZero() && !firstSeen.Before(st.migrationOff):
					// A CCM started with Leader Migration off, after the
					// runbook turned it off: its own lock is the only one.
				default:
					violations = append(violations, fmt.Sprintf("%s: %s started %s outside the migration lock", rel, ln.at.Format(time.RFC3339Nano), c))
				}
			}
		}
	}
	slices.Sort(violations)
	return violations, underLock
}

// readManifest and writeManifest read and write a static pod manifest on a
// node, from this machine, through the node's private root. A write goes to a hidden file
// beside it first (kubelet skips names starting with a dot) and is renamed
// over the manifest, so kubelet never reads half a file.
func readManifest(path string) (*corev1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &pod, nil
}

func writeManifest(path string, pod *corev1.Pod) error {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".cairn-test")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// editManifest reads, changes and writes back a manifest.
func editManifest(path string, edit func(*corev1.Pod)) error {
	pod, err := readManifest(path)
	if err != nil {
		return err
	}
	edit(pod)
	return writeManifest(path, pod)
}

// setArg sets --name=value in the first container's command (value ""
// removes the flag); setFlag adds a bare --name.
func setArg(pod *corev1.Pod, name, value string) {
	c := &pod.Spec.Containers[0]
	c.Command = slices.DeleteFunc(c.Command, func(a string) bool { return a == "--"+name || strings.HasPrefix(a, "--"+name+"=") })
	if value != "" {
		c.Command = append(c.Command, "--"+name+"="+value)
	}
}

func setFlag(pod *corev1.Pod, name string) {
	setArg(pod, name, "")
	pod.Spec.Containers[0].Command = append(pod.Spec.Containers[0].Command, "--"+name)
}

// migrationFile is the runbook's LEADER_MIGRATION_FILE here: in the
// nodes' private /etc/kubernetes, not this machine's /etc, which the
// sandbox's hosts share.
const migrationFile = "/etc/kubernetes/leadermigration.conf"

// withMigration turns Leader Migration on or off in a controller manager's
// manifest: the two flags and the configuration file's hostPath mount.
func withMigration(pod *corev1.Pod, on bool) {
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "leadermigration" })
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "leadermigration" })
	setArg(pod, "enable-leader-migration", "")
	setArg(pod, "leader-migration-config", "")
	if !on {
		return
	}
	setFlag(pod, "enable-leader-migration")
	setArg(pod, "leader-migration-config", migrationFile)
	file := corev1.HostPathFile
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "leadermigration", MountPath: migrationFile, ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "leadermigration",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: migrationFile, Type: &file}}})
}

// ccmManifest is the provider's cloud-controller-manager static pod, with
// what the runbook's excerpt adds when migration is on.
func ccmManifest(podCIDR string, migration bool) *corev1.Pod {
	file := corev1.HostPathFile
	conf := "/etc/kubernetes/cloud-controller-manager.conf"
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "cloud-controller-manager", Namespace: "kube-system", Labels: map[string]string{"component": "cloud-controller-manager", "tier": "control-plane"}},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name:            "cloud-controller-manager",
				Image:           sandbox.ImageCCM,
				ImagePullPolicy: corev1.PullNever,
				Command: []string{"cloud-controller-manager", "--cloud-provider=fake", "--leader-elect=true",
					"--kubeconfig=" + conf, "--authentication-kubeconfig=" + conf, "--authorization-kubeconfig=" + conf,
					"--allocate-node-cidrs=true", "--cluster-cidr=" + podCIDR, "--configure-cloud-routes=true"},
				VolumeMounts: []corev1.VolumeMount{{Name: "kubeconfig", MountPath: conf, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "kubeconfig", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: conf, Type: &file}}}},
		},
	}
	withMigration(pod, migration)
	return pod
}

// onNode runs a shell command on a node as root over SSH, for at most
// within.
func onNode(sshConfig, host, cmd string, within time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", "-F", sshConfig, host, cmd).CombinedOutput()
	return string(out), err
}

// onNodes runs a shell command as root on every one of hosts at once,
// for at most within each, and fails the test with the output of each host
// where it failed.
func onNodes(t *testing.T, sshConfig string, hosts []string, what string, within time.Duration, cmd string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := onNode(sshConfig, h, cmd, within); err != nil {
				errs[i] = fmt.Errorf("%s: %s: %v\n%s", h, what, err, out)
			}
		}()
	}
	wg.Wait()
	failed := false
	for _, err := range errs {
		if err != nil {
			t.Error(err)
			failed = true
		}
	}
	if failed {
		t.FailNow()
	}
}

// cmProbe prints a node's controller manager processes and their healthz.
const cmProbe = `for p in kube-controller-manager cloud-controller-manager; do echo "$p: $(pgrep -af "^[^ ]*$p( |\$)" | tr '\n' ' ')"; done
echo "kcm healthz: $(curl -sk --max-time 5 https://127.0.0.1:10257/healthz)"
echo "ccm healthz: $(curl -sk --max-time 5 https://127.0.0.1:10258/healthz)"`

// waitNode waits (3 minutes at most) until cmProbe's output on host
// satisfies ok, and fails with the last output if it does not.
func waitNode(sshConfig, host, what string, ok func(string) bool) error {
	var out string
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Second) {
		out, _ = onNode(sshConfig, host, cmProbe, time.Minute)
		if ok(out) {
			return nil
		}
	}
	return fmt.Errorf("%s: not %s within 3 minutes:\n%s", host, what, out)
}

// probeLine is the line of cmProbe's output for prefix.
func probeLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func runCCMOnNodes(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string) {
	runCCM(t, sb, dir, podCIDR, "ssh", nil)
}

// runCCMExported is the air-gapped site's run (airgap_test.go): the CCM
// script of the offline bundle with bash alone, its node-side blocks over
// SSH; the provider's part is the test's, as with cairn run.
func runCCMExported(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string) {
	runCCM(t, sb, dir, podCIDR, "ssh", sharedSiteBundle(t))
}

// runCCMOnNodesAPI is runCCMOnNodes with NODE_ACCESS=api: the node-side
// blocks reach the nodes through the API (target=node), not over SSH.
func runCCMOnNodesAPI(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR string) {
	runCCM(t, sb, dir, podCIDR, "api", nil)
}

// nodeSideBlocks are the CCM runbook's blocks that run on the nodes: over
// SSH, or with NODE_ACCESS=api as their -api twins (target=node).
var nodeSideBlocks = []string{"check-kcm-flags", "backup-kcm-manifest", "write-kcm-config-wildcard", "check-kcm-migration-enabled",
	"write-ccm-config-wildcard", "check-n1-nodes", "check-ccm-migration-off", "remove-migration-config"}

func runCCM(t *testing.T, sb *sandbox.Sandbox, dir, podCIDR, access string, site *siteBundle) {
	start := time.Now()
	inv := sb.Inventory()
	cps := []string{"cp0", "cp1", "cp2"}
	roots := map[string]string{}
	for _, h := range inv.Hosts {
		if slices.Contains(cps, h.Name) {
			roots[h.Name] = h.Root
		}
	}
	manifest := func(host, name string) string {
		return filepath.Join(roots[host], "etc/kubernetes/manifests", name+".yaml")
	}
	// The reader's kubeconfig: the cluster's admin credentials under the
	// context the runbook allows (kube.contexts).
	kubeconfig := readerKubeconfig(t, inv, dir, "ccm-kubeconfig")
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rest)

	logs := &cmLogs{dir: filepath.Join(dir, "cm-logs"), roots: roots, seen: map[string]time.Time{}, size: map[string]int{}}
	followCtx, stopFollow := context.WithCancel(context.Background())
	waitFollow := logs.follow(followCtx)
	defer func() { stopFollow(); waitFollow() }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the controller managers' logs, last lines:\n%s", logs.tails(12))
		}
	})

	// The provider's part: its images in each node's runtime, credentials
	// for its CCM (a client certificate from the cluster CA, which every
	// control-plane node holds after an --upload-certs join), its RBAC.
	provStart := time.Now()
	onNodes(t, inv.SSHConfig, cps, "the provider's images and credentials", 2*time.Minute,
		fmt.Sprintf("set -e; for f in %s/*.tar; do ctr -n k8s.io images import \"$f\" >/dev/null; done; "+
			"kubeadm kubeconfig user --client-name=%s > /etc/kubernetes/cloud-controller-manager.conf.new && "+
			"mv /etc/kubernetes/cloud-controller-manager.conf.new /etc/kubernetes/cloud-controller-manager.conf; crictl images | grep cairn.internal",
			filepath.Join(inv.ImagesDir, sandbox.CCMImagesDir), bundledtest.CCMUser))
	bundledtest.ProviderRBAC(t, client)
	t.Logf("phase %-28s %6.1fs", "provider's images, credentials", time.Since(provStart).Seconds())

	// Version N: the runbook starts from a control plane whose
	// kube-controller-manager runs an in-tree cloud provider. kubeadm
	// v1.37 writes one without; the operator of a v1.30 cluster has this.
	for _, h := range cps {
		if err := editManifest(manifest(h, "kube-controller-manager"), func(pod *corev1.Pod) {
			pod.Spec.Containers[0].Image = sandbox.ImageKCMN
			setArg(pod, "cloud-provider", "fake")
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range cps {
		if err := waitNode(inv.SSHConfig, h, "running version N", func(out string) bool {
			return strings.Contains(probeLine(out, "kube-controller-manager:"), "--cloud-provider=fake") && strings.Contains(out, "kcm healthz: ok")
		}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("phase %-28s %6.1fs", "version N control plane", time.Since(start).Seconds())

	var st ccmStages
	var stMu sync.Mutex
	// Through the API, the reader has the page open too: the manual
	// manifest edit is done in the page's terminal on each node (below).
	var hands *pageHands
	do := func(block string) error {
		switch block {
		case "edit-kcm-manifests":
			// One node at a time, each back and healthy before the next.
			for i, h := range cps {
				if hands != nil {
					if err := hands.try(func() {
						hands.open("edit-kcm-manifests", h)
						hands.typeLine("edit the manifest on "+h, kcmMigrationEdit)
						hands.waitScreen("the edit on "+h, `\nedited-6`, 60*time.Second)
					}); err != nil {
						return err
					}
				} else if err := editManifest(manifest(h, "kube-controller-manager"), func(pod *corev1.Pod) { withMigration(pod, true) }); err != nil {
					return err
				}
				if err := waitNode(inv.SSHConfig, h, "running KCM with Leader Migration", func(out string) bool {
					return strings.Contains(probeLine(out, "kube-controller-manager:"), "--enable-leader-migration") && strings.Contains(out, "kcm healthz: ok")
				}); err != nil {
					return err
				}
				if hands != nil {
					// The step is done once the last node is.
					if err := hands.try(func() { hands.finish(i == len(cps)-1) }); err != nil {
						return err
					}
				}
			}
		case "create-first-n1-node", "replace-remaining-nodes":
			// In place: version N+1's KCM (kubeadm's image, external
			// provider, no Leader Migration) and the CCM with it.
			hosts := cps[:1]
			if block == "replace-remaining-nodes" {
				hosts = cps[1:]
			}
			for _, h := range hosts {
				stMu.Lock()
				if st.firstCCM.IsZero() {
					st.firstCCM = time.Now()
				}
				stMu.Unlock()
				if err := writeManifest(manifest(h, "cloud-controller-manager"), ccmManifest(podCIDR, true)); err != nil {
					return err
				}
				if err := editManifest(manifest(h, "kube-controller-manager"), func(pod *corev1.Pod) {
					pod.Spec.Containers[0].Image = "registry.k8s.io/kube-controller-manager:" + sandbox.KubeVersion
					withMigration(pod, false)
					setArg(pod, "cloud-provider", "external")
				}); err != nil {
					return err
				}
				if err := waitNode(inv.SSHConfig, h, "running version N+1", func(out string) bool {
					return strings.Contains(probeLine(out, "kube-controller-manager:"), "--cloud-provider=external") &&
						strings.Contains(probeLine(out, "cloud-controller-manager:"), "--enable-leader-migration") &&
						strings.Contains(out, "kcm healthz: ok") && strings.Contains(out, "ccm healthz: ok")
				}); err != nil {
					return err
				}
			}
		case "remove-ccm-migration-flags":
			for _, h := range cps {
				stMu.Lock()
				if st.migrationOff.IsZero() {
					st.migrationOff = time.Now()
				}
				stMu.Unlock()
				if err := editManifest(manifest(h, "cloud-controller-manager"), func(pod *corev1.Pod) { withMigration(pod, false) }); err != nil {
					return err
				}
				if err := waitNode(inv.SSHConfig, h, "running the CCM without Leader Migration", func(out string) bool {
					l := probeLine(out, "cloud-controller-manager:")
					return strings.Contains(l, "--cloud-provider=fake") && !strings.Contains(l, "--enable-leader-migration") && strings.Contains(out, "ccm healthz: ok")
				}); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("no action for manual step %s", block)
		}
		return nil
	}

	params := map[string]string{"CONTROL_PLANE_HOSTS": "cp0 cp1 cp2", "NEW_CONTROL_PLANE_HOSTS": "cp0 cp1 cp2",
		"LEADER_MIGRATION_FILE": migrationFile, "LEADER_MIGRATION_CONFIG": "wildcard", "CONTROLLER_NAMES": "current", "DISABLE_LEADER_MIGRATION": "true",
		"NODE_ACCESS": access, "NODE_IMAGE": sandbox.ImageNodeShell, "CCM_USER": bundledtest.CCMUser}
	if access == "api" {
		hands = newPageHands(t, dir, "ccm-leader-migration.md", kubeconfig, inv, params)
	}
	// Interactive, as a reader runs it: cairn run waits at each manual
	// step until the terminal has done it (with --yes it would go on).
	args := []string{"run", bundledtest.Path("ccm-leader-migration.md"), "--sandbox", "no",
		"--kubeconfig", kubeconfig,
		"--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile,
		"--journal", filepath.Join(dir, "ccm-journal.jsonl")}
	for k, v := range params {
		args = append(args, "--param", k+"="+v)
	}
	stdin, answers, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer answers.Close()
	stdout := &terminal{answers: answers, do: do}
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	runStart := time.Now()
	siteResults := filepath.Join(dir, "ccm-leader-migration.results.jsonl")
	if site != nil {
		scriptArgs := []string{"--kubeconfig", kubeconfig, "--ssh-config", inv.SSHConfig}
		for k, v := range params {
			scriptArgs = append(scriptArgs, "--param", k+"="+v)
		}
		err = site.run(ctx, dir, "ccm-leader-migration.sh", siteResults, scriptArgs, stdin, stdout, &stderr)
		t.Logf("phase %-28s %6.1fs", "exported ccm-leader-migration.sh", time.Since(runStart).Seconds())
	} else {
		err = cairn(ctx, stdin, stdout, &stderr, args...)
		t.Logf("phase %-28s %6.1fs", "cairn run ccm-leader-migration", time.Since(runStart).Seconds())
	}
	if err != nil {
		stopFollow()
		waitFollow()
		out, _ := onNode(inv.SSHConfig, "cp0", "kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout 10s get leases,pods -n kube-system -o wide", 20*time.Second)
		t.Fatalf("cairn run: %v\n%s\n%s\n%s\nmanual steps: %v", err, stdout, stderr.String(), out, stdout.errs)
	}
	ran := checkRun(t, stdout)
	for _, id := range []string{"check-kcm-lease", "check-no-ccm-lease", "check-kcm-flags", "backup-kcm-manifest",
		"get-kcm-lock-role", "patch-kcm-lock-role", "patch-ccm-lock-role", "can-i-migration-lease", "can-i-migration-lease-ccm", "write-kcm-config-wildcard",
		"check-kcm-migration-enabled", "wait-migration-lease", "check-owner-kcm", "write-ccm-config-wildcard",
		"wait-ccm-lease", "check-owner-mixed", "check-n1-nodes", "check-owner-ccm", "list-kcm-images",
		"check-ccm-migration-off", "remove-migration-config", "delete-migration-lease"} {
		if access == "api" && slices.Contains(nodeSideBlocks, id) {
			if ran[id] {
				t.Errorf("block %s ran over SSH with NODE_ACCESS=api", id)
			}
			id += "-api"
		}
		if !ran[id] {
			t.Errorf("block %s did not run", id)
		}
	}
	if hands != nil {
		// The page's terminal session of the manual step, in the journal:
		// done by hand on the last node, with what was typed and printed.
		rec := hands.record("edit-kcm-manifests")
		if rec["status"] != "by-hand" || rec["target"] != "terminal" || rec["where"] != "cp2 (ssh)" || !strings.Contains(fmt.Sprint(rec["output"]), "edited-") {
			t.Errorf("the manual step's terminal session in the journal: %v", rec)
		}
		if err := hands.try(func() {
			hands.pg.Poll("the page showing the manual step as done by hand", `document.querySelector("#block-edit-kcm-manifests .cb-result .status-by-hand")`, 30*time.Second)
		}); err != nil {
			t.Error(err)
		}
	}
	rb := bundledtest.Parse(t, "ccm-leader-migration.md")
	if site != nil {
		site.checkSiteResults(t, rb, params, siteResults, filepath.Join(dir, "site-journal.db"))
	}
	executable := 0
	for _, b := range rb.Blocks {
		if b.Executable() && b.Target != runbook.TargetManual {
			executable++
		}
	}
	t.Logf("%d blocks ran on the nodes (all verified) of %d executable non-manual blocks in the runbook", len(ran), executable)
	if images := outputOf(stdout.String(), "list-kcm-images"); strings.Contains(images, sandbox.KCMNVersion) {
		t.Errorf("list-kcm-images still shows version N:\n%s", images)
	}

	// The proof: no cloud controller ran outside the migration lock while
	// both generations ran, and the lock did change hands.
	stopFollow()
	waitFollow()
	stMu.Lock()
	stages := st
	stMu.Unlock()
	violations, underLock := logs.lockViolations(stages)
	for _, v := range violations {
		t.Error(v)
	}
	if underLock["kube-controller-manager"] == 0 || underLock["cloud-controller-manager"] == 0 {
		t.Errorf("cloud controllers started under the migration lock: %v; want both generations", underLock)
	}
	t.Logf("cloud controller starts under the migration lock: %v; %d controller manager logs read (in %s)", underLock, len(logs.seen), logs.dir)
	if _, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), bundledtest.MigrationLease, metav1.GetOptions{}); err == nil {
		t.Errorf("the migration lease is back after delete-migration-lease: a component still has Leader Migration on")
	}
	t.Logf("phase %-28s %6.1fs", "ccm total", time.Since(start).Seconds())
}

// outputOf is what cairn run printed for block id: its header and the
// lines after it, up to the next block's header.
func outputOf(out, id string) string {
	i := strings.Index(out, "] "+id+"  ")
	if i < 0 {
		return ""
	}
	rest := out[i:]
	if j := strings.Index(rest, "\n["); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
