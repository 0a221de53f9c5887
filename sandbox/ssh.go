package sandbox

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"golang.org/x/crypto/ssh"
)

// Inventory lists the SSH hosts; it is written to inventory.json in the state
// directory for the executor and the bundled runbooks' parameters.
type Inventory struct {
	Version      int                 `json:"version"`
	Mode         Network             `json:"mode"`         // netns or loopback
	User         string              `json:"user"`         // login user on every host
	IdentityFile string              `json:"identityFile"` // client private key (ed25519)
	KnownHosts   string              `json:"knownHosts"`   // known_hosts with every host key
	SSHConfig    string              `json:"sshConfig"`    // ssh_config: `ssh -F FILE cp0`
	Kubeconfig   string              `json:"kubeconfig,omitempty"`
	KubeContext  string              `json:"kubeContext,omitempty"`
	Hosts        []Host              `json:"hosts"`
	Groups       map[string][]string `json:"groups"` // group name -> host names

	// PrivateDirs are the directories each host has its own copy of
	// (netns mode; see PrivateDirs). Empty in loopback mode, where the
	// hosts share this machine's whole file system.
	PrivateDirs []string `json:"privateDirs,omitempty"`

	// Home is User's home directory, which each host has its own copy of
	// in netns mode (seeded with .ssh/known_hosts naming every host), so
	// that files copied to "USER@host:" land on that host alone. Empty in
	// loopback mode.
	Home string `json:"home,omitempty"`

	// ImagesDir holds the node images' archives (Options.Nodes), one
	// Docker archive per image kubeadm names, readable on every host:
	// what a reader of an offline site imports with ctr.
	ImagesDir string `json:"imagesDir,omitempty"`
}

// Host is one SSH host.
type Host struct {
	Name    string   `json:"name"`    // also its hostname
	Address string   `json:"address"` // IP address to dial
	Port    int      `json:"port"`    // TCP port
	Groups  []string `json:"groups"`  // e.g. control-plane
	HostKey string   `json:"hostKey"` // authorized_keys form of its host key
	KnownAs string   `json:"knownAs"` // its known_hosts pattern

	// Root is where this machine keeps the host's private directories:
	// the host's /etc/kubernetes is Root+"/etc/kubernetes" here. Empty
	// when the host shares this machine's file system.
	Root    string `json:"root,omitempty"`
	hostDir string
	keyPath string
}

// Host returns the host named name.
func (inv *Inventory) Host(name string) (Host, bool) {
	for _, h := range inv.Hosts {
		if h.Name == name {
			return h, true
		}
	}
	return Host{}, false
}

// Addr is host:port for dialling.
func (h Host) Addr() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

// hostState records one host's runtime facts for Down.
type hostState struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	NetNS string `json:"netns,omitempty"` // "net:[inode]" of its namespace
	Veth  string `json:"veth,omitempty"`  // host side of its veth pair
}

