package nodetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
	"github.com/chromedp/chromedp"
)

// runFanOutOnNodes runs target=pod and target=node blocks through `cairn
// run` on the cluster a kubeadm run built: real kubelets and containerd,
// exec through the real apiserver (testdata/fanout.md). Then the node
// pods' life: a cancelled run deletes its pod and ends the script's
// processes on the node; a run killed with SIGKILL leaves its pod, and the
// next node block of that machine deletes it (and with it the processes).
func runFanOutOnNodes(t *testing.T, sb *sandbox.Sandbox, dir, _ string) {
	inv := sb.Inventory()
	kubeconfig := readerKubeconfig(t, inv, dir, "fanout-kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"--kubeconfig", kubeconfig, "--sandbox", "no", "--yes", "--journal", filepath.Join(dir, "fanout-journal.db")}
	run := func(t *testing.T, runbook string, extra ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := cairn(bundledtest.Ctx(t, 5*time.Minute), nil, &out, &errOut, append(append([]string{"run", runbook}, common...), extra...)...)
		return out.String() + errOut.String(), err
	}
	cairnPods := func(t *testing.T) []string {
		t.Helper()
		l, err := core.Pods("").List(bundledtest.Ctx(t, time.Minute), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=cairn"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range l.Items {
			names = append(names, p.Namespace+"/"+p.Name+" ("+string(p.Status.Phase)+")")
		}
		return names
	}
	// noCairnPods waits (a minute at most) until no pod Cairn made is left.
	noCairnPods := func(t *testing.T, after string) {
		t.Helper()
		var left []string
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			if left = cairnPods(t); len(left) == 0 {
				return
			}
		}
		t.Errorf("after %s, pods Cairn made are left on the cluster: %v", after, left)
	}
	noProcess := func(t *testing.T, node, pattern, after string) {
		t.Helper()
		out, err := onNode(inv.SSHConfig, node, "pgrep -af "+pattern+" || true", time.Minute)
		if err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("after %s, the script's process is left on %s (%v):\n%s", after, node, err, out)
		}
	}

	t.Run("blocks", func(t *testing.T) {
		out, err := run(t, filepath.Join("testdata", "fanout.md"))
		if err != nil {
			t.Fatalf("cairn run: %v\n%s", err, out)
		}
		if !strings.Contains(out, "9 verified, 0 skipped of 9 blocks") {
			t.Errorf("not every block verified:\n%s", out)
		}
		// One result per pod, one per node: each named in its lines.
		for _, n := range []string{"cp0", "cp1", "cp2", "w0"} {
			if !regexp.MustCompile(`(?m)cairn-shell-\w+: hello from ` + n + `$`).MatchString(out) {
				t.Errorf("no pod of the DaemonSet said hello from %s:\n%s", n, out)
			}
		}
		for _, n := range []string{"cp0", "cp1", "cp2"} {
			if !strings.Contains(out, n+": kube-apiserver.yaml") || !strings.Contains(out, n+": root") {
				t.Errorf("the node block did not list %s's static pods as root:\n%s", n, out)
			}
		}
		if c := strings.Count(out, ": about to exit 3"); c != 4 {
			t.Errorf("exit-three ran in %d pods, want 4:\n%s", c, out)
		}
		if o, _ := onNode(inv.SSHConfig, "w0", "ls /tmp/cairn-pwned 2>&1 || true", time.Minute); !strings.Contains(o, "No such file") {
			t.Errorf("a parameter value ran as a command on w0: %s", o)
		}
		noCairnPods(t, "a run")
	})

	// The same runbook exported: bash and kubectl alone, the same verdicts.
	t.Run("exported", func(t *testing.T) {
		script := filepath.Join(dir, "fanout.sh")
		var out bytes.Buffer
		if err := cairn(bundledtest.Ctx(t, time.Minute), nil, &out, &out, "export", filepath.Join("testdata", "fanout.md"), "-o", script); err != nil {
			t.Fatalf("cairn export: %v\n%s", err, out.String())
		}
		cmd := exec.CommandContext(bundledtest.Ctx(t, 5*time.Minute), "bash", script, "--kubeconfig", kubeconfig, "--yes", "--log", filepath.Join(dir, "fanout.log"))
		cmd.Env = append(os.Environ(), "PATH="+sandbox.BinDir()+":"+os.Getenv("PATH"))
		got, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(got), "9 verified, 0 skipped of 9 blocks") {
			t.Fatalf("the exported script: %v\n%s", err, got)
		}
		if c := strings.Count(string(got), "│ hello from "); c != 4 {
			t.Errorf("the exported script ran hello-pods in %d pods, want 4:\n%s", c, got)
		}
		noCairnPods(t, "the exported script")
	})

	// From the page, in Chromium: Run on pod and node blocks, one result
	// per pod and node; Copy gives the kubectl commands that do the same.
	t.Run("page", func(t *testing.T) { fanOutInBrowser(t, kubeconfig, dir, noCairnPods) })

	long := filepath.Join(dir, "fanout-long.md")
	if err := os.WriteFile(long, []byte("---\ntitle: long\n---\n\n# Long\n\n## Sleep {#sleep}\n\n"+
		"```bash {#sleep-on-node target=node nodes=w0 namespace=kube-system image="+sandbox.ImageNodeShell+" timeout=10m}\necho started\nsleep 7771\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "fanout-short.md")
	if err := os.WriteFile(short, []byte("---\ntitle: short\n---\n\n# Short\n\n## Hi {#hi}\n\n"+
		"```bash {#hi-on-node target=node nodes=cp1 namespace=kube-system image="+sandbox.ImageNodeShell+" expect.contains=hi}\necho hi\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// start runs the long block and returns once the script runs on w0.
	start := func(t *testing.T) (*startedRun, func() error) {
		t.Helper()
		sr := &startedRun{started: make(chan struct{})}
		cmd, err := startCairn(bundledtest.Ctx(t, 5*time.Minute), nil, nil, sr, sr, append([]string{"run", long}, common...)...)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-sr.started:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the node block did not start within 2 minutes:\n%s", sr)
		}
		sr.cmd = cmd
		return sr, cmd.Wait
	}

	t.Run("cancel", func(t *testing.T) {
		sr, wait := start(t)
		if err := sr.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		if err := wait(); err == nil {
			t.Errorf("a cancelled run exited 0:\n%s", sr)
		}
		if !strings.Contains(sr.String(), "cancelled") {
			t.Errorf("the run does not say it was cancelled:\n%s", sr)
		}
		noCairnPods(t, "a cancelled run")
		noProcess(t, "w0", "'[s]leep 7771'", "a cancelled run")
	})

	// kill9 runs the long block, kills cairn with SIGKILL and checks that
	// the pod stayed: killed, it could not clean up (the pod's deadline
	// would end it).
	kill9 := func(t *testing.T) {
		t.Helper()
		sr, wait := start(t)
		if err := sr.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = wait()
		if left := cairnPods(t); len(left) != 1 {
			t.Errorf("after kill -9, pods Cairn made: %v, want the one of the killed run", left)
		}
	}
	t.Run("kill-9-next-block", func(t *testing.T) {
		kill9(t)
		// The next node block from this machine deletes it.
		out, err := run(t, short)
		if err != nil {
			t.Fatalf("cairn run after kill -9: %v\n%s", err, out)
		}
		noCairnPods(t, "kill -9 and the next node block")
		noProcess(t, "w0", "'[s]leep 7771'", "kill -9 and the next node block")
	})
	t.Run("kill-9-next-start", func(t *testing.T) {
		kill9(t)
		// A server started on this machine deletes it at once, with no
		// node block run.
		content := filepath.Join(dir, "sweep-content")
		if err := os.MkdirAll(content, 0o755); err != nil {
			t.Fatal(err)
		}
		out := &startedRun{started: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cmd, err := startCairn(ctx, nil, nil, out, out, "serve", "--port", "0", "--content", content, "--sandbox", "no",
			"--kubeconfig", kubeconfig, "--journal", filepath.Join(dir, "sweep-journal.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		noCairnPods(t, "kill -9 and a server's start")
		noProcess(t, "w0", "'[s]leep 7771'", "kill -9 and a server's start")
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "deleted 1 node pod(s)"); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("serve did not say it deleted the pod:\n%s", out)
				break
			}
		}
	})
}

// startedRun is a running cairn's terminal: it notes when the script
// printed "started".
type startedRun struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	once    sync.Once
	started chan struct{}
	cmd     *exec.Cmd
}

func (s *startedRun) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	if strings.Contains(s.buf.String(), "w0: started") {
		s.once.Do(func() { close(s.started) })
	}
	return len(p), nil
}

