package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The sandbox's control plane is laid out the way kubeadm lays one out: its
// PKI comes from `kubeadm init phase certs all` (kube/pki, kubeadm's
// certificatesDir), kube-apiserver and the controller manager run with
// kubeadm's certificate flags, and, once the hosts and the load balancer are
// up, the first control-plane host holds /etc/kubernetes/pki and an
// admin.conf that reaches the cluster through the load balancer, and the
// cluster carries what `kubeadm init` uploads (kubeadm-config, kubelet-config,
// cluster-info, the bootstrap-token RBAC). So kubeadm's cluster-side commands
// (token create, init phase upload-certs, join discovery) work against it for
// real. What kubeadm init would also do but needs a kubelet (static pods, the
// node, the addons' pods) is the sandbox-nodes mode's work.

// kubeadmConfig is the InitConfiguration and ClusterConfiguration the
// sandbox hands kubeadm for its control plane. endpoint is the
// controlPlaneEndpoint: LBName before the load balancer's port is known
// (certificates hold no port), then LBName:port.
//
// advertise is the node's address; empty lets kubeadm pick this machine's
// (kubeadm refuses loopback).
func kubeadmConfig(pkiDir, nodeName, advertise, endpoint string) string {
	return kubeadmConfigFor(pkiDir, nodeName, advertise, fmt.Sprintf(`controlPlaneEndpoint: %s
networking:
  serviceSubnet: %s
apiServer:
  certSANs: ["127.0.0.1", "localhost"]
`, endpoint, serviceCIDR))
}

// kubeadmConfigFor is a kubeadm configuration for node nodeName at
// advertise, certificates in pkiDir, with cluster (more ClusterConfiguration
// fields) at the end.
func kubeadmConfigFor(pkiDir, nodeName, advertise, cluster string) string {
	api := ""
	if advertise != "" {
		api = "localAPIEndpoint:\n  advertiseAddress: " + advertise + "\n"
	}
	return fmt.Sprintf(`# Written by cairn sandbox for kubeadm.
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
%[4]snodeRegistration:
  name: %[2]s
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[3]s
certificatesDir: %[1]s
%[5]s`, pkiDir, nodeName, KubeVersion, api, cluster)
}

// advertiseAddress is the first control-plane host's address in netns mode,
// where the sandbox's apiserver plays that host's; else empty.
func (sb *Sandbox) advertiseAddress() string {
	inv := sb.Inventory()
	if inv == nil || inv.Mode != NetworkNamespaces {
		return ""
	}
	h, _ := inv.Host(sb.firstControlPlane())
	return h.Address
}

// firstControlPlane is the host that plays the node kubeadm init ran on:
// the first host in GroupControlPlane, else the first host, else "cp0"
// (a kube-only sandbox still names its node).
func (sb *Sandbox) firstControlPlane() string {
	for _, h := range sb.opts.Hosts {
		for _, g := range h.Groups {
			if g == GroupControlPlane {
				return h.Name
			}
		}
	}
	if len(sb.opts.Hosts) > 0 {
		return sb.opts.Hosts[0].Name
	}
	return "cp0"
}

// kubeadm runs the sandbox's kubeadm with args, bounded, and returns its
// error with the output.
func (sb *Sandbox) kubeadm(ctx context.Context, bin string, args ...string) error {
	return sb.kubeadmOn(ctx, cpNode{}, bin, args...)
}

// kubeadmOn runs kubeadm in node's namespaces (network, UTS and mount: the
// node's /etc/hosts and /etc/kubernetes), as if on the node.
func (sb *Sandbox) kubeadmOn(ctx context.Context, node cpNode, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := node.wrap(append([]string{bin}, args...), "--mount")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = serverEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubeadm %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// writeKubeadmPKI generates the control plane's certificates and keys with
// `kubeadm init phase certs all` into kube/pki.
func (sb *Sandbox) writeKubeadmPKI(ctx context.Context, bin string) error {
	cfg := sb.path("kube", "kubeadm.yaml")
	if err := os.WriteFile(cfg, []byte(kubeadmConfig(sb.path("kube", "pki"), sb.firstControlPlane(), sb.advertiseAddress(), LBName)), 0o600); err != nil {
		return err
	}
	return sb.kubeadm(ctx, bin, "init", "phase", "certs", "all", "--config", cfg)
}

// kubeadmFirstControlPlane gives the first control-plane host what kubeadm
// init leaves there (/etc/kubernetes/pki, admin.conf through the load
// balancer) and uploads to the cluster what kubeadm init uploads. Only in
// netns mode, where hosts have their own /etc/kubernetes.
func (sb *Sandbox) kubeadmFirstControlPlane(ctx context.Context, pre prereqs) error {
	bin := pre.kube.kubeadm
	inv, lb := sb.Inventory(), sb.LoadBalancer()
	if inv == nil || lb == nil || inv.Mode != NetworkNamespaces {
		return nil
	}
	name := sb.firstControlPlane()
	h, ok := inv.Host(name)
	if !ok || h.Root == "" {
		return nil
	}
	etcK8s := filepath.Join(h.Root, "etc", "kubernetes")
	sb.progress("kubeadm: %s gets /etc/kubernetes/pki and admin.conf (server https://%s)", name, lb.Endpoint())
	if err := copyTree(sb.path("kube", "pki"), filepath.Join(etcK8s, "pki")); err != nil {
		return fmt.Errorf("kubeadm: %w", err)
	}
	// kubeadm on this machine reads the PKI from kube/pki; the
	// configuration it uploads says where the host keeps it.
	cfg, uploaded := sb.path("kube", "kubeadm-lb.yaml"), sb.path("kube", "kubeadm-uploaded.yaml")
	if err := os.WriteFile(cfg, []byte(kubeadmConfig(sb.path("kube", "pki"), name, sb.advertiseAddress(), lb.Endpoint())), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(uploaded, []byte(kubeadmConfig("/etc/kubernetes/pki", name, sb.advertiseAddress(), lb.Endpoint())), 0o600); err != nil {
		return err
	}
	if err := sb.kubeadm(ctx, bin, "init", "phase", "kubeconfig", "admin", "--config", cfg, "--kubeconfig-dir", etcK8s); err != nil {
		return fmt.Errorf("kubeadm: %w", err)
	}
	// kubeadm init binds its admins' group to cluster-admin (with
	// super-admin.conf) before it first uses admin.conf; so does the sandbox.
	if err := sb.Kube().api().Create(ctx, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", `{
  "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
  "metadata": {"name": "kubeadm:cluster-admins"},
  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
  "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}]
}`); err != nil {
		return fmt.Errorf("kubeadm: %w", err)
	}
	// On cp0, as kubeadm init runs them there: its /etc/kubernetes, its
	// name for the load balancer.
	node := sb.controlPlaneNode(pre)
	sb.progress("kubeadm: on %s: uploading kubeadm-config and kubelet-config, creating cluster-info and the bootstrap-token RBAC (through %s)", name, lb.Endpoint())
	for _, phase := range [][]string{{"upload-config", "all"}, {"bootstrap-token"}} {
		args := append(append([]string{"init", "phase"}, phase...), "--config", uploaded, "--kubeconfig", "/etc/kubernetes/admin.conf")
		if err := sb.kubeadmOn(ctx, node, bin, args...); err != nil {
			return fmt.Errorf("kubeadm: %w", err)
		}
	}
	return nil
}

// copyTree copies the regular files under src to dst, keeping modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	})
}