// startSSH generates keys, starts one sshd per host and writes known_hosts,
// ssh_config and inventory.json.
func (sb *Sandbox) startSSH(ctx context.Context, pre prereqs) error {
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("ssh: current user: %w", err)
	}
	if os.Geteuid() == 0 {
		// sshd as root insists on its privilege separation directory, which
		// Debian's service unit creates; the sandbox runs no service.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			return fmt.Errorf("ssh: create /run/sshd (sshd's privilege separation directory): %w", err)
		}
	}
	sshDir := sb.path("ssh")
	sb.progress("ssh: generating client key and %d host keys", len(sb.opts.Hosts))
	clientPub, err := writeED25519(filepath.Join(sshDir, "id_ed25519"), "cairn-sandbox-client")
	if err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	if err := os.WriteFile(filepath.Join(sshDir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		return fmt.Errorf("ssh: %w", err)
	}

	inv := &Inventory{
		Version:      1,
		Mode:         pre.network,
		User:         u.Username,
		IdentityFile: filepath.Join(sshDir, "id_ed25519"),
		KnownHosts:   filepath.Join(sshDir, "known_hosts"),
		SSHConfig:    filepath.Join(sshDir, "config"),
		Groups:       map[string][]string{},
	}
	if !sb.opts.NoKube {
		// The cluster starts after the hosts (its certificates name the
		// first control-plane host's address); its kubeconfig's path is
		// known now.
		inv.Kubeconfig, inv.KubeContext = sb.path("kubeconfig"), ContextName
	}

	var ns *netState
	var ports []int
	var keep []string // the sandbox's directories under the private home
	if pre.network == NetworkLoopback {
		if ports, err = freePorts(len(sb.opts.Hosts)); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
	}
	if pre.network == NetworkNamespaces {
		sb.progress("ssh: creating bridge for %d hosts", len(sb.opts.Hosts))
		if ns, err = sb.upBridge(ctx, pre); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
		inv.PrivateDirs = privateDirs(sb.opts.Nodes)
		if sb.opts.Nodes {
			inv.ImagesDir = ImagesDir(sb.binDir())
		}
		if err := makeMountpoints(inv.PrivateDirs); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
		if u.HomeDir != "" && filepath.Clean(u.HomeDir) != "/" {
			inv.Home = filepath.Clean(u.HomeDir)
			keep = sb.keepThrough(inv.Home)
		}
		sb.progress("ssh: each host gets its own %s", strings.Join(append(slices.Clone(inv.PrivateDirs), inv.Home), ", "))
	} else {
		sb.progress("ssh: loopback mode: the hosts share this machine's file system (no private %s)", strings.Join(PrivateDirs(), ", "))
	}

	for i, spec := range sb.opts.Hosts {
		if err := validHostName(spec.Name); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
		h := Host{Name: spec.Name, Groups: spec.Groups, hostDir: sb.path("hosts", spec.Name)}
		if err := os.MkdirAll(h.hostDir, 0o700); err != nil {
			return err
		}
		h.keyPath = filepath.Join(h.hostDir, "ssh_host_ed25519_key")
		hostPub, err := writeED25519(h.keyPath, "cairn-sandbox-"+spec.Name)
		if err != nil {
			return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
		}
		h.HostKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub)))
		if ns != nil {
			h.Address, h.Port = ns.hostIP(i), 22
			h.KnownAs = h.Name + "," + h.Address
			h.Root = filepath.Join(h.hostDir, "root")
			for _, d := range inv.PrivateDirs {
				if err := os.MkdirAll(filepath.Join(h.Root, d), 0o755); err != nil {
					return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
				}
			}
			if inv.Home != "" {
				if err := makePrivateHome(h, inv.Home, keep); err != nil {
					return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
				}
			}
			if err := linkHostTools(filepath.Join(h.Root, "/usr/local/bin"), sb.binDir(), sb.opts.Nodes); err != nil {
				return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
			}
			if sb.opts.Nodes {
				if err := linkCNIPlugins(filepath.Join(h.Root, cniBinDir)); err != nil {
					return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
				}
			}
			if err := os.WriteFile(filepath.Join(h.hostDir, "etc-hosts"), []byte(etcHosts(ns, sb.opts.Hosts)), 0o644); err != nil {
				return fmt.Errorf("ssh: host %s: %w", spec.Name, err)
			}
		} else {
			h.Address, h.Port = "127.0.0.1", ports[i]
			h.KnownAs = fmt.Sprintf("[%s]:%d", h.Address, h.Port)
		}
		listen := net.JoinHostPort(map[bool]string{true: "0.0.0.0", false: h.Address}[ns != nil], strconv.Itoa(h.Port))
		cfg := sshdConfig(listen, h.keyPath, filepath.Join(sshDir, "authorized_keys"), u.Username, sb.marker())
		cfgPath := filepath.Join(h.hostDir, "sshd_config")
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			return err
		}
		if err := sb.startComponent(ctx, &sshHost{pre: pre, ns: ns, i: i, h: h, cfgPath: cfgPath, dirs: inv.PrivateDirs, home: inv.Home, keep: keep, node: sb.opts.Nodes}); err != nil {
			return fmt.Errorf("ssh: host %s: %w", h.Name, err)
		}
		inv.Hosts = append(inv.Hosts, h)
		for _, g := range h.Groups {
			inv.Groups[g] = append(inv.Groups[g], h.Name)
		}
	}

	// Wait until every host completes a handshake with its own host key and
	// accepts the client key, bounded.
	keyPEM, err := os.ReadFile(inv.IdentityFile)
	if err != nil {
		return err
	}
	signer, err := ssh.ParsePrivateKey(keyPEM)
	if err != nil {
		return err
	}
	for _, h := range inv.Hosts {
		if err := sb.waitSSH(ctx, h, inv.User, signer); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
	}

	if err := writeKnownHosts(inv); err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	if err := writeSSHConfig(inv); err != nil {
		return fmt.Errorf("ssh: %w", err)
	}
	if inv.Home != "" {
		// Each host knows the others' keys, as hosts of one fleet do, so
		// that scp between them (the kubeadm runbook's manual certificate
		// path) asks no question.
		kh, err := os.ReadFile(inv.KnownHosts)
		if err != nil {
			return err
		}
		for _, h := range inv.Hosts {
			if err := os.WriteFile(filepath.Join(h.hostDir, "home", ".ssh", "known_hosts"), kh, 0o644); err != nil {
				return fmt.Errorf("ssh: host %s: %w", h.Name, err)
			}
		}
	}
	b, err := json.MarshalIndent(inv, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(sb.path("inventory.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("ssh: write inventory: %w", err)
	}
	sb.mu.Lock()
	sb.state.Inventory = inv
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return err
	}
	for _, h := range inv.Hosts {
		sb.progress("ssh: host %-4s %s (groups %s)", h.Name, h.Addr(), strings.Join(h.Groups, ","))
	}
	sb.progress("ssh: inventory %s; try: ssh -F %s %s hostname", sb.path("inventory.json"), inv.SSHConfig, inv.Hosts[0].Name)
	return nil
}

