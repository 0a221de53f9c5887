package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
type netState struct {
	Subnet int         `json:"subnet"` // N of 10.200.N.0/24
	Bridge string      `json:"bridge"` // cairn-brN, 10.200.N.1/24
	Hosts  []hostState `json:"hosts"`
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
		c := &netState{Subnet: n, Bridge: "cairn-br" + strconv.Itoa(n)}
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
	batch := fmt.Sprintf("link add %[1]s type bridge\naddr add %[2]s/24 dev %[1]s\nlink set %[1]s up\n", ns.Bridge, ns.bridgeIP())
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
	outside := fmt.Sprintf("link add %[1]s type veth peer name %[2]s\nlink set %[1]s master %[3]s\nlink set %[1]s up\nlink set %[2]s netns %[4]d\n",
		veth, peer, ns.Bridge, pid)
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
// veth pair, then deletes the veths and the bridge.
func (sb *Sandbox) downNet(ctx context.Context) error {
	sb.mu.Lock()
	ns := sb.state.Net
	sb.mu.Unlock()
	if ns == nil {
		return nil
	}
	nsLinks := map[string]bool{}
	for _, h := range ns.Hosts {
		if h.NetNS != "" {
			nsLinks[h.NetNS] = true
		}
	}
	if len(nsLinks) > 0 {
		if err := killInNamespaces(ctx, nsLinks); err != nil {
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
		if _, err := net.InterfaceByName(name); err != nil {
			if i >= len(ns.Hosts)+1 {
				break
			}
			continue
		}
		if err := run(ctx, "", ipPath, "link", "del", name); err != nil && linkExists(name) {
			errs = append(errs, err)
		}
	}
	if linkExists(ns.Bridge) {
		if err := run(ctx, "", ipPath, "link", "del", ns.Bridge); err != nil && linkExists(ns.Bridge) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
