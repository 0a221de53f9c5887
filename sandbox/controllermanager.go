package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
)

// ControllerManager is a kube-controller-manager or cloud-controller-manager
// process against the sandbox's apiserver. It serves /healthz on a loopback
// port of its own (its Probe) and authenticates either as the sandbox admin
// or, when User is set, with a client certificate from the sandbox CA, the
// way kubeadm sets up system:kube-controller-manager: then RBAC decides what
// it may do, as on a real control plane.
type ControllerManager struct {
	// ComponentName names the component, its log and its process.
	ComponentName string
	// Bin is the binary; a bare name is looked up in the sandbox's BinDir.
	Bin string
	// User and Groups are the client certificate's CN and O. Empty: admin.
	User   string
	Groups []string
	// Args are the flags beyond the kubeconfigs and the serving address.
	Args []string

	// firstJob, if set, is what Up waits for once after /healthz answers.
	firstJob func(ctx context.Context, sb *Sandbox) error
	// node is where it runs (the sandbox's own KCM); zero: this machine.
	node cpNode
}

// Name implements Component.
func (cm *ControllerManager) Name() string { return cm.ComponentName }

// Ready implements readier.
func (cm *ControllerManager) Ready(ctx context.Context, sb *Sandbox) error {
	if cm.firstJob == nil {
		return nil
	}
	return cm.firstJob(ctx, sb)
}

// Start implements Component.
func (cm *ControllerManager) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	k := sb.Kube()
	if k == nil {
		return Probe{}, fmt.Errorf("no cluster to manage")
	}
	bin := cm.Bin
	if !strings.Contains(bin, "/") {
		bin = filepath.Join(sb.binDir(), bin)
	}
	kubeconfig := k.Kubeconfig
	if cm.User != "" {
		kubeconfig = sb.path("kube", cm.ComponentName+".kubeconfig")
		if err := writeClientKubeconfig(sb.path("kube", "pki"), kubeconfig, k.Server, cm.User, cm.Groups); err != nil {
			return Probe{}, err
		}
	}
	node := cm.node
	if node.ip == "" {
		node.ip = "127.0.0.1"
	}
	ports, err := node.ports(portKCM)
	if err != nil {
		return Probe{}, err
	}
	port := ports[0]
	sb.progress("kube: starting %s on %s", cm.ComponentName, node.hostPort(port))
	argv := append([]string{bin,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=" + node.ip,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + sb.path("kube", cm.ComponentName+"-certs"),
	}, cm.Args...)
	_, err = sb.spawn(cm.ComponentName, node.wrap(argv), serverEnv())
	return Probe{Kind: ProbeHTTP, URL: "https://" + node.hostPort(port) + "/healthz", Want: "ok"}, err
}

// newKCM is the sandbox's own kube-controller-manager: no leader election;
// it creates default ServiceAccounts, deletes namespaces, collects garbage.
func newKCM(bin string, sb *Sandbox, node cpNode) *ControllerManager {
	pki := func(name string) string { return sb.path("kube", "pki", name) }
	return &ControllerManager{
		ComponentName: "kube-controller-manager",
		Bin:           bin,
		node:          node,
		Args: []string{
			"--leader-elect=false",
			"--service-account-private-key-file=" + pki("sa.key"),
			"--root-ca-file=" + pki("ca.crt"),
			// As kubeadm runs it: signs CSRs (a joining kubelet's) and
			// signs cluster-info for bootstrap-token discovery.
			"--cluster-signing-cert-file=" + pki("ca.crt"),
			"--cluster-signing-key-file=" + pki("ca.key"),
			"--controllers=*,bootstrapsigner,tokencleaner",
			"--v=" + kubeLogLevel,
		},
		// Ready means it did its first job: the default ServiceAccount.
		firstJob: func(ctx context.Context, sb *Sandbox) error {
			code, body, err := sb.Kube().api().Get(ctx, defaultSAPath)
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("default ServiceAccount: %d %s", code, strings.TrimSpace(body))
			}
			return nil
		},
	}
}
