package nodetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/results"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// The air-gapped round trip (#31): on the connected side, `cairn export
// --bundle` copies the images the runbooks require from a registry into the
// bundle's OCI layout and packs the Cilium chart; the registry is a real one
// on loopback (go-containerregistry's) that the test seeds with the images
// the sandbox builds, standing in for the public registries. At the site,
// the unpacked bundle's scripts run with bash and the site's own clients
// (ssh, scp, kubectl, helm, coreutils) on PATH: no cairn, no registry, no
// module proxy. Their signed results come back through `cairn journal
// import --allowed-signers --bundle`, and their verdicts must be cairn
// run's, block by block.

// siteBundle is the offline bundle as the site has it.
type siteBundle struct {
	archive string // the .tar.gz made on the connected side
	root    string // where it was unpacked: DIR/site/cairn-bundle
	path    string // PATH at the site: links to the tools a site has
	key     string // the operator's signing key
	allowed string // the allowed signers file that names it
}

// siteTools are what a site runs the scripts with: bash and coreutils, the
// clients the runbooks call, OpenSSH's ssh-keygen to sign.
var siteTools = []string{"bash", "env", "awk", "sed", "grep", "head", "tail", "tr", "cat", "cut", "sort", "wc", "date",
	"mktemp", "rm", "mv", "mkdir", "chmod", "ls", "dirname", "basename", "id", "hostname", "uname", "timeout", "tee",
	"base64", "sha256sum", "sleep", "od", "stat", "xargs", "tar", "printf", "seq", "uniq", "diff", "ssh", "scp", "ssh-keygen", "nc", "curl"}

var (
	siteOnce   sync.Once
	siteShared *siteBundle
)

// sharedSiteBundle is the one offline bundle of this test process, made by
// the first run that needs it (the others wait): every site run uses the
// same archive, as sites do.
func sharedSiteBundle(t *testing.T) *siteBundle {
	t.Helper()
	siteOnce.Do(func() {
		dir := filepath.Join(binDir, "airgap")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		siteShared = siteBundleAt(t, dir)
	})
	if siteShared == nil {
		t.Fatal("the offline bundle could not be made (the run that made it says why)")
	}
	return siteShared
}

// siteBundleAt is the bundle unpacked in dir/site, made there first when
// there is none.
func siteBundleAt(t *testing.T, dir string) *siteBundle {
	t.Helper()
	s := &siteBundle{archive: filepath.Join(dir, "cairn-bundle.tar.gz"), root: filepath.Join(dir, "site", "cairn-bundle"),
		path: filepath.Join(dir, "site-bin"), key: filepath.Join(dir, "ops@site.key"), allowed: filepath.Join(dir, "ops@site.allowed")}
	if _, err := os.Stat(filepath.Join(s.root, "MANIFEST")); err == nil {
		return s
	}
	start := time.Now()
	bin := sandbox.BinDir()
	archives := map[string]string{}
	var refs []string
	for _, im := range sandbox.AllImages() {
		archives[im.Ref] = filepath.Join(sandbox.ImagesDir(bin), im.Archive())
		refs = append(refs, im.Ref)
	}
	sort.Strings(refs)
	regDir := filepath.Join(dir, "registry")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The compressed layers are kept beside the sandbox's image cache
	// (testrig.RegistryCached): a warm run pushes them without compressing.
	reg := testrig.RegistryCached(t, regDir, filepath.Join(filepath.Dir(sandbox.ImagesDir(bin)), "test-registry-layout"), archives)
	t.Logf("phase %-28s %6.1fs", "registry seeded", time.Since(start).Seconds())
	list := filepath.Join(dir, "images.txt")
	if err := os.WriteFile(list, []byte(strings.Join(refs, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The connected side: every runbook of the content, the images from
	// the registry (busybox and nginx are the site's: the sandbox's
	// node-shell and web images stand in for them), the chart.
	bundleStart := time.Now()
	var out strings.Builder
	args := []string{"export", "--bundle", s.archive, "--content", filepath.Dir(bundledtest.Path("kubeadm-ha.md")), "--images", list,
		"--omit", "busybox:1.37", "--omit", "docker.io/library/nginx", "--chart", "cilium/cilium=" + sandbox.CiliumChart(bin)}
	for _, r := range []string{"registry.k8s.io", "quay.io", "cairn.internal"} {
		args = append(args, "--from", r+"="+reg+"/"+r)
	}
	if err := cairn(bundledtest.Ctx(t, 5*time.Minute), nil, &out, &out, args...); err != nil {
		t.Fatalf("cairn export --bundle: %v\n%s", err, out.String())
	}
	fi, _ := os.Stat(s.archive)
	t.Logf("phase %-28s %6.1fs (%d MB)\n%s", "bundle made", time.Since(bundleStart).Seconds(), fi.Size()>>20, bundledtest.Tail(out.String(), 3))
	// Nothing of the connected side is needed any more.
	os.RemoveAll(regDir)

	if err := os.MkdirAll(filepath.Dir(s.root), 0o755); err != nil {
		t.Fatal(err)
	}
	unpackStart := time.Now()
	if b, err := exec.Command("tar", "-xzf", s.archive, "-C", filepath.Dir(s.root)).CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v\n%s", err, b)
	}
	check := exec.Command("sha256sum", "--quiet", "-c", "MANIFEST")
	check.Dir = s.root
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c MANIFEST: %v\n%s", err, b)
	}
	t.Logf("phase %-28s %6.1fs", "bundle unpacked, verified", time.Since(unpackStart).Seconds())

	// The site's kubectl and helm are the sandbox's builds of the releases.
	testrig.ToolPath(t, s.path, append(siteTools, "kubectl="+filepath.Join(bin, "kubectl"), "helm="+filepath.Join(bin, sandbox.BinHelm))...)
	s.key, s.allowed = testrig.Signer(t, dir, "ops@site")
	return s
}

// run runs scripts/SCRIPT from the bundle with bash and nothing but the
// site's PATH and HOME, signing its results into results; the terminal is
// stdin and stdout, as for cairn run.
func (s *siteBundle) run(ctx context.Context, home, script, resultsFile string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	argv := append([]string{filepath.Join(s.root, "scripts", script), "--results", resultsFile, "--sign", s.key}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(s.path, "bash"), argv...)
	cmd.Env = []string{"PATH=" + s.path, "HOME=" + home, "LC_ALL=C.UTF-8"}
	cmd.Dir = s.root
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd.Run()
}

// planVerdicts are the verdicts of cairn run on a run where every block
// that runs is verified: cairn run's plan (executor.RunPlan) runs a block
// when its condition holds for these parameters and skips it otherwise;
// manual blocks are done by hand (no verdict).
func planVerdicts(t *testing.T, rb *runbook.Runbook, params map[string]string) map[string]executor.Status {
	t.Helper()
	values, err := executor.ResolveParams(rb, params)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]executor.Status{}
	for _, b := range rb.Blocks {
		if !b.Executable() || b.Target == runbook.TargetManual {
			continue
		}
		if b.When.Eval(values) {
			want[b.ID] = executor.StatusVerified
		} else {
			want[b.ID] = executor.StatusSkipped
		}
	}
	return want
}

