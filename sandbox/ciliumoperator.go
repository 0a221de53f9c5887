package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of the Cilium runbook's binaries and chart in the sandbox's bin
// directory (scripts/sandbox-bins.sh builds and copies them).
const (
	BinCiliumOperator = "cilium-operator-generic"
	BinHelm           = "helm"
	// CiliumVersion is the release of the operator and of the chart.
	CiliumVersion = "1.20.2"
)

// CiliumChart is the directory of the Cilium Helm chart of CiliumVersion,
// copied from the github.com/cilium/cilium module the operator is built from.
func CiliumChart(binDir string) string { return filepath.Join(binDir, "charts", "cilium") }

// CiliumCRD is the file of Cilium's own CustomResourceDefinition of that
// version and plural (v2, ciliumnodes), copied from the same module.
func CiliumCRD(binDir, version, plural string) string {
	return filepath.Join(binDir, "charts", "cilium-crds", version, plural+".yaml")
}

// CiliumOperator is a real cilium-operator-generic run out of cluster
// against the sandbox's apiserver the way its Deployment runs it in a
// cluster: the keys of the cilium-config ConfigMap (what Helm rendered) as
// files in --config-dir, as the chart's volume mounts them, and the
// operator's ServiceAccount as its identity (a client certificate from the
// sandbox CA in that account's name, so the chart's RBAC decides what it may
// do). Only its listeners move to free loopback ports.
//
// It reads the ConfigMap when it starts, like a pod: to apply a changed
// ConfigMap (a Helm upgrade), Remove it and Add it again — what the
// Deployment's rollout does in a cluster.
type CiliumOperator struct {
	// ComponentName names the component, its log and its process;
	// default "cilium-operator".
	ComponentName string
	// Namespace holds cilium-config and the ServiceAccount.
	Namespace string
	// ConfigMap and ServiceAccount default to the chart's names.
	ConfigMap, ServiceAccount string
	// Args are extra flags.
	Args []string
}

// Name implements Component.
func (o *CiliumOperator) Name() string {
	if o.ComponentName == "" {
		return "cilium-operator"
	}
	return o.ComponentName
}

// Start implements Component.
func (o *CiliumOperator) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	k := sb.Kube()
	if k == nil {
		return Probe{}, fmt.Errorf("no cluster to run against")
	}
	ns, cmName, sa := ciliumPodDefaults(o.Namespace, o.ConfigMap, o.ServiceAccount, "cilium-operator")
	bin := filepath.Join(sb.binDir(), BinCiliumOperator)
	if _, err := os.Stat(bin); err != nil {
		return Probe{}, fmt.Errorf("%s is not built: run scripts/sandbox-bins.sh (%w)", BinCiliumOperator, err)
	}

	data, err := configMapData(ctx, k, ns, cmName)
	if err != nil {
		return Probe{}, err
	}
	dir := sb.path("cilium", o.Name()+"-config")
	if err := writeConfigDir(dir, data); err != nil {
		return Probe{}, err
	}

	kubeconfig := sb.path("cilium", o.Name()+".kubeconfig")
	if err := sb.writeServiceAccountKubeconfig(kubeconfig, k.Server, ns, sa); err != nil {
		return Probe{}, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return Probe{}, err
	}
	api := "127.0.0.1:" + strconv.Itoa(ports[0])
	sb.progress("cilium: starting %s (%s, config from ConfigMap %s/%s) on %s", o.Name(), BinCiliumOperator, ns, cmName, api)
	argv := append([]string{bin,
		"--config-dir=" + dir,
		"--k8s-kubeconfig-path=" + kubeconfig,
		"--operator-api-serve-addr=" + api,
		"--operator-prometheus-serve-addr=127.0.0.1:" + strconv.Itoa(ports[1]),
		"--gops-port=" + strconv.Itoa(ports[2]),
	}, o.Args...)
	// The operator writes to /var/run/cilium whatever its flags say (its
	// health history, its shell socket): as root it gets a mount namespace
	// of its own where that is a directory of the sandbox's, as a pod's
	// would be its own; this machine's /run is left alone.
	if os.Geteuid() == 0 {
		if argv, err = privateCiliumRun(sb.path("cilium", o.Name()+"-run"), argv); err != nil {
			return Probe{}, err
		}
	}
	env := append(serverEnv(), "CILIUM_K8S_NAMESPACE="+ns, "K8S_NODE_NAME=cairn-sandbox")
	_, err = sb.spawn(o.Name(), argv, env)
	return Probe{Kind: ProbeHTTP, URL: "http://" + api + "/healthz"}, err
}

// ciliumPodDefaults fills in what a Cilium component left empty with the
// chart's names: namespace kube-system, ConfigMap cilium-config, and the
// ServiceAccount defaultSA.
func ciliumPodDefaults(ns, configMap, sa, defaultSA string) (string, string, string) {
	if ns == "" {
		ns = "kube-system"
	}
	if configMap == "" {
		configMap = "cilium-config"
	}
	if sa == "" {
		sa = defaultSA
	}
	return ns, configMap, sa
}

// writeServiceAccountKubeconfig writes a kubeconfig for server that
// authenticates as ServiceAccount ns/sa (a client certificate from the
// sandbox CA in the account's name and groups), so that the RBAC bound to
// the account decides what its holder may do.
func (sb *Sandbox) writeServiceAccountKubeconfig(path, server, ns, sa string) error {
	return writeClientKubeconfig(sb.path("kube", "pki"), path, server, "system:serviceaccount:"+ns+":"+sa,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns})
}

// privateCiliumRun wraps argv to run in a mount namespace of its own in
// which dir is mounted on /run/cilium. unshare and sh exec, so the recorded
// pid is the program's own; the mount goes with the namespace.
func privateCiliumRun(dir string, argv []string) ([]string, error) {
	unshare, err := lookTool("unshare", "util-linux")
	if err != nil {
		return nil, err
	}
	mount, err := lookTool("mount", "mount")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, "/run/cilium"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return append([]string{unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
		`"$1" --bind "$0" /run/cilium && shift && exec "$@"`, dir, mount}, argv...), nil
}

// configMapData reads ConfigMap ns/name: what the chart rendered for
// Cilium's pods, which read it as files.
func configMapData(ctx context.Context, k *KubeInfo, ns, name string) (map[string]string, error) {
	code, body, err := k.api().Get(ctx, "/api/v1/namespaces/"+ns+"/configmaps/"+name)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("ConfigMap %s/%s: %d %s (install the chart first)", ns, name, code, strings.TrimSpace(body))
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &cm); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", ns, name, err)
	}
	return cm.Data, nil
}

// writeConfigDir replaces dir with one file per key, as a ConfigMap volume
// shows them; a reader never sees a half-written directory.
func writeConfigDir(dir string, data map[string]string) error {
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	for key, val := range data {
		if key == "" || strings.ContainsAny(key, "/\x00") || key == "." || key == ".." {
			return fmt.Errorf("ConfigMap key %q cannot be a file name", key)
		}
		if err := os.WriteFile(filepath.Join(tmp, key), []byte(val), 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}