func (s *startedRun) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestOnRunningNodes runs one of the runbooks the node tests run after a
// kubeadm run (CAIRN_NODETEST_THEN: fanout, cilium, cilium-export, ccm, ccm-export or ccm-api; default fanout)
// on a cluster already built on sandbox nodes (CAIRN_NODETEST_CLUSTER=
// STATE-DIR, after `cairn sandbox up --nodes` and the kubeadm runbook), to
// work on it without a kubeadm run each time; CI runs them inside
// TestBundledKubeadmOnNodes.
func TestOnRunningNodes(t *testing.T) {
	dir := os.Getenv("CAIRN_NODETEST_CLUSTER")
	if dir == "" {
		t.Skip("CAIRN_NODETEST_CLUSTER is unset (CI runs these inside TestBundledKubeadmOnNodes)")
	}
	then := map[string]func(*testing.T, *sandbox.Sandbox, string, string){
		"": runFanOutOnNodes, "fanout": runFanOutOnNodes, "cilium": runCiliumOnNodes, "cilium-export": runCiliumExported, "ccm": runCCMOnNodes, "ccm-export": runCCMExported, "ccm-api": runCCMOnNodesAPI,
	}[os.Getenv("CAIRN_NODETEST_THEN")]
	if then == nil {
		t.Fatalf("CAIRN_NODETEST_THEN=%s: want fanout, cilium or ccm", os.Getenv("CAIRN_NODETEST_THEN"))
	}
	sb, err := sandbox.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	then(t, sb, t.TempDir(), "10.244.0.0/16")
}

