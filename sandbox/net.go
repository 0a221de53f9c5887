package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// netState records the bridge and veth devices of a netns-mode sandbox.
//
// Each sandbox takes one /24 out of 10.200.0.0/16: the first whose bridge
// address (10.200.N.1) no interface on this machine has, so that sandboxes
// started at once (two test binaries, a reader's and CI's) never share one.
// Device names carry N, which keeps them unique and under the kernel's 15
// characters.
//
// Down finds its devices by these names, and a name is free for the next
// sandbox once the device is gone; so every device also carries Alias (its
// ifalias, naming the state directory), and Down deletes only a device that
// still says it is this sandbox's. A second Down after a half-failed one must
// not delete the bridge of a sandbox that has since taken the same subnet.
type netState struct {
	Subnet int         `json:"subnet"` // N of 10.200.N.0/24
	Bridge string      `json:"bridge"` // cairn-brN, 10.200.N.1/24
	Alias  string      `json:"alias,omitempty"`
	Hosts  []hostState `json:"hosts"`
}

// netAlias is the ifalias of a sandbox's devices: its state directory, or a
// hash of it where the directory is longer than the kernel keeps (IFALIASZ)
// or has a character ip's batch input would have to quote.
func netAlias(dir string) string {
	plain := strings.IndexFunc(dir, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+", r))
	}) < 0
	if plain && len(dir) <= 200 {
		return "cairn-sandbox:" + dir
	}
	sum := sha256.Sum256([]byte(dir))
	return "cairn-sandbox:sha256:" + hex.EncodeToString(sum[:16])
}

// ownLink reports whether device name exists and belongs to this sandbox.
// A state written before devices carried an alias owns by name alone.
func (n *netState) ownLink(name string) bool {
	if !linkExists(name) {
		return false
	}
	if n.Alias == "" {
		return true
	}
	b, err := os.ReadFile("/sys/class/net/" + name + "/ifalias")
	return err == nil && strings.TrimRight(string(b), "\n") == n.Alias
}

const (
	subnetPrefix = "10.200."
	hostIPBase   = 10 // host i is 10.200.N.(10+i)
	maxHosts     = 200
)

func (n *netState) bridgeIP() string { return fmt.Sprintf("%s%d.1", subnetPrefix, n.Subnet) }
func (n *netState) hostIP(i int) string {
	return fmt.Sprintf("%s%d.%d", subnetPrefix, n.Subnet, hostIPBase+i)
}
func (n *netState) vethName(i int) string {
	return fmt.Sprintf("cairn%dh%d", n.Subnet, i)
}
func (n *netState) peerName(i int) string { return fmt.Sprintf("cairn%dp%d", n.Subnet, i) }

// prereqs are resolved tools and the chosen network mode.
type prereqs struct {
	kube                              kubeBins
	sshd, ip, unshare, nsenter, mount string
	haproxy                           string
	tini                              string // nodes only
	network                           Network
}

// checkPrereqs finds every binary Up needs and picks the network mode. A
// missing one is a MissingError naming its install command.
func checkPrereqs(ctx context.Context, opts *Options) (prereqs, error) {
	var p prereqs
	var err error
	if !opts.NoKube {
		if p.kube, err = findKubeBins(opts.BinDir); err != nil {
			return p, fmt.Errorf("sandbox: %w", err)
		}
		if p.haproxy, err = lookTool("haproxy", "haproxy"); err != nil {
			return p, fmt.Errorf("sandbox: the load balancer in front of kube-apiserver: %w", err)
		}
	}
	if opts.NoSSH {
		return p, nil
	}
	if len(opts.Hosts) == 0 || len(opts.Hosts) > maxHosts {
		return p, fmt.Errorf("sandbox: want 1 to %d SSH hosts, got %d", maxHosts, len(opts.Hosts))
	}
	if p.sshd, err = lookTool("sshd", "openssh-server"); err != nil {
		return p, fmt.Errorf("sandbox: %w", err)
	}
	// unshare is optional in loopback mode (it only sets hostnames).
	p.unshare, _ = lookTool("unshare", "util-linux")
	switch opts.Network {
	case NetworkLoopback:
		p.network = NetworkLoopback
		return p, nil
	case NetworkNamespaces, NetworkAuto:
	default:
		return p, fmt.Errorf("sandbox: unknown network mode %q (want %q or %q)", opts.Network, NetworkNamespaces, NetworkLoopback)
	}
	why := netnsUnavailable(ctx, &p)
	if why == nil {
		p.network = NetworkNamespaces
		if opts.Nodes {
			if p.tini, err = lookTool("tini", "tini"); err != nil {
				return p, fmt.Errorf("sandbox: nodes (the init of each node's PID namespace): %w", err)
			}
		}
		return p, nil
	}
	if opts.Network == NetworkNamespaces {
		return p, fmt.Errorf("sandbox: network namespaces not available: %w (use the loopback mode instead)", why)
	}
	if opts.Progress != nil {
		opts.Progress("ssh: network namespaces not available (" + why.Error() + "); SSH hosts listen on 127.0.0.1 ports instead")
	}
	p.network = NetworkLoopback
	return p, nil
}

