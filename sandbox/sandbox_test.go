package sandbox_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// These tests start sandboxes of their own (not testrig's shared ones), to
// check start-up, idempotence, clean-up and teardown.

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// up starts a sandbox in a temporary state dir and stops it at cleanup. A
// missing prerequisite skips the test, except under CI=true.
func up(t *testing.T, opts sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	skipShort(t)
	if opts.StateDir == "" {
		opts.StateDir = t.TempDir() + "/sb"
	}
	opts.DieWithParent = true
	opts.Progress = func(msg string) { t.Log(msg) }
	sb, err := sandbox.Up(ctxT(t, 3*time.Minute), opts)
	if err != nil {
		if errors.Is(err, sandbox.ErrMissing) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sb.Down(context.Background()); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	return sb
}

func TestMissingBinariesAreNamed(t *testing.T) {
	dir := t.TempDir()
	_, err := sandbox.Up(ctxT(t, time.Minute), sandbox.Options{StateDir: dir + "/sb", BinDir: dir, NoSSH: true})
	if !errors.Is(err, sandbox.ErrMissing) {
		t.Fatalf("want ErrMissing, got %v", err)
	}
	if !strings.Contains(err.Error(), "scripts/sandbox-bins.sh") || !strings.Contains(err.Error(), "etcd") {
		t.Errorf("error does not say how to fix: %v", err)
	}
	if _, serr := os.Stat(dir + "/sb"); serr == nil {
		t.Error("state dir created although nothing could start")
	}
}

func TestDownWithoutSandboxIsNoop(t *testing.T) {
	if err := sandbox.Down(ctxT(t, 10*time.Second), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Open(t.TempDir()); !errors.Is(err, sandbox.ErrNotRunning) {
		t.Fatalf("Open of an empty dir: %v", err)
	}
}

func pids(sb *sandbox.Sandbox) []int {
	var p []int
	for _, ps := range sb.Status(context.Background()).Procs {
		p = append(p, ps.PID)
	}
	return p
}

func TestUpIsIdempotent(t *testing.T) {
	sb := up(t, sandbox.Options{NoKube: true, Hosts: []sandbox.HostSpec{{Name: "a0"}}})
	again, err := sandbox.Up(ctxT(t, time.Minute), sandbox.Options{StateDir: sb.Dir(), NoKube: true, Hosts: []sandbox.HostSpec{{Name: "a0"}}})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := pids(sb), pids(again); len(a) != 1 || len(b) != 1 || a[0] != b[0] {
		t.Errorf("second Up restarted: pids %v then %v", a, b)
	}
	// Down is idempotent too.
	if err := sandbox.Down(ctxT(t, time.Minute), sb.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.Down(ctxT(t, time.Minute), sb.Dir()); err != nil {
		t.Fatal(err)
	}
}

func TestBrokenSandboxIsCleanedUpByUp(t *testing.T) {
	opts := sandbox.Options{NoKube: true, Hosts: []sandbox.HostSpec{{Name: "b0"}, {Name: "b1"}}}
	sb := up(t, opts)
	old := pids(sb)
	// Kill one host behind the sandbox's back.
	if err := syscall.Kill(old[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, old[0])
	if st := sb.Status(ctxT(t, 10*time.Second)); st.Healthy() {
		t.Fatal("status healthy with a dead host")
	}
	opts.StateDir = sb.Dir()
	sb2 := up(t, opts)
	if !sb2.Status(ctxT(t, 10*time.Second)).Healthy() {
		t.Fatal("not healthy after Up")
	}
	for _, p := range old {
		if testrig.ProcessAlive(p) {
			t.Errorf("old process %d still alive", p)
		}
	}
}

func TestLoopbackMode(t *testing.T) {
	sb := up(t, sandbox.Options{NoKube: true, Network: sandbox.NetworkLoopback, Hosts: []sandbox.HostSpec{{Name: "l0"}, {Name: "l1"}}})
	inv := sb.Inventory()
	if inv.Mode != sandbox.NetworkLoopback {
		t.Fatalf("mode %q", inv.Mode)
	}
	kh, err := os.ReadFile(inv.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range inv.Hosts {
		if h.Address != "127.0.0.1" || !strings.Contains(string(kh), "[127.0.0.1]:"+strconv.Itoa(h.Port)+" ") {
			t.Errorf("host %+v not in known_hosts as [127.0.0.1]:port:\n%s", h, kh)
		}
		c, err := inv.Dial(ctxT(t, 10*time.Second), h.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Output("hostname")
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 && strings.TrimSpace(string(out)) != h.Name {
			t.Errorf("host %s says hostname %q", h.Name, out)
		}
	}
}

// TestDownStopsWhatSessionsLeft: in loopback mode (no namespace to empty)
// Down returns only once a session still open and a process a session
// detached with setsid are both gone, not just the sshd listeners.
func TestDownStopsWhatSessionsLeft(t *testing.T) {
	sb := up(t, sandbox.Options{NoKube: true, Network: sandbox.NetworkLoopback, Hosts: []sandbox.HostSpec{{Name: "l0"}}})
	inv := sb.Inventory()
	// A detached process: its session ends, it is re-parented away from sshd.
	detached, err := strconv.Atoi(strings.TrimSpace(sshOutput(t, inv, "l0", "setsid sleep 601 </dev/null >/dev/null 2>&1 & echo $!")))
	if err != nil {
		t.Fatal(err)
	}
	// A session still open, its shell a child of sshd.
	c, err := inv.Dial(ctxT(t, 10*time.Second), "l0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	stdout, _ := s.StdoutPipe()
	if err := s.Start("echo $$; exec sleep 600"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := stdout.Read(buf)
	open, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("session pid: %q", buf[:n])
	}
	for _, pid := range []int{detached, open} {
		if !testrig.ProcessAlive(pid) {
			t.Fatalf("pid %d not running before Down", pid)
		}
	}
	if err := sb.Down(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	for name, pid := range map[string]int{"detached process": detached, "open session": open} {
		if testrig.ProcessAlive(pid) {
			t.Errorf("%s (pid %d) still runs when Down returned", name, pid)
		}
	}
}

// TestTeardownLeavesNothing starts everything, leaves an SSH session running
// on a host, and checks that Down leaves no process, namespace, link, mount
// or state behind.
func TestTeardownLeavesNothing(t *testing.T) {
	skipShort(t)
	dir := t.TempDir() + "/sb"
	goroutines := runtime.NumGoroutine()
	// Links of other sandboxes (a reader's own, say) are not this test's.
	others := map[string]bool{}
	for _, l := range cairnLinks(t) {
		others[l] = true
	}
	// What this machine's mountpoints of the hosts' private directories hold
	// before: the sandbox must leave them as they were (or, where it created
	// them, empty).
	before := map[string][]string{}
	for _, d := range sandbox.PrivateDirs() {
		before[d] = listDir(t, d)
	}
	sb, err := sandbox.Up(ctxT(t, 3*time.Minute), sandbox.Options{StateDir: dir, DieWithParent: true, Progress: func(m string) { t.Log(m) }})
	if err != nil {
		if errors.Is(err, sandbox.ErrMissing) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	inv := sb.Inventory()
	st := sb.Status(ctxT(t, 10*time.Second))
	if !st.Healthy() {
		t.Fatalf("not healthy: %s", st.Summary())
	}
	// cairn sandbox env names what exported scripts read, too.
	env := strings.Join(sb.Env(), "\n") + "\n"
	for _, want := range []string{"CAIRN_SSH_CONFIG=" + inv.SSHConfig + "\n", "CAIRN_KUBECONFIG=" + sb.Kube().Kubeconfig + "\n", "CAIRN_SANDBOX_SSH_CONFIG=" + inv.SSHConfig + "\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("sandbox env lacks %q:\n%s", want, env)
		}
	}
	procs := pids(sb)
	if len(procs) != 4+len(inv.Hosts) { // etcd, apiserver, controller manager, haproxy
		t.Errorf("%d processes, want %d", len(procs), 4+len(inv.Hosts))
	}
	var hostPIDs []int
	for _, c := range sb.Status(context.Background()).Components {
		if strings.HasPrefix(c.Name, "sshd-") {
			hostPIDs = append(hostPIDs, c.PIDs...)
		}
	}
	// The load balancer's name is this machine's too while the sandbox runs.
	lb := sb.LoadBalancer()
	if lb == nil || lb.HostsFile == "" {
		t.Fatalf("load balancer %+v: no hosts-file entry", lb)
	}
	if b, _ := os.ReadFile(lb.HostsFile); !strings.Contains(string(b), sandbox.LBName) {
		t.Errorf("%s lacks %s while up", lb.HostsFile, sandbox.LBName)
	}

	// Namespaces of the hosts, and a session that would outlive sshd. The
	// test holds each namespace open: a freed one's number goes to the next
	// namespace made on this machine (another package's sandbox), whose
	// processes are not this one's to find.
	nsLinks := map[string]bool{}
	for _, p := range procs {
		f, err := os.Open("/proc/" + strconv.Itoa(p) + "/ns/net")
		if err != nil {
			continue
		}
		defer f.Close()
		if l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); err == nil {
			nsLinks[l] = true
		}
	}
	c, err := inv.Dial(ctxT(t, 10*time.Second), inv.Hosts[0].Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("sleep 600"); err != nil {
		t.Fatal(err)
	}
	// Each host's private directories are bind mounts of the state dir,
	// visible in its sshd's mount table and in no process of this machine's
	// mount namespace; a file written there stays in the state dir.
	if inv.Mode == sandbox.NetworkNamespaces {
		self, _ := os.Readlink("/proc/self/ns/mnt")
		for _, p := range hostPIDs {
			l, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/mnt")
			mi, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/mountinfo")
			if l == "" || l == self || !strings.Contains(string(mi), dir+"/hosts/") {
				t.Errorf("sshd (pid %d) has no private mount namespace with mounts of %s (ns %q)", p, dir, l)
			}
		}
		sshOutput(t, inv, inv.Hosts[0].Name, "echo left > /etc/kubernetes/cairn-teardown-probe")
	}
	// This sandbox's links are named after its subnet (10.200.N.x:
	// cairn-brN, cairnNh0…); other packages' tests may bring sandboxes up
	// and down meanwhile.
	var links []string
	subnet := ""
	if parts := strings.Split(inv.Hosts[0].Address, "."); len(parts) == 4 {
		subnet = parts[2]
	}
	for _, l := range cairnLinks(t) {
		own := l == "cairn-br"+subnet || strings.HasPrefix(l, "cairn"+subnet+"h")
		if !others[l] && own {
			links = append(links, l)
		}
	}
	if inv.Mode == sandbox.NetworkNamespaces && len(links) == 0 {
		t.Error("no cairn links while up")
	}

	if err := sb.Down(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(lb.HostsFile); strings.Contains(string(b), "# cairn sandbox "+sb.Dir()+"\n") {
		t.Errorf("%s still maps %s for this sandbox after Down:\n%s", lb.HostsFile, sandbox.LBName, b)
	}
	c.Close()
	// No goroutine of the sandbox outlives Down (allow a moment for the
	// closed SSH client's readers to return).
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Down, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}

	for _, p := range procs {
		if testrig.ProcessAlive(p) {
			t.Errorf("process %d still alive after Down", p)
		}
	}
	self, _ := os.Readlink("/proc/self/ns/net")
	delete(nsLinks, self)
	if left := procsInNamespaces(nsLinks); len(left) > 0 {
		t.Errorf("processes left in the hosts' namespaces: %v", left)
	}
	now := map[string]bool{}
	for _, l := range cairnLinks(t) {
		now[l] = true
	}
	for _, l := range links {
		if now[l] {
			t.Errorf("link %s left behind", l)
		}
	}
	if m, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(m), dir) {
		t.Errorf("mount under %s left behind", dir)
	}
	// No process anywhere (in any mount namespace, the hosts' included)
	// still sees a mount of the state dir. (Not "no process is in a host's
	// mount namespace": its number may be a new namespace's by now.)
	for _, pid := range testrig.PIDs() {
		if mountsOf(strconv.Itoa(pid), dir) {
			t.Errorf("process %d still has a mount of %s", pid, dir)
		}
	}
	for _, d := range sandbox.PrivateDirs() {
		if got := listDir(t, d); strings.Join(got, " ") != strings.Join(before[d], " ") {
			t.Errorf("this machine's %s holds %q after Down, %q before", d, got, before[d])
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("state dir %s left behind (%v)", dir, err)
	}
	if k := st.Kube; k != nil && strings.HasPrefix(k.Server, "https://10.200.") {
		// On a host's address: never dial it without its bridge (the
		// packet would leave by the default route, whose gateway may well
		// answer); the bridge being gone is the check.
		for _, l := range cairnLinks(t) {
			if l == "cairn-br"+subnet {
				t.Errorf("bridge %s of the apiserver's host is still there", l)
			}
		}
	} else if k != nil {
		// The apiserver's port is closed.
		if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(k.Server, "https://"), time.Second); err == nil {
			conn.Close()
			t.Errorf("apiserver %s still accepts connections", k.Server)
		}
	}
}

// TestHostsHavePrivateDirs writes a file over SSH into cp0's /etc/kubernetes
// and checks that neither cp1 nor this machine sees it: each host has its
// own copy of sandbox.PrivateDirs, kept in the state dir.
func TestHostsHavePrivateDirs(t *testing.T) {
	sb := up(t, sandbox.Options{NoKube: true, Hosts: []sandbox.HostSpec{{Name: "cp0"}, {Name: "cp1"}}})
	inv := sb.Inventory()
	if inv.Mode != sandbox.NetworkNamespaces {
		if len(inv.PrivateDirs) != 0 || inv.Hosts[0].Root != "" {
			t.Errorf("loopback mode claims private directories: %v, root %q", inv.PrivateDirs, inv.Hosts[0].Root)
		}
		t.Skip("loopback mode: the hosts share this machine's file system")
	}
	if strings.Join(inv.PrivateDirs, " ") != strings.Join(sandbox.PrivateDirs(), " ") {
		t.Errorf("inventory lists private dirs %v, want %v", inv.PrivateDirs, sandbox.PrivateDirs())
	}
	cp0, _ := inv.Host("cp0")
	for _, d := range inv.PrivateDirs {
		hostBefore := listDir(t, d)
		x := d + "/x-" + strconv.Itoa(os.Getpid())
		if got := sshOutput(t, inv, "cp0", "printf 'from cp0' > "+x+" && chmod 0600 "+x+" && cat "+x); got != "from cp0" {
			t.Fatalf("cp0: cat %s: %q", x, got)
		}
		if got := sshOutput(t, inv, "cp1", "test -e "+x+" && echo visible || echo absent"); got != "absent\n" {
			t.Errorf("cp1 sees cp0's %s: %q", x, got)
		}
		if _, err := os.Stat(x); !os.IsNotExist(err) {
			t.Errorf("this machine sees cp0's %s (%v)", x, err)
		}
		// cp1 writes its own file under the same name; cp0's is unchanged.
		sshOutput(t, inv, "cp1", "printf 'from cp1' > "+x)
		if got := sshOutput(t, inv, "cp0", "cat "+x); got != "from cp0" {
			t.Errorf("cp0's %s after cp1 wrote its own: %q", x, got)
		}
		// The file lives in the state dir, where Down removes it.
		b, err := os.ReadFile(cp0.Root + x)
		if err != nil || string(b) != "from cp0" {
			t.Errorf("cp0's %s is not in its root %s: %q, %v", x, cp0.Root, b, err)
		}
		if got := listDir(t, d); strings.Join(got, " ") != strings.Join(hostBefore, " ") {
			t.Errorf("this machine's %s changed: %q, was %q", d, got, hostBefore)
		}
	}
	// Each host has its own /etc/hosts naming every host; this machine's is
	// untouched.
	cp1, _ := inv.Host("cp1")
	if got := sshOutput(t, inv, "cp0", "getent hosts cp1"); !strings.HasPrefix(got, cp1.Address+" ") {
		t.Errorf("cp0: getent hosts cp1: %q, want %s", got, cp1.Address)
	}
	if got := sshOutput(t, inv, "cp1", "sudo -n true 2>&1; hostname"); got != "cp1\n" {
		t.Errorf("cp1: sudo says %q", got)
	}
	if b, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(b), cp1.Address) {
		t.Errorf("this machine's /etc/hosts names cp1:\n%s", b)
	}
	// The rest of the file system is shared: /tmp, for one.
	tmp := t.TempDir() + "/shared"
	sshOutput(t, inv, "cp0", "echo shared > "+tmp)
	if got := sshOutput(t, inv, "cp1", "cat "+tmp); got != "shared\n" {
		t.Errorf("cp1 does not see cp0's %s: %q", tmp, got)
	}
}

// sshOutput runs cmd on host and returns its standard output; it fails t if
// the command fails.
func sshOutput(t *testing.T, inv *sandbox.Inventory, host, cmd string) string {
	t.Helper()
	c, err := inv.Dial(ctxT(t, 10*time.Second), host, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Output(cmd)
	if err != nil {
		t.Fatalf("%s: %q: %v", host, cmd, err)
	}
	return string(out)
}

// listDir returns the names in dir, nil if it does not exist.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func skipShort(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("starts real servers; not under -short")
	}
}

func cairnLinks(t *testing.T) []string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, "cairn") {
			out = append(out, i.Name)
		}
	}
	return out
}

func procsInNamespaces(links map[string]bool) []int {
	var out []int
	for _, pid := range testrig.PIDs() {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net"); err == nil && links[l] && testrig.ProcessAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for testrig.ProcessAlive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not exit", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hostPID is the process of a host's sshd.
func hostPID(t *testing.T, sb *sandbox.Sandbox, name string) int {
	t.Helper()
	for _, c := range sb.Status(ctxT(t, 10*time.Second)).Components {
		if c.Name == "sshd-"+name && len(c.PIDs) > 0 {
			return c.PIDs[0]
		}
	}
	t.Fatalf("no process for host %s", name)
	return 0
}

// The kernel hands a freed network namespace's inode number to the next
// namespace made on the machine. A Down that sweeps the numbers its hosts
// had must not kill what now lives under one of them (in CI: the sshd of a
// concurrent test's new host), and a Down retried from stale state must not
// delete the bridge and veths of a sandbox that has since taken its subnet.
func TestDownSparesWhatReusedItsNumbersAndNames(t *testing.T) {
	hosts := []sandbox.HostSpec{{Name: "r0"}}
	a := up(t, sandbox.Options{NoKube: true, Network: sandbox.NetworkNamespaces, Hosts: hosts})
	stale, err := sandbox.Open(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	pid := hostPID(t, a, "r0")
	addrA := a.Inventory().Hosts[0].Address
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	// The host dies (a crashed sshd), its namespace is freed, and a
	// stranger's new namespace gets its number.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	self, _ := os.Readlink("/proc/self/ns/net")
	// The kernel frees a namespace in the background; its veth goes with it.
	veth := cairnLinks(t)
	for i := 0; i < 100 && slices.ContainsFunc(cairnLinks(t), func(l string) bool { return strings.Contains(l, "h") && slices.Contains(veth, l) }); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	// New namespaces take the lowest free numbers: one that gets a lower
	// number than the host's is kept (so the next one gets the next), one
	// that gets a higher is let go.
	var stranger *exec.Cmd
	var lower []*exec.Cmd
	defer func() {
		for _, c := range lower {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for try := 0; try < 30 && stranger == nil; try++ {
		c := exec.Command("unshare", "--net", "sleep", "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		var l string
		for i := 0; i < 100; i++ {
			if l, _ = os.Readlink("/proc/" + strconv.Itoa(c.Process.Pid) + "/ns/net"); l != "" && l != self {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		switch {
		case l == link:
			stranger = c
		case len(l) == len(link) && l < link:
			lower = append(lower, c)
		default:
			_ = c.Process.Kill()
			_ = c.Wait()
			time.Sleep(300 * time.Millisecond)
		}
	}
	if stranger == nil {
		t.Skipf("no new namespace got %s back in 30 tries (other namespaces made meanwhile took it)", link)
	}
	defer func() { _ = stranger.Process.Kill(); _ = stranger.Wait() }()
	if err := a.Down(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if !testrig.ProcessAlive(stranger.Process.Pid) {
		t.Fatalf("Down killed pid %d, which was in a namespace made after its host's was gone (%s)", stranger.Process.Pid, link)
	}

	// A second sandbox takes the freed subnet; a retried Down of the first,
	// from its stale state, leaves it alone.
	b := up(t, sandbox.Options{NoKube: true, Network: sandbox.NetworkNamespaces, Hosts: hosts})
	if addrB := b.Inventory().Hosts[0].Address; addrB != addrA {
		t.Logf("the second sandbox took %s, not the first's %s: the stale Down had nothing of it to delete", addrB, addrA)
	}
	before := cairnLinks(t)
	if err := stale.Down(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if after := cairnLinks(t); !slices.Equal(before, after) {
		t.Errorf("a stale Down deleted links of another sandbox: before %v, after %v", before, after)
	}
	if out := sshOutput(t, b.Inventory(), "r0", "echo ok"); strings.TrimSpace(out) != "ok" {
		t.Errorf("the second sandbox's host answers %q after the stale Down", out)
	}
}

// mountsOf reports whether process pid sees a mount of something under dir.
func mountsOf(pid, dir string) bool {
	mi, err := os.ReadFile("/proc/" + pid + "/mountinfo")
	return err == nil && strings.Contains(string(mi), dir)
}

// TestUpDoesNotReplaceAHealthySandbox (review, Medium): `sandbox up` replaced
// a healthy sandbox of another shape without asking, and a paired page then
// ran against another cluster. Now Up refuses without Replace; a sandbox in
// another state folder starts beside it and takes nothing of it.
func TestUpDoesNotReplaceAHealthySandbox(t *testing.T) {
	a := up(t, sandbox.Options{NoKube: true, Hosts: []sandbox.HostSpec{{Name: "a0"}}})
	before := pids(a)
	startedA := a.Status(context.Background()).ID()

	// Another state folder: its own processes and network; a is untouched.
	b := up(t, sandbox.Options{NoKube: true, Hosts: []sandbox.HostSpec{{Name: "a0"}}})
	if st := a.Status(context.Background()); !st.Healthy() || st.ID() != startedA || !slices.Equal(pids(a), before) {
		t.Fatalf("a sandbox beside it changed a: %s, pids %v then %v", st.Summary(), before, pids(a))
	}
	if ha, hb := a.Status(context.Background()).Hosts[0], b.Status(context.Background()).Hosts[0]; ha.Address == hb.Address && ha.Port == hb.Port {
		t.Errorf("both sandboxes' a0 at %s:%d", ha.Address, ha.Port)
	}

	// Another shape in a's folder: refused, a left as it was.
	opts := sandbox.Options{StateDir: a.Dir(), NoSSH: true, DieWithParent: true}
	_, err := sandbox.Up(ctxT(t, 3*time.Minute), opts)
	if errors.Is(err, sandbox.ErrMissing) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if !errors.Is(err, sandbox.ErrRunning) || !strings.Contains(err.Error(), "--replace") || !strings.Contains(err.Error(), "SSH hosts") {
		t.Fatalf("Up of another shape over a healthy sandbox: %v", err)
	}
	if st := a.Status(context.Background()); !st.Healthy() || st.ID() != startedA || !slices.Equal(pids(a), before) {
		t.Fatalf("the refused Up changed a: %s", st.Summary())
	}

	// With Replace it does.
	opts.Replace = true
	c, err := sandbox.Up(ctxT(t, 3*time.Minute), opts)
	if err != nil {
		t.Fatal(err)
	}
	if st := c.Status(context.Background()); !st.Healthy() || st.ID() == startedA || st.Inventory != nil && len(st.Inventory.Hosts) > 0 {
		t.Errorf("after --replace: %s, id %s", st.Summary(), st.ID())
	}
}
