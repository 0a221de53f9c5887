package sandbox

import (
	"path/filepath"
	"strconv"
)

// The facts a sandbox reports about itself (Status.Facts), by the names a
// runbook parameter's `sandbox:` key uses (runbook.SandboxFacts).
const (
	FactLBName          = "lb-name"
	FactLBPort          = "lb-port"
	FactSSHUser         = "ssh-user"
	FactSSHKey          = "ssh-key"
	FactNodeImages      = "node-images"
	FactImageSource     = "image-source"
	FactPreflightIgnore = "preflight-ignore"
	FactCNI             = "cni"
	FactPodNetworkCIDR  = "pod-network-cidr"
	FactWorkerNode      = "worker-node"
	FactNodeInterface   = "node-interface"
	FactCiliumChart     = "cilium-chart"
	FactCiliumVersion   = "cilium-version"
	FactTestImage       = "test-image"
	FactNodeImage       = "node-image"
)

// FactNames are every fact a sandbox may report.
var FactNames = []string{FactLBName, FactLBPort, FactSSHUser, FactSSHKey, FactNodeImages,
	FactImageSource, FactPreflightIgnore, FactCNI, FactPodNetworkCIDR, FactWorkerNode, FactNodeInterface,
	FactCiliumChart, FactCiliumVersion, FactTestImage, FactNodeImage}

// NodePodNetworkCIDR is the pod range the sandbox suggests for a cluster
// on its nodes: clear of its host network (10.200.0.0/16) and of
// Kubernetes' default service range (10.96.0.0/12); the one the kubeadm
// runbook's bridge CNI and Flannel use.
const NodePodNetworkCIDR = "10.244.0.0/16"

// Facts are what the sandbox knows of itself that a reader would
// otherwise type in: where its load balancer answers, who logs in to its
// hosts and with which key and, with nodes, where the node images are and
// what the nodes need from kubeadm. Only what this sandbox has: no load
// balancer facts in loopback mode, no node facts without --nodes.
func (s Status) Facts() map[string]string {
	f := map[string]string{}
	if s.LB != nil {
		f[FactLBName] = s.LB.Name
		f[FactLBPort] = strconv.Itoa(s.LB.Port)
	}
	if inv := s.Inventory; inv != nil && len(inv.Hosts) > 0 {
		f[FactSSHUser] = inv.User
		f[FactSSHKey] = inv.IdentityFile
	}
	if s.Nodes && s.Inventory != nil && s.Inventory.ImagesDir != "" {
		f[FactNodeImages] = s.Inventory.ImagesDir
		// No registry is reachable from the nodes: images come from the
		// archives.
		f[FactImageSource] = "archive"
		// The bridge and host-local plugins are on every node; no other
		// CNI's images are.
		f[FactCNI] = "bridge"
		f[FactPodNetworkCIDR] = NodePodNetworkCIDR
		if w := s.Inventory.Groups[GroupWorkers]; len(w) > 0 {
			f[FactWorkerNode] = w[0]
		}
		// Every host's one link (net.go).
		f[FactNodeInterface] = "eth0"
		// The chart of the release whose images the nodes have, from the
		// bin directory the node images came from, and a test image
		// they have too.
		f[FactCiliumChart] = CiliumChart(filepath.Dir(s.Inventory.ImagesDir))
		f[FactCiliumVersion] = CiliumVersion
		f[FactTestImage] = ImageWeb
		f[FactNodeImage] = ImageNodeShell
		if !cgroupV2() {
			// kubeadm's SystemVerification fails a cgroup v1 host; the
			// nodes' kubelets run with failCgroupV1: false.
			f[FactPreflightIgnore] = "SystemVerification"
		}
	}
	return f
}
