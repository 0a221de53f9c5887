package sandbox

import (
	"net"
	"strconv"
)

// cpNode is where the sandbox's control plane (etcd, kube-apiserver,
// kube-controller-manager) runs. In netns mode that is the first
// control-plane host's network namespace, as kubeadm's static pods run on
// the first node: the apiserver answers at that host's address on 6443,
// the load balancer forwards there, and kubeadm on the host reaches its
// "local" apiserver as on a real node. Otherwise (loopback mode, or no
// hosts) it is this machine's loopback, on free ports.
type cpNode struct {
	name    string
	ip      string // where the servers listen and advertise
	nsPID   int    // a process in the host's namespaces; 0: this machine
	nsenter string
}

// The ports kubeadm's control plane uses. Inside a host's own network
// namespace they are never taken.
const (
	portAPIServer = 6443
	portEtcd      = 2379
	portEtcdPeer  = 2380
	portKCM       = 10257
)

// controlPlaneNode picks where the control plane runs.
func (sb *Sandbox) controlPlaneNode(pre prereqs) cpNode {
	local := cpNode{ip: "127.0.0.1"}
	inv := sb.Inventory()
	if inv == nil || inv.Mode != NetworkNamespaces {
		return local
	}
	name := sb.firstControlPlane()
	h, ok := inv.Host(name)
	if !ok {
		return local
	}
	if pid := sb.hostPID(name); pid != 0 {
		return cpNode{name: name, ip: h.Address, nsPID: pid, nsenter: pre.nsenter}
	}
	return local
}

// onHost is true when the servers run in a host's namespaces.
func (n cpNode) onHost() bool { return n.nsPID != 0 }

// wrap makes argv run in the node's network and UTS namespaces, and in any
// more that nsFlags name ("--mount"); nsenter execs, so the recorded pid is
// the server's own.
func (n cpNode) wrap(argv []string, nsFlags ...string) []string {
	if !n.onHost() {
		return argv
	}
	pre := append([]string{n.nsenter, "--target", strconv.Itoa(n.nsPID), "--net", "--uts"}, nsFlags...)
	return append(append(pre, "--"), argv...)
}

// ports returns the fixed kubeadm ports on a host, else n free ones.
func (n cpNode) ports(fixed ...int) ([]int, error) {
	if n.onHost() {
		return fixed, nil
	}
	return freePorts(len(fixed))
}

func (n cpNode) hostPort(port int) string { return net.JoinHostPort(n.ip, strconv.Itoa(port)) }
