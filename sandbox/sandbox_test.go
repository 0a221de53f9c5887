package sandbox_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
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

	// Namespaces of the hosts, and a session that would outlive sshd.
	nsLinks := map[string]bool{}
	for _, p := range procs {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/net"); err == nil {
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
	mntNS := map[string]bool{}
	if inv.Mode == sandbox.NetworkNamespaces {
		self, _ := os.Readlink("/proc/self/ns/mnt")
		for _, p := range hostPIDs {
			l, _ := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/mnt")
			mi, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/mountinfo")
			if l == "" || l == self || !strings.Contains(string(mi), dir+"/hosts/") {
				t.Errorf("sshd (pid %d) has no private mount namespace with mounts of %s (ns %q)", p, dir, l)
			}
			mntNS[l] = true
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
	// No process anywhere (in any mount namespace) still sees a mount of the
	// state dir, and the hosts' mount namespaces are gone.
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if mi, err := os.ReadFile("/proc/" + e.Name() + "/mountinfo"); err == nil && strings.Contains(string(mi), dir) {
			t.Errorf("process %s still has a mount of %s", e.Name(), dir)
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && mntNS[l] {
			t.Errorf("process %s is still in a host's mount namespace %s", e.Name(), l)
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
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && links[l] && testrig.ProcessAlive(pid) {
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