// PrivateDirs are the directories each SSH host has its own copy of in
// netns mode: what the bundled runbooks' ssh steps write to
// (/etc/kubernetes, for the kubeadm certificate copy between hosts) and a
// scratch directory for runbook authors and tests. Everything else, /tmp
// included, is this machine's, shared by every host.
//
// /usr/local/bin is private too: there each host finds the node tools of the
// sandbox's release (HostTools), on sudo's secure_path as on a real node. So
// is /run/cilium, the runtime directory of a Cilium agent on the host
// (CiliumAgent), where the agent writes whatever its flags say.
func PrivateDirs() []string {
	return []string{"/etc/kubernetes", "/var/lib/cairn-host", "/usr/local/bin", "/run/cilium"}
}

// NodeDirs are private to each host as well when the hosts are nodes
// (Options.Nodes): the container runtime's state and configuration, the
// kubelet's, a stacked etcd member's data, the CNI configuration and its
// IP allocations, the pods' network namespaces (containerd pins each in
// /run/netns: shared, it would leave an empty file per pod on this
// machine), and the pods' logs. /opt/cni/bin, where containerd looks for CNI
// plugins, holds links to Debian's (linkCNIPlugins); a CNI provider's pods
// add their own there (Cilium's install-plugin.sh copies cilium-cni), as on
// any node.
func NodeDirs() []string {
	return []string{"/var/lib/containerd", "/run/containerd", "/etc/containerd",
		"/var/lib/kubelet", "/var/lib/etcd", "/etc/cni/net.d", "/var/lib/cni", "/run/netns", "/var/log/pods", "/var/log/containers",
		cniBinDir}
}

// cniBinDir is the nodes' CNI plugin directory, the one containerd's
// packaging and every CNI provider's installer use.
const cniBinDir = "/opt/cni/bin"