var pairRe = regexp.MustCompile(`pair this browser by opening (http://127\.0\.0\.1:\d+/)#cairn-token=([0-9a-f]+)`)

// fanOutInBrowser serves testdata/fanout.md with the executor and runs its
// pod and node blocks from the page in Chromium.
func fanOutInBrowser(t *testing.T, kubeconfig, dir string, noCairnPods func(*testing.T, string)) {
	serveOut, base, token := serveRunbook(t, dir, "page-content", filepath.Join("testdata", "fanout.md"), nil,
		"--kubeconfig", kubeconfig, "--journal", filepath.Join(dir, "page-journal.db"))
	pg := testrig.NewPage(t, testrig.Browser(t), 5*time.Minute, serveOut,
		`(document.getElementById("cairn-exec-status")||{}).textContent + " | " + Array.from(document.querySelectorAll(".cb-result:not([hidden])")).map(e => e.closest(".cb").id + ": " + e.textContent.slice(0, 400)).join(" || ")`)
	pg.Run("open the page", chromedp.Navigate(base+"fanout/#cairn-token="+token))
	pg.Poll("the executor is on", `document.querySelector("#cairn-exec-status.exec-on")`, 30*time.Second)
	verified := func(block string) string {
		t.Helper()
		pg.Run("run "+block, chromedp.Click(chromedp.CSS(`#block-`+block+` .cb-run`)))
		pg.Poll(block+" verified", `document.querySelector("#block-`+block+`.cb-verified")`, 90*time.Second)
		return pg.Eval(`document.querySelector("#block-` + block + ` .cb-result").textContent`)
	}
	verified("shell-ds")
	verified("shell-ds-ready")
	if got := pg.Eval(`document.querySelector("#block-hello-pods .cb-hosts").textContent`); !strings.Contains(got, "ds/cairn-shell") {
		t.Errorf("the pod block's header does not say which pods: %q", got)
	}
	out := verified("hello-pods")
	for _, n := range []string{"cp0", "cp1", "cp2", "w0"} {
		if !regexp.MustCompile(`── cairn-shell-\w+ ──\s*hello from ` + n).MatchString(out) {
			t.Errorf("the page shows no result of the pod on %s:\n%s", n, out)
		}
	}
	out = verified("manifests")
	for _, n := range []string{"cp0", "cp1", "cp2"} {
		if !regexp.MustCompile(`── ` + n + ` ──[^─]*kube-apiserver\.yaml`).MatchString(out) {
			t.Errorf("the page shows no result of node %s:\n%s", n, out)
		}
	}
	// action=copy on nodes: from a node and from this machine, checked on
	// the node.
	if out := verified("copy-from-node"); !strings.Contains(out, "-> w0:/var/lib/cairn-host/copy/w0.conf") {
		t.Errorf("the page shows no copy to w0:\n%s", out)
	}
	verified("copy-from-here")
	verified("copied")
	// Copy: the command a reader pastes does what Run did.
	for _, tc := range []struct{ block, want string }{
		{"hello-pods", "hello from w0"},
		{"manifests", "kube-apiserver.yaml"},
		{"copy-from-node", "/var/lib/cairn-host/copy/w0.conf "},
	} {
		pg.Run("copy "+tc.block, chromedp.Click(chromedp.CSS(`#block-`+tc.block+` .cb-copy`)))
		pg.Poll("the copy of "+tc.block, `window.Cairn.lastCopied && window.Cairn.lastCopied.indexOf("kubectl") > 0`, 10*time.Second)
		copied := pg.Eval(`window.Cairn.lastCopied`)
		pg.Eval(`(window.Cairn.lastCopied = "", "")`)
		c := exec.CommandContext(bundledtest.Ctx(t, 3*time.Minute), "bash", "-c", copied)
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+sandbox.BinDir()+":"+os.Getenv("PATH"), "CAIRN_NODE_IMAGE="+sandbox.ImageNodeShell)
		got, err := c.CombinedOutput()
		if err != nil || !strings.Contains(string(got), tc.want) {
			t.Errorf("%s: the copied command: %v\n%s\ncommand:\n%s", tc.block, err, got, copied)
		}
	}
	noCairnPods(t, "runs and copies from the page")
}

// serveRunbook serves the runbook at src (alone, in dir/folder) with cairn
// serve and ARGS until t ends, and returns what it prints, its address and
// its pairing token.
func serveRunbook(t *testing.T, dir, folder, src string, env []string, args ...string) (out *startedRun, base, token string) {
	t.Helper()
	content := filepath.Join(dir, folder)
	if err := os.MkdirAll(content, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(content, filepath.Base(src)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	out = &startedRun{started: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cmd, err := startCairn(ctx, env, nil, out, out, append([]string{"serve", "--port", "0", "--content", content, "--sandbox", "no"}, args...)...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop on SIGTERM")
		}
		cancel()
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if m := pairRe.FindStringSubmatch(out.String()); m != nil {
			return out, m[1], m[2]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pairing URL; serve said:\n%s", out)
		}
	}
}
