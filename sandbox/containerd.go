package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// containerdConfig is each node's /etc/containerd/config.toml. This
// machine grants no process CAP_SYS_RESOURCE, so nothing may lower
// oom_score_adj: without restrict_oom_score_adj every pod sandbox fails
// ("can't get final child's PID from pipe: EOF"). The paths are the
// containerd defaults, private to the host by its mount namespace; the CNI
// plugins are found in /opt/cni/bin, where Debian's (containernetworking-
// plugins) are linked and a CNI provider adds its own; the sandbox (pause)
// image the one kubeadm names, and runc uses cgroupfs, as the kubelet does
// here (no systemd).
var containerdConfig = `# Written by cairn sandbox (nodes mode).
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "` + imageRegistry + `/pause:` + ImagePauseTag + `"
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "` + cniBinDir + `"
  conf_dir = "/etc/cni/net.d"
`

// runtimeComponent names a host's containerd component (and process).
func runtimeComponent(host string) string { return "containerd-" + host }

// containerdHost is one host's container runtime: Debian's containerd in the
// host's network, UTS, mount and PID namespaces (entered through its sshd), with
// the host's private /var/lib/containerd, /run/containerd and
// /etc/containerd. Its socket is probed from this machine through the bind
// source of the host's /run/containerd.
type containerdHost struct {
	h       Host
	bin     string
	nsenter string
}

func (c *containerdHost) Name() string { return runtimeComponent(c.h.Name) }

func (c *containerdHost) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	argv, err := sb.onNode(c.h, c.nsenter, c.bin, "--config", "/etc/containerd/config.toml")
	if err != nil {
		return Probe{}, err
	}
	if err := os.WriteFile(filepath.Join(c.h.Root, "etc", "containerd", "config.toml"), []byte(containerdConfig), 0o644); err != nil {
		return Probe{}, err
	}
	sock := filepath.Join(c.h.Root, "run", "containerd", "containerd.sock")
	_ = os.Remove(sock) // a stale socket of an earlier run
	sb.progress("nodes: starting containerd on %s", c.h.Name)
	_, err = sb.spawn(c.Name(), argv, nodeEnv(sb.marker()))
	return Probe{Kind: ProbeUnix, URL: sock}, err
}

// startRuntimes starts a containerd on every host (Options.Nodes).
func (sb *Sandbox) startRuntimes(ctx context.Context, pre prereqs) error {
	inv := sb.Inventory()
	if inv == nil || inv.Mode != NetworkNamespaces {
		return fmt.Errorf("nodes: hosts with a container runtime need network namespaces (run as root; not --network=loopback)")
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return &MissingError{Name: "containerd", Where: "PATH", Install: "apt-get install -y containerd runc (scripts/ci-deps.sh)"}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return &MissingError{Name: "runc", Where: "PATH", Install: "apt-get install -y runc (scripts/ci-deps.sh)"}
	}
	for _, h := range inv.Hosts {
		if err := sb.startComponent(ctx, &containerdHost{h: h, bin: bin, nsenter: pre.nsenter}); err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
	}
	return nil
}