// debianCNI is where Debian's containernetworking-plugins puts the plugins.
const debianCNI = "/usr/lib/cni"

// linkCNIPlugins links each of Debian's CNI plugins into dir (a node's
// private /opt/cni/bin).
func linkCNIPlugins(dir string) error {
	ents, err := os.ReadDir(debianCNI)
	if err != nil {
		return &MissingError{Name: debianCNI, Where: "this machine", Install: "apt-get install -y containernetworking-plugins (scripts/ci-deps.sh)"}
	}
	for _, e := range ents {
		if err := os.Symlink(filepath.Join(debianCNI, e.Name()), filepath.Join(dir, e.Name())); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

func privateDirs(nodes bool) []string {
	if nodes {
		return append(PrivateDirs(), NodeDirs()...)
	}
	return PrivateDirs()
}

// HostTools are the binaries from the sandbox's bin directory that every
// host has in its /usr/local/bin (netns mode), when they are built.
func HostTools() []string { return []string{"kubeadm", "kubectl", "kubelet", "crictl"} }

// linkHostTools links each of HostTools present in binDir into dir; kubeadm
// is the dry-run wrapper (kubeadmWrapper) instead of a link, except on
// nodes, which also get the kubelet unit's systemctl (systemctlShim).
func linkHostTools(dir, binDir string, nodes bool) error {
	if nodes {
		if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(systemctlShim), 0o755); err != nil {
			return err
		}
	}
	for _, t := range HostTools() {
		src := filepath.Join(binDir, t)
		if _, err := os.Stat(src); err != nil {
			continue
		}
		dst := filepath.Join(dir, t)
		if t == binKubeadm && !nodes {
			if err := os.WriteFile(dst, []byte(kubeadmWrapper(src)), 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.Symlink(src, dst); err != nil && !os.IsExist(err) {
			return err
		}
	}
	return nil
}

// KubeadmDryRun says what the hosts' kubeadm does differently: the hosts
// have kubelet's binary but run no kubelet and no container runtime yet, so `kubeadm init` and
// `kubeadm join` (not their phases) run with --dry-run, and preflight's
// complaints about the missing kubelet and runtime are reported, not fatal.
// Everything they read from the cluster (discovery, kubeadm-certs) they read
// for real; what they would write they print. `cairn sandbox status` shows it.
const KubeadmDryRun = "kubeadm init and join run with --dry-run --ignore-preflight-errors=all on the hosts (no container runtime and no running kubelet there yet)"

// kubeadmWrapper is the hosts' /usr/local/bin/kubeadm (see KubeadmDryRun).
// It says so on stderr each time it adds the flags.
func kubeadmWrapper(real string) string {
	return fmt.Sprintf(`#!/bin/sh
# cairn sandbox: %[2]s.
real=%[1]s
case "$1" in
init | join)
	case "$2" in
	phase) ;;
	*)
		cmd=$1
		shift
		echo "cairn sandbox: kubeadm $cmd runs with --dry-run --ignore-preflight-errors=all here (no container runtime or running kubelet on the sandbox's hosts)" >&2
		exec "$real" "$cmd" --dry-run --ignore-preflight-errors=all "$@"
		;;
	esac
	;;
esac
exec "$real" "$@"
`, shellQuote(real), KubeadmDryRun)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// makeMountpoints creates each of PrivateDirs on this machine if it is
// missing (an empty directory, left in place: another sandbox may be using
// it as a mountpoint). Existing directories are not touched.
func makeMountpoints(dirs []string) error {
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create mountpoint %s: %w", d, err)
		}
	}
	return nil
}

// etcHosts is the /etc/hosts of every host in netns mode: localhost and each
// host's name, so that hosts reach each other by name and sudo finds its own
// hostname (it warns "unable to resolve host" otherwise).
func etcHosts(ns *netState, hosts []HostSpec) string {
	var b strings.Builder
	b.WriteString("# Written by cairn sandbox.\n127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	for i, h := range hosts {
		fmt.Fprintf(&b, "%s %s\n", ns.hostIP(i), h.Name)
	}
	// The load balancer listens on the bridge (see LBName).
	fmt.Fprintf(&b, "%s %s\n", ns.bridgeIP(), LBName)
	return b.String()
}

// makePrivateHome creates h's copy of the login user's home directory,
// hostDir/home, with an empty .ssh, and in it a mountpoint for each of keep,
// this sandbox's own directories that lie under home (its state and
// binaries): the host's sshd, host keys and tools live there, so they must
// show through the private home (keepThrough).
func makePrivateHome(h Host, home string, keep []string) error {
	priv := filepath.Join(h.hostDir, "home")
	if err := os.MkdirAll(filepath.Join(priv, ".ssh"), 0o700); err != nil {
		return err
	}
	for _, k := range keep {
		rel, _ := filepath.Rel(home, k)
		if err := os.MkdirAll(filepath.Join(priv, rel), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// keepThrough lists the sandbox's directories under home, outermost only:
// its state, its bin directory and wherever the binaries there link to (a
// bin directory of links into the cache).
func (sb *Sandbox) keepThrough(home string) []string {
	var keep []string
	dirs := []string{sb.dir, sb.binDir()}
	if ents, err := os.ReadDir(sb.binDir()); err == nil {
		for _, e := range ents {
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			if real, err := filepath.EvalSymlinks(filepath.Join(sb.binDir(), e.Name())); err == nil {
				dirs = append(dirs, filepath.Dir(real))
			}
		}
	}
	for _, d := range dirs {
		d = filepath.Clean(d)
		if !strings.HasPrefix(d, home+string(filepath.Separator)) {
			continue
		}
		if slices.ContainsFunc(keep, func(k string) bool { return d == k || strings.HasPrefix(d, k+string(filepath.Separator)) }) {
			continue
		}
		keep = slices.DeleteFunc(keep, func(k string) bool { return strings.HasPrefix(k, d+string(filepath.Separator)) })
		keep = append(keep, d)
	}
	return keep
}

// hostInit is the first process in a host's namespaces: it sets the
// hostname ($0), bind-mounts each SRC over DST with the mount program $1
// (pairs up to "--"), then becomes sshd (the rest). unshare made the mount
// namespace private, so no mount propagates to this machine, and the mounts
// vanish with the namespace when its last process exits.
const hostInit = hostMounts + `exec "$@"`

const hostMounts = `echo "$0" > /proc/sys/kernel/hostname || exit 1
m=$1; shift
while [ "$1" != -- ]; do "$m" --rbind "$1" "$2" || exit 1; shift 2; done
shift
`

// nodeHostInit is a node's hostInit: once its mounts are in place they
// become shared within the node's mount namespace (made private by unshare,
// so nothing propagates to this machine), as on a systemd host. Pods need
// it: a CNI agent's Bidirectional mount of /sys/fs/bpf must reach the node,
// and containerd refuses Bidirectional and HostToContainer mounts of
// private ones.
const nodeHostInit = hostMounts + `"$m" --make-rshared / || exit 1
exec "$@"`

// nodeInit starts a node's hostInit: it turns on IPv4 forwarding in the
// node's network namespace (kubeadm's preflight wants it, as the kubeadm
// install guide has readers set it), then mounts a sysfs of the node's own
// network namespace over /sys, carrying this machine's cgroup hierarchies
// across through cg.
func nodeInit(cg string) string {
	return `echo 1 > /proc/sys/net/ipv4/ip_forward || exit 1
"$1" --rbind /sys/fs/cgroup ` + shellQuote(cg) + ` && "$1" -t sysfs sysfs /sys && "$1" --move ` + shellQuote(cg) + ` /sys/fs/cgroup || exit 1
`
}

// sshHost is one SSH host: sshd, in netns mode inside a fresh network, UTS
// and mount namespace (made by unshare, so they vanish with the process and
// leave no mount behind) wired to the bridge by a veth pair, with its own
// PrivateDirs and /etc/hosts; in loopback mode on 127.0.0.1:port, in its own
// UTS namespace when root.
type sshHost struct {
	pre     prereqs
	ns      *netState
	i       int
	h       Host
	cfgPath string
	dirs    []string // the host's private directories (Inventory.PrivateDirs)
	home    string   // the login user's home, private to the host ("" for none)
	keep    []string // what shows through the private home (keepThrough)
	node    bool     // a kubeadm-ready node (Options.Nodes)
}

// hostComponent names the component (and process) of host name.
func hostComponent(name string) string { return hostComponentPrefix + name }

const hostComponentPrefix = "sshd-"

func (s *sshHost) Name() string { return hostComponent(s.h.Name) }

func (s *sshHost) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	return Probe{Kind: ProbeSSH, URL: s.h.Addr()}, sb.startHost(ctx, s)
}

func (sb *Sandbox) startHost(ctx context.Context, s *sshHost) error {
	pre, ns, i, h, cfgPath, home := s.pre, s.ns, s.i, s.h, s.cfgPath, s.home
	sshd := []string{pre.sshd, "-D", "-e", "-f", cfgPath}
	// Set the hostname inside the new UTS namespace, then become sshd.
	setHost := []string{"/bin/sh", "-c", `echo "$0" > /proc/sys/kernel/hostname && exec "$@"`, h.Name}
	var argv []string
	switch {
	case ns != nil:
		argv = []string{pre.unshare, "--net", "--uts", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", hostInit, h.Name, pre.mount}
		if s.node {
			// A node: a PID namespace too, with tini as its init (it
			// reaps containerd's shims, and when it exits the kernel ends
			// every process of the node), and the node's own sysfs (so
			// that /sys/class/net shows the node's interfaces, as kubelet
			// and kube-proxy expect) with this machine's cgroup
			// hierarchies on it.
			cg := filepath.Join(h.hostDir, "cgroup-mnt")
			if err := os.MkdirAll(cg, 0o700); err != nil {
				return err
			}
			// --kill-child: if unshare dies (the test binary's
			// Pdeathsig), the node's init and so the whole node die too.
			argv = []string{pre.unshare, "--net", "--uts", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private", "--",
				pre.tini, "--", "/bin/sh", "-c", nodeInit(cg) + nodeHostInit, h.Name, pre.mount}
		}
		for _, d := range s.dirs {
			argv = append(argv, filepath.Join(h.Root, d), d)
		}
		argv = append(argv, filepath.Join(h.hostDir, "etc-hosts"), "/etc/hosts")
		if home != "" {
			// The sandbox's own directories first, into their mountpoints
			// in the private home, then the private home (with them) over
			// the real one: mounts are in order, and each source path is
			// resolved before the home is covered.
			priv := filepath.Join(h.hostDir, "home")
			for _, k := range s.keep {
				rel, _ := filepath.Rel(home, k)
				argv = append(argv, k, filepath.Join(priv, rel))
			}
			argv = append(argv, priv, home)
		}
		argv = append(append(argv, "--"), sshd...)
	case pre.unshare != "" && os.Geteuid() == 0:
		argv = append(append([]string{pre.unshare, "--uts", "--"}, setHost...), sshd...)
	default:
		argv = sshd
	}
	sb.progress("ssh: starting sshd for %s", h.Name)
	c, err := sb.spawn(hostComponent(h.Name), argv, serverEnv())
	if err != nil {
		return err
	}
	pid := c.cmd.Process.Pid
	hs := hostState{Name: h.Name, PID: pid}
	if ns != nil {
		// Wait until unshare has moved the process into its namespace.
		self, _ := os.Readlink("/proc/self/ns/net")
		var nsLink string
		if !waitFor(ctx, 5*time.Second, func() bool {
			nsLink, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
			return nsLink != "" && nsLink != self || c.exited()
		}) || c.exited() {
			log := sb.path("logs", hostComponent(h.Name)+".log")
			return fmt.Errorf("sshd (pid %d) did not enter a new network namespace; log %s:\n%s", pid, log, logTail(log, 10))
		}
		hs.NetNS = nsLink
		hs.Veth = ns.vethName(i)
		sb.mu.Lock()
		sb.state.Net.Hosts = append(sb.state.Net.Hosts, hs)
		sb.mu.Unlock()
		if err := sb.saveState(); err != nil {
			return err
		}
		if err := ns.plumb(ctx, pre, i, pid); err != nil {
			return err
		}
	}
	return nil
}

func (sb *Sandbox) waitSSH(ctx context.Context, h Host, user string, signer ssh.Signer) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey))
	if err != nil {
		return err
	}
	cfg := &ssh.ClientConfig{
		User:            user,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
		Timeout:         2 * time.Second,
	}
	var last error
	if waitFor(ctx, 15*time.Second, func() bool {
		var c *ssh.Client
		c, last = ssh.Dial("tcp", h.Addr(), cfg)
		if last == nil {
			c.Close()
		}
		return last == nil
	}) {
		return nil
	}
	log := sb.path("logs", hostComponent(h.Name)+".log")
	return fmt.Errorf("host %s (%s) not answering after 15s (%v); log %s:\n%s", h.Name, h.Addr(), last, log, logTail(log, 10))
}

func validHostName(n string) error {
	if n == "" || len(n) > 32 {
		return fmt.Errorf("host name %q: want 1-32 characters", n)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("host name %q: use only a-z, 0-9 and -", n)
		}
	}
	return nil
}

// sshdConfig is a minimal, key-only sshd configuration.
// Every session gets marker (SetEnv) in its environment, which its children
// inherit: Down finds and stops what a session left running even after it
// escaped sshd's process tree (setsid, nohup, a daemonised server).
//
// SHLVL=1 keeps bash, as the login shell of a command session, from
// sourcing the user's ~/.bashrc first (Debian's bash does that when sshd
// runs it, at shell level 1 only): on loopback hosts that is the reader's
// own file, and one whose pyenv init waited a minute on a lock a killed
// shell had left made every block on the sandbox hang. Scripts run bash
// --norc anyway; terminals are login shells and still read their profile.
func sshdConfig(listen, hostKey, authKeys, user, marker string) string {
	return fmt.Sprintf(`# Written by cairn sandbox. Key-only, one user, SFTP.
SetEnv %s SHLVL=1
ListenAddress %s
HostKey %s
PidFile none
AuthorizedKeysFile %s
AllowUsers %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding yes
LogLevel INFO
Subsystem sftp internal-sftp
`, marker, listen, hostKey, authKeys, user)
}

// writeED25519 writes a new ed25519 key pair as path (OpenSSH private key,
// 0600) and path.pub, and returns the public key.
func writeED25519(path, comment string) (ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " " + comment + "\n"
	if err := os.WriteFile(path+".pub", []byte(line), 0o644); err != nil {
		return nil, err
	}
	return sp, nil
}

func writeKnownHosts(inv *Inventory) error {
	var b strings.Builder
	for _, h := range inv.Hosts {
		fmt.Fprintf(&b, "%s %s\n", h.KnownAs, h.HostKey)
	}
	return os.WriteFile(inv.KnownHosts, []byte(b.String()), 0o644)
}

func writeSSHConfig(inv *Inventory) error {
	var b strings.Builder
	b.WriteString("# Written by cairn sandbox. Use: ssh -F " + inv.SSHConfig + " HOST\n")
	for _, h := range inv.Hosts {
		fmt.Fprintf(&b, `Host %s
  HostName %s
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
`, h.Name, h.Address, h.Port, inv.User, inv.IdentityFile, inv.KnownHosts)
	}
	return os.WriteFile(inv.SSHConfig, []byte(b.String()), 0o644)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
