package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Names of the Cilium agent's programs and datapath sources in the bin
// directory (scripts/sandbox-bins.sh builds and copies them), and the
// compiler the agent runs: cilium v1.20 compiles its datapath on the node
// with clang, LLVM 19 as in its own image.
const (
	BinCiliumAgent = "cilium-agent"
	BinCiliumDbg   = "cilium-dbg"
	BinCiliumCNI   = "cilium-cni"
	ciliumClang    = "clang-19"
)

// CiliumBPF is the directory of the agent's datapath sources (the module's
// bpf/), which the agent compiles when it starts.
func CiliumBPF(binDir string) string { return filepath.Join(binDir, "charts", "cilium-bpf") }

// ciliumHostDir is where the agent's program, configuration and datapath
// sources go on its host (the host's private /var/lib/cairn-host). Its
// runtime state stays where the agent keeps it on a node, /var/run/cilium:
// also private to each host (PrivateDirs), since the agent writes there
// whatever its flags say (its delete queue, its shell socket).
const ciliumHostDir = "/var/lib/cairn-host/cilium"

// CiliumAgent is a real cilium-agent on an SSH host, in that host's network,
// UTS and mount namespaces (netns mode): the node's agent as the chart's
// DaemonSet runs it, minus the pod. Its configuration is the cilium-config
// ConfigMap as files in --config-dir, as the chart's volume mounts them,
// and its identity the chart's ServiceAccount (a client certificate from the
// sandbox CA in that account's name, so the chart's RBAC decides what it may
// do). It compiles and loads its datapath (bpf_host, VXLAN) in the host's
// network namespace; its BPF file system is mounted in the host's mount
// namespace, where it outlives the agent as on a node: a restarted agent
// finds its pinned maps. What the ConfigMap sets for pods alone is left
// out: no CNI configuration is written (the host runs no pods), no health
// endpoint, no Hubble, no Envoy.
//
// It reads the ConfigMap when it starts, like a pod: to apply a changed
// ConfigMap, Remove it and Add it again (what deleting the pod does).
type CiliumAgent struct {
	// Host is the SSH host the agent runs on; its name is the node name.
	Host string
	// Namespace holds cilium-config and the ServiceAccount (default
	// kube-system); ConfigMap and ServiceAccount default to the chart's
	// names.
	Namespace, ConfigMap, ServiceAccount string
	// Args are extra flags.
	Args []string
}

// Name implements Component.
func (a *CiliumAgent) Name() string { return "cilium-agent-" + a.Host }

// Socket is where this machine reaches the agent's API (the host's
// /var/run/cilium/cilium.sock).
func (a *CiliumAgent) Socket(sb *Sandbox) (string, error) {
	inv := sb.Inventory()
	if inv == nil {
		return "", fmt.Errorf("no SSH hosts")
	}
	h, ok := inv.Host(a.Host)
	if !ok || h.Root == "" {
		return "", fmt.Errorf("host %s: not a host in its own namespaces (cilium-agent needs netns mode)", a.Host)
	}
	return filepath.Join(h.Root, "run", "cilium", "cilium.sock"), nil
}

