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
		if err := writeClientKubeconfig(sb.path("kube"), kubeconfig, k.Server, cm.User, cm.Groups); err != nil {
			return Probe{}, err
		}
	}
	port, err := freePort()
	if err != nil {
		return Probe{}, err
	}
	sb.progress("kube: starting %s on 127.0.0.1:%d", cm.ComponentName, port)
	argv := append([]string{bin,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + sb.path("kube", cm.ComponentName+"-certs"),
	}, cm.Args...)
	_, err = sb.spawn(cm.ComponentName, argv, serverEnv())
	return Probe{Kind: ProbeHTTP, URL: "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz", Want: "ok"}, err
}

// newKCM is the sandbox's own kube-controller-manager: no leader election;
// it creates default ServiceAccounts, deletes namespaces, collects garbage.
func newKCM(bin string, sb *Sandbox) *ControllerManager {
	kd := func(elem ...string) string { return sb.path(append([]string{"kube"}, elem...)...) }
	return &ControllerManager{
		ComponentName: "kube-controller-manager",
		Bin:           bin,
		Args: []string{
			"--leader-elect=false",
			"--service-account-private-key-file=" + kd("sa.key"),
			"--root-ca-file=" + kd("ca.crt"),
			"--v=" + kubeLogLevel,
		},
		// Ready means it did its first job: the default ServiceAccount.
		firstJob: func(ctx context.Context, sb *Sandbox) error {
			code, body, err := kubeGet(ctx, sb.Kube(), defaultSAPath)
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