// checkSiteResults reads an exported run's signed results (the way cairn
// journal import does), compares every block's verdict with cairn run's
// and imports them into a journal with the bundle and the allowed signers
// checked; a difference names the block. It returns the results.
func (s *siteBundle) checkSiteResults(t *testing.T, rb *runbook.Runbook, params map[string]string, resultsFile, journal string) *results.File {
	t.Helper()
	data, err := os.ReadFile(resultsFile)
	if err != nil {
		t.Fatalf("the script wrote no results: %v", err)
	}
	pf, err := results.Read(resultsFile, data)
	if err != nil {
		t.Fatal(err)
	}
	want := planVerdicts(t, rb, params)
	// A resumed run appends to the file: a block's verdict is its latest.
	got := map[string]executor.Status{}
	when := map[string]time.Time{}
	for _, r := range append(append([]executor.Record(nil), pf.Records...), pf.Skipped...) {
		if r.Hash != rb.BlockByID(r.Block).Hash {
			t.Errorf("block %s: the script ran another text than the runbook's", r.Block)
		}
		if t0, ok := when[r.Block]; !ok || !r.Start.Before(t0) {
			got[r.Block], when[r.Block] = r.Status, r.Start
		}
	}
	var diff []string
	for id, w := range want {
		if got[id] != w {
			diff = append(diff, fmt.Sprintf("block %s: exported script %q, cairn run %q", id, got[id], w))
		}
	}
	sort.Strings(diff)
	for _, d := range diff {
		t.Error(d)
	}
	var out strings.Builder
	err = cairn(bundledtest.Ctx(t, time.Minute), nil, &out, &out, "journal", "import", resultsFile, "--journal", journal,
		"--content", filepath.Dir(bundledtest.Path("kubeadm-ha.md")), "--allowed-signers", s.allowed, "--bundle", s.archive)
	if err != nil || !strings.Contains(out.String(), "signature checked: ops@site") {
		t.Errorf("cairn journal import of the site's results: %v\n%s", err, out.String())
	}
	t.Logf("%s: %d blocks verified at the site, %d skipped, as cairn run's plan says; %s", rb.Slug, countStatus(got, executor.StatusVerified),
		countStatus(got, executor.StatusSkipped), strings.TrimSpace(out.String()))
	return pf
}