// netnsUnavailable says why network namespaces cannot be used, or nil.
func netnsUnavailable(ctx context.Context, p *prereqs) error {
	if os.Geteuid() != 0 {
		return errors.New("not root")
	}
	var err error
	if p.ip, err = lookTool("ip", "iproute2"); err != nil {
		return err
	}
	if p.unshare == "" {
		_, err = lookTool("unshare", "util-linux")
		return err
	}
	if p.nsenter, err = lookTool("nsenter", "util-linux"); err != nil {
		return err
	}
	if p.mount, err = lookTool("mount", "mount"); err != nil {
		return err
	}
	// Each host also gets a private mount namespace (see hostDirs).
	if err := run(ctx, "", p.unshare, "--net", "--uts", "--mount", "--propagation", "private", "--", "true"); err != nil {
		return fmt.Errorf("unshare --net --uts --mount refused: %w", err)
	}
	return nil
}

// upBridge takes a free subnet under a machine-wide lock and creates its
// bridge.
func (sb *Sandbox) upBridge(ctx context.Context, pre prereqs) (*netState, error) {
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "cairn-sandbox-net.lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	used := map[string]bool{}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		used["name:"+ifc.Name] = true
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				used[ipn.IP.String()] = true
			}
		}
	}
	ns := &netState{Subnet: -1}
	for n := 0; n < 256; n++ {
		c := &netState{Subnet: n, Bridge: "cairn-br" + strconv.Itoa(n), Alias: netAlias(sb.dir)}
		if !used[c.bridgeIP()] && !used["name:"+c.Bridge] {
			ns = c
			break
		}
	}
	if ns.Subnet < 0 {
		return nil, errors.New("no free subnet in 10.200.0.0/16; stop other sandboxes (cairn sandbox down) or remove stale cairn-br* bridges: ip link del cairn-brN")
	}
	// Record before creating, so that a failure half-way is cleaned up.
	sb.mu.Lock()
	sb.state.Net = ns
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return nil, err
	}
	batch := fmt.Sprintf("link add %[1]s type bridge\nlink set %[1]s alias %[3]s\naddr add %[2]s/24 dev %[1]s\nlink set %[1]s up\n", ns.Bridge, ns.bridgeIP(), ns.Alias)
	if err := run(ctx, batch, pre.ip, "-batch", "-"); err != nil {
		return nil, fmt.Errorf("create bridge %s: %w", ns.Bridge, err)
	}
	return ns, nil
}

// plumb wires host i (process pid, already in its own network namespace) to
// the bridge: a veth pair, one end on the bridge, the other moved into the
// namespace as eth0 with the host's address. The namespace gets no default
// route: its traffic can reach only the bridge subnet.
func (ns *netState) plumb(ctx context.Context, pre prereqs, i, pid int) error {
	veth, peer := ns.vethName(i), ns.peerName(i)
	outside := fmt.Sprintf("link add %[1]s type veth peer name %[2]s\nlink set %[1]s alias %[5]s\nlink set %[1]s master %[3]s\nlink set %[1]s up\nlink set %[2]s netns %[4]d\n",
		veth, peer, ns.Bridge, pid, ns.Alias)
	if err := run(ctx, outside, pre.ip, "-batch", "-"); err != nil {
		return fmt.Errorf("create veth %s: %w", veth, err)
	}
	// A default route on the link, with no gateway: tools that pick "the
	// node's address" from it (kubeadm) find eth0's; a packet for any other
	// address only asks the bridge who has it, gets no answer and never
	// leaves the machine.
	inside := fmt.Sprintf("link set lo up\nlink set %[1]s name eth0\naddr add %[2]s/24 dev eth0\nlink set eth0 up\nroute add default dev eth0\n", peer, ns.hostIP(i))
	if err := run(ctx, inside, pre.nsenter, "--target", strconv.Itoa(pid), "--net", "--", pre.ip, "-batch", "-"); err != nil {
		return fmt.Errorf("configure eth0 in the namespace of pid %d: %w", pid, err)
	}
	return nil
}

