package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/internal/atomicfile"
)

// LBName is the load balancer's DNS name (under .internal, the TLD reserved
// for private use). On this machine the sandbox maps it to 127.0.0.1 in
// /etc/hosts when it runs as root; on every SSH host its own /etc/hosts maps
// it to the bridge address. The load balancer listens on both, so the one
// name means the same TCP load balancer everywhere, as a cloud LB's DNS name
// does. (Not a .localhost name: curl and browsers resolve those to loopback
// without asking /etc/hosts.)
const LBName = "lb.cairn.internal"

// LBInfo says where the load balancer answers.
type LBInfo struct {
	Name     string   `json:"name"`     // LBName
	Port     int      `json:"port"`     // the same on every address
	Addrs    []string `json:"addrs"`    // where it listens
	Backends []string `json:"backends"` // host:port of each kube-apiserver behind it
	Config   string   `json:"config"`   // haproxy.cfg
	Socket   string   `json:"socket"`   // haproxy's admin socket
	// HostsFile is this machine's hosts file when the sandbox added LBName
	// to it (Down removes the line).
	HostsFile string `json:"hostsFile,omitempty"`
}

// Endpoint is name:port, what kubeadm calls the controlPlaneEndpoint.
func (l *LBInfo) Endpoint() string { return net.JoinHostPort(l.Name, strconv.Itoa(l.Port)) }

// loadBalancer is haproxy in TCP mode in front of the apiservers, checking
// each backend with a TCP connect as the runbook's load balancer
// requirements say.
type loadBalancer struct {
	bin      string
	addrs    []string // listen addresses: 127.0.0.1, ::1, the bridge's
	backends []string
	info     *LBInfo // set by Start
}

func (lb *loadBalancer) Name() string { return "haproxy" }

func (lb *loadBalancer) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	port, err := freePort()
	if err != nil {
		return Probe{}, err
	}
	dir := sb.path("lb")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Probe{}, err
	}
	lb.info = &LBInfo{Name: LBName, Port: port, Addrs: lb.addrs, Backends: lb.backends,
		Config: sb.path("lb", "haproxy.cfg"), Socket: sb.path("lb", "admin.sock")}
	if err := atomicfile.Write(lb.info.Config, []byte(haproxyConfig(lb.info)), 0o600); err != nil {
		return Probe{}, err
	}
	sb.progress("lb: starting haproxy on %s (%s)", lb.info.Endpoint(), strings.Join(lb.addrs, ", "))
	// -db: stay in the foreground, log to stderr (the component's log).
	_, err = sb.spawn(lb.Name(), []string{lb.bin, "-db", "-f", lb.info.Config}, serverEnv())
	return Probe{Kind: ProbeTCP, URL: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, err
}

// haproxyConfig is a TCP-forwarding load balancer: one frontend on every
// address, one backend server per apiserver with a TCP health check.
func haproxyConfig(l *LBInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by cairn sandbox: the TCP load balancer in front of kube-apiserver.
global
  maxconn 512
  stats socket %s mode 600 level admin
  log stderr format short local0 info

defaults
  mode tcp
  log global
  option tcplog
  timeout connect 5s
  timeout client 1h
  timeout server 1h

frontend apiserver
`, l.Socket)
	for _, a := range l.Addrs {
		fmt.Fprintf(&b, "  bind %s\n", net.JoinHostPort(a, strconv.Itoa(l.Port)))
	}
	b.WriteString("  default_backend apiservers\n\nbackend apiservers\n  default-server check inter 2s fall 2 rise 1\n")
	for i, be := range l.Backends {
		fmt.Fprintf(&b, "  server apiserver%d %s\n", i, be)
	}
	return b.String()
}

// startLB starts the load balancer with the sandbox's apiserver behind it,
// listening on loopback (both families where ::1 exists) and, in netns mode,
// on the bridge, where the hosts reach it as LBName.
func (sb *Sandbox) startLB(ctx context.Context, pre prereqs) error {
	var backends []string
	if k := sb.Kube(); k != nil {
		u, err := url.Parse(k.Server)
		if err != nil {
			return err
		}
		backends = []string{u.Host}
	} else if inv := sb.Inventory(); inv != nil {
		// Nodes: every control-plane host's apiserver-to-be, as the
		// runbook's load balancer has them (health checks take each in
		// when kubeadm has started it there).
		for _, name := range inv.Groups[GroupControlPlane] {
			h, _ := inv.Host(name)
			backends = append(backends, net.JoinHostPort(h.Address, strconv.Itoa(portAPIServer)))
		}
	}
	if len(backends) == 0 {
		return errors.New("lb: no apiserver to forward to")
	}
	addrs := []string{"127.0.0.1"}
	sb.mu.Lock()
	if ns := sb.state.Net; ns != nil {
		addrs = append(addrs, ns.bridgeIP())
	}
	sb.mu.Unlock()
	lb := &loadBalancer{bin: pre.haproxy, addrs: addrs, backends: backends}
	if err := sb.startComponent(ctx, lb); err != nil {
		return fmt.Errorf("lb: %w", err)
	}
	var why error
	if os.Geteuid() != 0 {
		why = errors.New("not root")
	} else {
		why = addHostsLine(systemHosts, "127.0.0.1", LBName, hostsMarker(sb.dir))
	}
	if why == nil {
		lb.info.HostsFile = systemHosts
		sb.progress("lb: %s resolves to 127.0.0.1 here (%s) and to the bridge on the hosts", LBName, systemHosts)
	} else {
		// Not fatal: the hosts resolve it, and this machine reaches the
		// load balancer at 127.0.0.1.
		sb.progress("lb: %s does not resolve on this machine (%s: %v); here use 127.0.0.1:%d", LBName, systemHosts, why, lb.info.Port)
	}
	sb.mu.Lock()
	sb.state.LB = lb.info
	sb.mu.Unlock()
	return sb.saveState()
}