// Start implements Component.
func (a *CiliumAgent) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	k := sb.Kube()
	if k == nil {
		return Probe{}, fmt.Errorf("no cluster to run against")
	}
	ns, cmName, sa := ciliumPodDefaults(a.Namespace, a.ConfigMap, a.ServiceAccount, "cilium")
	pid := sb.hostPID(a.Host)
	sock, err := a.Socket(sb)
	if err != nil {
		return Probe{}, err
	}
	if pid == 0 {
		return Probe{}, fmt.Errorf("host %s is not running", a.Host)
	}
	nsenter, err := lookTool("nsenter", "util-linux")
	if err != nil {
		return Probe{}, err
	}
	clang, err := lookTool(ciliumClang, ciliumClang)
	if err != nil {
		return Probe{}, err
	}
	for _, p := range []string{BinCiliumAgent, filepath.Join("charts", "cilium-bpf")} {
		if _, err := os.Stat(filepath.Join(sb.binDir(), p)); err != nil {
			return Probe{}, fmt.Errorf("%s is not built: run scripts/sandbox-bins.sh (%w)", p, err)
		}
	}

	data, err := configMapData(ctx, k, ns, cmName)
	if err != nil {
		return Probe{}, err
	}
	// The agent's files on the host, seen from here through the host's
	// root; inside the host they are at ciliumHostDir.
	inv := sb.Inventory()
	h, _ := inv.Host(a.Host)
	hostDir := filepath.Join(h.Root, ciliumHostDir)
	if err := writeConfigDir(filepath.Join(hostDir, "config"), data); err != nil {
		return Probe{}, err
	}
	// The agent's program, its datapath sources and a clang by that name:
	// the host's own copies, since the host's mount namespace hides this
	// machine's home (where the bin directory is).
	if err := linkOrCopy(filepath.Join(sb.binDir(), BinCiliumAgent), filepath.Join(hostDir, "bin", "cilium-agent"), 0o755); err != nil {
		return Probe{}, err
	}
	// cilium-dbg beside it, for whoever logs in to the host.
	if _, err := os.Stat(filepath.Join(sb.binDir(), BinCiliumDbg)); err == nil {
		if err := linkOrCopy(filepath.Join(sb.binDir(), BinCiliumDbg), filepath.Join(hostDir, "bin", "cilium-dbg"), 0o755); err != nil {
			return Probe{}, err
		}
	}
	if err := copyTree(CiliumBPF(sb.binDir()), filepath.Join(hostDir, "lib", "bpf")); err != nil {
		return Probe{}, err
	}
	if err := os.Remove(filepath.Join(hostDir, "bin", "clang")); err != nil && !os.IsNotExist(err) {
		return Probe{}, err
	}
	if err := os.Symlink(clang, filepath.Join(hostDir, "bin", "clang")); err != nil {
		return Probe{}, err
	}
	if err := sb.writeServiceAccountKubeconfig(filepath.Join(hostDir, "kubeconfig"), k.Server, ns, sa); err != nil {
		return Probe{}, err
	}
	_ = os.Remove(sock)

	in := func(p string) string { return filepath.Join(ciliumHostDir, p) }
	sb.progress("cilium: starting %s on %s (config from ConfigMap %s/%s; the datapath compiles with %s)", a.Name(), a.Host, ns, cmName, ciliumClang)
	argv := append([]string{nsenter, "--target", strconv.Itoa(pid), "--net", "--uts", "--mount", "--",
		in("bin/cilium-agent"),
		"--config-dir=" + in("config"),
		"--k8s-kubeconfig-path=" + in("kubeconfig"),
		"--lib-dir=" + in("lib"),
		"--bpf-root=/sys/fs/bpf",
		// The pod mounts this machine's /proc at /host/proc; the host's
		// own is /proc (its sysctls are its network namespace's).
		"--procfs=/proc",
		// What serves pods, which the host does not run.
		"--write-cni-conf-when-ready=",
		"--cni-exclusive=false",
		"--enable-health-checking=false",
		"--enable-endpoint-health-checking=false",
		"--enable-hubble=false",
		"--enable-l7-proxy=false",
		"--external-envoy-proxy=false",
		"--enable-envoy-config=false",
	}, a.Args...)
	env := append(serverEnv(), "PATH="+in("bin")+":/usr/sbin:/usr/bin:/sbin:/bin",
		"K8S_NODE_NAME="+a.Host, "CILIUM_K8S_NAMESPACE="+ns)
	_, err = sb.spawn(a.Name(), argv, env)
	return Probe{Kind: ProbeUnix, URL: sock}, err
}

// Ready implements readier: the agent's own health (GET /v1/healthz on its
// API socket) says Ok, which it does once its datapath is loaded and its
// CiliumNode is in the cluster.
func (a *CiliumAgent) Ready(ctx context.Context, sb *Sandbox) error {
	sock, err := a.Socket(sb)
	if err != nil {
		return err
	}
	var last string
	for {
		st, err := CiliumAgentStatus(ctx, sock)
		if err == nil && st == "Ok" {
			return nil
		}
		last = st
		if err != nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not healthy (last: %s); see logs/%s.log", a.Name(), last, a.Name())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// CiliumAgentStatus asks the agent at the API socket sock for its state
// (Ok, Warning, Failure), as `cilium-dbg status` does.
func CiliumAgentStatus(ctx context.Context, sock string) (string, error) {
	dial, done, err := unixAddr(sock)
	if err != nil {
		return "", err
	}
	defer done()
	c := &http.Client{Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", dial)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://cilium/v1/healthz", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var st struct {
		Cilium struct {
			State string `json:"state"`
			Msg   string `json:"msg"`
		} `json:"cilium"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return "", fmt.Errorf("/v1/healthz: %d %.200s", resp.StatusCode, body)
	}
	if st.Cilium.State != "Ok" && st.Cilium.Msg != "" {
		return st.Cilium.State + ": " + st.Cilium.Msg, nil
	}
	return st.Cilium.State, nil
}

// linkOrCopy puts src at dst: a hard link where both are on one file
// system, else a copy (written to a temporary name, then renamed).
func linkOrCopy(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst)
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst, mode)
}

// copyFile copies src to dst, written to a temporary name, then renamed.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
