package sandbox

import (
	"strconv"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"sigs.k8s.io/yaml"
)

// CiliumValuesFile is the file in the state directory (nodes mode) holding
// the Helm values Cilium's chart needs on the sandbox's nodes.
const CiliumValuesFile = "cilium-values.yaml"

// CiliumValues are the chart values these nodes need beyond Cilium
// v1.20's defaults, each for a reason of this machine or of the sandbox:
//   - the images are built here (CiliumImages), so the chart's digests
//     cannot match them: tags only;
//   - no Envoy (cilium-envoy is not built here), so no L7 proxy, and no
//     health endpoint (nor cilium-health-responder);
//   - the machine is cgroup v1 with the cgroup2 hierarchy already mounted at
//     /sys/fs/cgroup/unified: no auto-mount init container;
//   - a node's sysctls are its own network namespace's, set by its init:
//     no sysctl init container (it would enter the host's PID 1);
//   - no process here holds CAP_SYS_RESOURCE (the machine's bounding set
//     lacks it), so no container may ask for it: the chart's capability
//     lists without it;
//   - the agents reach the API server through the sandbox's load balancer,
//     by the name kubeadm's certificates carry (the nodes' /etc/hosts,
//     which hostNetwork pods share, resolves it), not the Service address
//     kube-proxy serves only once it runs;
//   - one operator replica (the chart's two would want two nodes' ports).
func CiliumValues(lb *LBInfo) map[string]any {
	return map[string]any{
		"image":                  map[string]any{"useDigest": false},
		"operator":               map[string]any{"image": map[string]any{"useDigest": false}, "replicas": 1},
		"envoy":                  map[string]any{"enabled": false},
		"l7Proxy":                false,
		"healthChecking":         false,
		"endpointHealthChecking": map[string]any{"enabled": false},
		"cgroup":                 map[string]any{"autoMount": map[string]any{"enabled": false}, "hostRoot": "/sys/fs/cgroup/unified"},
		"sysctlfix":              map[string]any{"enabled": false},
		"securityContext": map[string]any{"capabilities": map[string]any{
			"ciliumAgent":      []string{"CHOWN", "KILL", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_MODULE", "SYS_ADMIN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID", "SYSLOG"},
			"cleanCiliumState": []string{"NET_ADMIN", "SYS_MODULE", "SYS_ADMIN"},
		}},
		"k8sServiceHost": lb.Name,
		"k8sServicePort": strconv.Itoa(lb.Port),
	}
}

// writeCiliumValues writes CiliumValues to the state directory, whole or
// not at all.
func (sb *Sandbox) writeCiliumValues(lb *LBInfo) error {
	data, err := yaml.Marshal(CiliumValues(lb))
	if err != nil {
		return err
	}
	data = append([]byte("# Written by cairn sandbox (nodes mode): Cilium's chart on these nodes.\n"+
		"# Import the node images' cilium/*.tar on every node, then:\n"+
		"#   helm install cilium CHART -n kube-system -f THIS_FILE\n"+
		"# Why each value: sandbox/ciliumvalues.go.\n"), data...)
	return atomicfile.Write(sb.path(CiliumValuesFile), data, 0o644)
}