func countStatus(m map[string]executor.Status, s executor.Status) int {
	n := 0
	for _, v := range m {
		if v == s {
			n++
		}
	}
	return n
}

// runKilled runs scripts/SCRIPT as run does and kills it (kill -9 of its
// process group: bash and its ssh clients, as a lost session or a power
// cut would) as soon as at, polled every 200 ms, says so. It returns what
// at said; an error when the script ended before that.
func (s *siteBundle) runKilled(ctx context.Context, at func() (string, bool), home, script, resultsFile string, args []string, stdin io.Reader, stdout, stderr io.Writer) (string, error) {
	runCtx, kill := context.WithCancel(ctx)
	defer kill()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var where string
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if w, ok := at(); ok {
					where = w
					kill()
					return
				}
			}
		}
	}()
	err := s.run(runCtx, home, script, resultsFile, args, stdin, stdout, stderr)
	close(done)
	wg.Wait()
	if where == "" {
		return "", fmt.Errorf("%s ended (%v) before the point where it was to be killed", script, err)
	}
	return where, nil
}

// resumeKilledJoins is the site's run of the exported kubeadm script,
// stopped part-way (#31 item 4): killed with -9 during the control-plane
// joins, then resumed. Started at the join step it refuses before doing
// anything (the join token is a secret capture, never kept) and says to
// start at refresh-join-credentials with REFRESH_JOIN=true; resumed there,
// it issues a new token, cleans up the node whose join the kill cut short
// (reset-unfinished-joins), skips the node that joined and finishes.
func resumeKilledJoins(ctx context.Context, t *testing.T, site *siteBundle, sshConfig, dir, resultsFile string, args []string, stdin io.Reader, stdout *terminal, stderr io.Writer) error {
	t.Helper()
	start := time.Now()
	// The kill point: cp2's join under way (cp1 joined), its static-pod
	// manifests written, the node not yet marked control-plane. Watched
	// on the node itself, where its kubeadm is killed first: the node's
	// side of a lost session, and a join cut short for certain (kubeadm
	// left alone may finish the join before it next writes to the dead
	// session and dies of SIGPIPE). Then the script, with -9.
	joining := regexp.MustCompile(`(?s)\[\d+/\d+\] join-control-plane-manual .*── cp2 ──`)
	at := func() (string, bool) {
		if !joining.MatchString(stdout.String()) {
			return "", false
		}
		out, _ := onNode(sshConfig, "cp2", "[ -e /etc/kubernetes/manifests/kube-apiserver.yaml ] && pkill -9 -x kubeadm && echo 'kubeadm killed after writing its manifests:' $(ls /etc/kubernetes)", 5*time.Second)
		return strings.TrimSpace(out), strings.Contains(out, "kubeadm killed")
	}
	where, err := site.runKilled(ctx, at, dir, "kubeadm-ha.sh", resultsFile, args, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	t.Logf("phase %-28s %6.1fs (cp2: %s)", "exported script killed", time.Since(start).Seconds(), where)

	var out bytes.Buffer
	err = site.run(ctx, dir, "kubeadm-ha.sh", resultsFile, append(slices.Clone(args), "--from", "join-control-plane"), stdin, &out, &out)
	var ee *exec.ExitError
	const hint = `--from refresh-join-credentials (block "refresh-token" runs when REFRESH_JOIN)`
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(out.String(), hint) || strings.Contains(out.String(), "[1/") {
		t.Errorf("--from join-control-plane without the join token: %v, want exit 2 before any block, naming %s:\n%s", err, hint, out.String())
	}

	resume := time.Now()
	fmt.Fprintf(stdout, "\n--- resumed: --from refresh-join-credentials --param REFRESH_JOIN=true ---\n")
	err = site.run(ctx, dir, "kubeadm-ha.sh", resultsFile, append(slices.Clone(args), "--from", "refresh-join-credentials", "--param", "REFRESH_JOIN=true"),
		stdin, stdout, stderr)
	after := stdout.String()
	after = after[strings.LastIndex(after, "--- resumed:"):]
	found := regexp.MustCompile(`(?m)\b(cp\d): (not joined yet|joined as a control-plane node|an earlier kubeadm join did not finish.*|unfinished join reset)$`).FindAllString(after, -1)
	t.Logf("phase %-28s %6.1fs; what the kill left, as reset-unfinished-joins found it:\n%s", "resumed", time.Since(resume).Seconds(), strings.Join(found, "\n"))
	// cp1 had joined: left alone and skipped; cp2's cut join: reset, joined again.
	for _, want := range []string{"cp1: joined as a control-plane node", "cp1: already joined as a control-plane node; kubeadm join skipped",
		"cp2: unfinished join reset", "This node has joined the cluster and a new control plane instance was created"} {
		if !strings.Contains(after, want) {
			t.Errorf("the resumed run did not say %q", want)
		}
	}
	return err
}