// downNet kills any process left in the hosts' namespaces (an SSH session
// that outlived sshd), which lets the kernel free each namespace and its
// veth pair, then deletes the veths and the bridge. pinned are the
// namespaces down holds open (see pinNamespaces); only processes in those are
// killed.
func (sb *Sandbox) downNet(ctx context.Context, pinned map[string]bool) error {
	sb.mu.Lock()
	ns := sb.state.Net
	sb.mu.Unlock()
	if ns == nil {
		return nil
	}
	if len(pinned) > 0 {
		if err := killInNamespaces(ctx, pinned); err != nil {
			return err
		}
	}
	ipPath, err := lookTool("ip", "iproute2")
	if err != nil {
		return err
	}
	var errs []error
	for i := 0; i < maxHosts; i++ {
		name := ns.vethName(i)
		if !linkExists(name) {
			if i >= len(ns.Hosts)+1 {
				break
			}
			continue
		}
		if !ns.ownLink(name) {
			continue // another sandbox's, made after this one's was gone
		}
		if err := run(ctx, "", ipPath, "link", "del", name); err != nil && linkExists(name) {
			errs = append(errs, err)
		}
	}
	if ns.ownLink(ns.Bridge) {
		if err := run(ctx, "", ipPath, "link", "del", ns.Bridge); err != nil && linkExists(ns.Bridge) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// nsPins holds the hosts' network namespaces open while down runs.
//
// The kernel gives a freed namespace's inode number to the next namespace
// made on this machine (measured: four "unshare --net" a second apart all
// got the same one). Down stops the hosts before it sweeps their namespaces,
// so a sweep by the numbers recorded at start-up killed the sshd of another
// sandbox's new host (CI: "no route to host" 18 s into a concurrent test's
// start). An open namespace file keeps the namespace, and so its number,
// this sandbox's until it is closed.
type nsPins struct {
	links map[string]bool
	files []*os.File
}

// pinNamespaces opens the namespace of each host whose process (one of
// procs, the sandbox's) is still alive. A host whose process is already gone is skipped: its
// number may be someone else's by now; what its sessions left is found by
// the session marker instead (killMarked).
func (sb *Sandbox) pinNamespaces(procs []procState) *nsPins {
	pins := &nsPins{links: map[string]bool{}}
	sb.mu.Lock()
	var hosts []hostState
	if sb.state.Net != nil {
		hosts = append(hosts, sb.state.Net.Hosts...)
	}
	sb.mu.Unlock()
	for _, h := range hosts {
		i := slices.IndexFunc(procs, func(p procState) bool { return p.PID == h.PID })
		if h.NetNS == "" || i < 0 {
			continue
		}
		f, err := os.Open("/proc/" + strconv.Itoa(h.PID) + "/ns/net")
		if err != nil {
			continue
		}
		// Alive after the open, so the PID was not reused before it.
		l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
		if err != nil || l != h.NetNS || !procAlive(procs[i]) {
			f.Close()
			continue
		}
		pins.links[l] = true
		pins.files = append(pins.files, f)
	}
	return pins
}

func (p *nsPins) close() {
	for _, f := range p.files {
		f.Close()
	}
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// NetUp reports whether the sandbox's bridge is present, so that callers
// never dial a 10.200.N.x address that would leave the machine by its
// default route. In loopback mode it is always true.
func (sb *Sandbox) NetUp() bool {
	sb.mu.Lock()
	ns := sb.state.Net
	sb.mu.Unlock()
	return ns == nil || linkExists(ns.Bridge)
}

// killInNamespaces SIGKILLs every process whose network namespace is one of
// links and waits (bounded) until none is left.
func killInNamespaces(ctx context.Context, links map[string]bool) error {
	return killWhere(ctx, "in the sandbox's network namespaces", func(pid int) bool {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		return err == nil && links[l]
	})
}

// envMarker is the variable sshd puts into every session of a sandbox host.
const envMarker = "CAIRN_SANDBOX_SESSION"

// marker is this sandbox's session marker, envMarker=<state dir>.
func (sb *Sandbox) marker() string { return envMarker + "=" + sb.dir }

// killMarked SIGKILLs every process whose environment holds marker (what
// the hosts' sessions started, wherever it went since) and waits (bounded)
// until none is left.
func killMarked(ctx context.Context, marker string) error {
	want := []byte(marker)
	return killWhere(ctx, "started by the sandbox's SSH sessions", func(pid int) bool {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		return err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, want) })
	})
}

// lockFile takes an exclusive flock on path, polling until ctx is done or
// 30s pass.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	ok := waitFor(ctx, 30*time.Second, func() bool {
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	})
	if !ok {
		f.Close()
		return nil, fmt.Errorf("lock %s: held by another process for 30s", path)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
