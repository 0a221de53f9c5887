package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/sandbox/imagebuild"
)

// A sandbox node is an SSH host made ready for kubeadm the way a machine
// is after its packages are installed: a container runtime (containerd.go),
// the kubelet service (here), kubeadm, kubelet, kubectl and crictl of the
// sandbox's release on its PATH, the node images in an archive directory,
// and its own PID namespace (with tini as init, so that containerd's
// shims are reaped and everything in it dies with it), sysfs, /proc and
// cgroup root. What kubeadm would get from systemd, it gets from the
// kubelet service below and the hosts' systemctl.

// The kubelet service's files on each host (in /var/lib/cairn-host,
// private to the host): its wanted state ("start" or "stop"; absent means
// start, as the kubeadm packages enable the unit), a restart request, and
// the running kubelet's pid.
const (
	kubeletStateFile   = "/var/lib/cairn-host/kubelet.state"
	kubeletRestartFile = "/var/lib/cairn-host/kubelet.restart"
	kubeletPIDFile     = "/var/lib/cairn-host/kubelet.pid"
)

// kubeletService is kubeadm's systemd unit for the kubelet (the
// 10-kubeadm.conf drop-in) as a shell loop: while the service is wanted it
// runs kubelet with kubeadm's flags and files and starts it again after it
// exits (Restart=always), and it stops kubelet when the service is
// stopped. Before `kubeadm init` or `join` writes config.yaml it waits
// (where a fresh node's kubelet would exit at once and be restarted).
// $1.. are KUBELET_EXTRA_ARGS (what /etc/default/kubelet holds on a Debian
// node).
const kubeletService = `st=` + kubeletStateFile + ` rs=` + kubeletRestartFile + ` pf=` + kubeletPIDFile + `
trap 'kill $k 2>/dev/null; wait $k 2>/dev/null; rm -f "$pf"; exit 0' TERM INT
k=
while :; do
	# Without kubeadm's config.yaml kubelet would exit at once (a fresh
	# node's unit restarts it every 10s); waiting for the file instead
	# spares two cores seven useless starts every few seconds.
	if [ "$(cat "$st" 2>/dev/null)" != stop ] && [ -f /var/lib/kubelet/config.yaml ]; then
		rm -f "$rs"
		KUBELET_KUBEADM_ARGS=
		[ -f /var/lib/kubelet/kubeadm-flags.env ] && . /var/lib/kubelet/kubeadm-flags.env
		kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf \
			--config=/var/lib/kubelet/config.yaml $KUBELET_KUBEADM_ARGS "$@" &
		k=$!
		echo "$k" > "$pf"
		while kill -0 "$k" 2>/dev/null; do
			if [ -e "$rs" ] || [ "$(cat "$st" 2>/dev/null)" = stop ]; then
				kill "$k"
			fi
			sleep 1
		done
		wait "$k"
		echo "cairn kubelet service: kubelet exited with status $?"
		rm -f "$pf"
		k=
	fi
	# RestartSec: shorter than kubeadm's 10s; a start or restart request
	# ends the wait at once.
	i=0
	while [ $i -lt 5 ] && [ ! -e "$rs" ]; do sleep 1; i=$((i + 1)); done
done`

// systemctlShim is the hosts' /usr/local/bin/systemctl: it answers for the
// kubelet unit, which kubeadm starts, stops and restarts (and readers check
// with systemctl status), through the kubelet service's files, and refuses
// every other unit.
const systemctlShim = `#!/bin/sh
# cairn sandbox: this node has no systemd; the kubelet unit is cairn's
# kubelet service (its log: cairn sandbox logs kubelet-HOST).
st=` + kubeletStateFile + ` rs=` + kubeletRestartFile + ` pf=` + kubeletPIDFile + `
while [ $# -gt 0 ]; do
	case "$1" in
	-*) shift ;;
	*) break ;;
	esac
done
cmd=$1
[ $# -gt 0 ] && shift
unit=${1%.service}
running() { [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; }
case "$cmd" in
daemon-reload) exit 0 ;;
esac
if [ "$unit" != kubelet ]; then
	echo "systemctl (cairn sandbox): only the kubelet unit is managed on this node, not '$unit'" >&2
	exit 1
fi
case "$cmd" in
start | restart | try-restart | reload-or-restart)
	echo start > "$st"
	[ "$cmd" = start ] && running && exit 0
	touch "$rs"
	;;
stop)
	echo stop > "$st"
	i=0
	while running && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	! running
	;;
enable | disable | unmask | mask) exit 0 ;;
is-enabled) echo enabled ;;
is-active)
	if running; then echo active; else echo inactive; exit 3; fi
	;;
status)
	if running; then
		echo "* kubelet.service - kubelet: The Kubernetes Node Agent (cairn sandbox)"
		echo "     Active: active (running), main PID $(cat "$pf")"
	else
		echo "* kubelet.service - kubelet: The Kubernetes Node Agent (cairn sandbox)"
		echo "     Active: activating (auto-restart) or stopped"
		exit 3
	fi
	;;
*)
	echo "systemctl (cairn sandbox): $cmd is not supported" >&2
	exit 1
	;;
esac
`

// kubeletComponent names a host's kubelet service component (and process).
func kubeletComponent(host string) string { return "kubelet-" + host }

// kubeletHost is one host's kubelet service, in every namespace of the host
// (PID included), with the host's own cgroup root.
type kubeletHost struct {
	h          Host
	bin        string // the sh that runs kubeletService
	nsenter    string
	cgroupRoot string
}

func (k *kubeletHost) Name() string { return kubeletComponent(k.h.Name) }

func (k *kubeletHost) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	// On cgroup v1 (this machine's kind) kubelet v1.35+ starts only when
	// told to, with the cgroupfs driver: there is no systemd to own the
	// cgroups. Each kubelet gets its own cgroup root, so that the nodes'
	// kubepods trees do not meet in the one v1 hierarchy.
	extra := []string{"--cgroup-driver=cgroupfs", "--cgroup-root=" + k.cgroupRoot}
	// Every node counts this machine's one disk as its own. With a real
	// node's thresholds (evict below 15% free image space, collect images
	// above 85% use) a machine whose disk is 85% full puts every node
	// under disk pressure (no pod is scheduled) and has the kubelets
	// delete the images the runbooks imported, which an offline node
	// cannot pull again.
	extra = append(extra, "--eviction-hard=imagefs.available<1%,nodefs.available<1%,nodefs.inodesFree<1%,memory.available<100Mi",
		"--image-gc-high-threshold=100", "--image-gc-low-threshold=99")
	if !cgroupV2() {
		extra = append(extra, "--fail-cgroupv1=false")
	}
	argv, err := sb.onNode(k.h, k.nsenter, append([]string{k.bin, "-c", kubeletService, "kubelet-service"}, extra...)...)
	if err != nil {
		return Probe{}, err
	}
	sb.progress("nodes: starting the kubelet service on %s (cgroup root %s)", k.h.Name, k.cgroupRoot)
	_, err = sb.spawn(k.Name(), argv, nodeEnv(sb.marker()))
	return Probe{Kind: ProbeProcess, URL: k.Name()}, err
}

// onNode is argv run in all of host h's namespaces (network, UTS, mount and
// PID), as a node's own daemons run: containerd, the kubelet service.
func (sb *Sandbox) onNode(h Host, nsenter string, argv ...string) ([]string, error) {
	pid := sb.hostPID(h.Name)
	if pid == 0 {
		return nil, fmt.Errorf("host %s has no running sshd to enter", h.Name)
	}
	n := cpNode{name: h.Name, ip: h.Address, nsPID: pid, nsenter: nsenter}
	return n.wrap(argv, "--mount", "--pid="+pidNSPath(pid)), nil
}

// nodePATH is a node's PATH (and an image's): /usr/local first, where the
// sandbox's release is on a node.
const nodePATH = imagebuild.DefaultPATH

// nodeEnv is the environment of the hosts' own daemons: a node's PATH and
// the sandbox's marker, so that Down finds any of them left over.
func nodeEnv(marker string) []string { return []string{nodePATH, "HOME=/root", marker} }

// pidNSPath is the PID namespace a host's processes live in: the children's
// namespace of its first process (unshare --pid --fork makes it).
func pidNSPath(pid int) string { return fmt.Sprintf("/proc/%d/ns/pid_for_children", pid) }

// cgroupV2 is true on a unified (cgroup v2 only) machine.
func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// CgroupTree is the cgroup (in every hierarchy) under which the nodes of
// the sandbox in dir have their cgroup roots, one per host.
func CgroupTree(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "/cairn-sandbox-" + hex.EncodeToString(sum[:4])
}

// cgroupRootFor is the kubelet's cgroup root on host.
func cgroupRootFor(dir, host string) string { return CgroupTree(dir) + "/" + host }

// cgroupMounts lists the mounted cgroup hierarchies (v1 controllers, named
// ones and the unified one) by their mountpoints.
func cgroupMounts() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	sort.Strings(out)
	return out, nil
}

// makeCgroupRoot creates root in every hierarchy. A new cpuset cgroup has
// no CPUs or memory nodes until given its parent's.
func makeCgroupRoot(root string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	parts := strings.Split(strings.Trim(root, "/"), "/")
	for _, m := range mounts {
		dir := m
		for _, p := range parts {
			parent := dir
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) == "" {
						if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
							return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
						}
					}
				}
			}
		}
	}
	return nil
}

// removeCgroupTree removes a sandbox's cgroup tree (CgroupTree) from every
// hierarchy, deepest first. Only empty cgroups can be removed: it fails
// while a process of it still runs.
func removeCgroupTree(tree string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		base := filepath.Join(m, tree)
		var dirs []string
		_ = filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// startKubelets starts the kubelet service on every host (Options.Nodes).
func (sb *Sandbox) startKubelets(ctx context.Context, pre prereqs) error {
	inv := sb.Inventory()
	sh, err := lookTool("sh", "dash")
	if err != nil {
		return err
	}
	if err := raiseInotifyLimits(inotifyLimits, sb.progress); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	for _, h := range inv.Hosts {
		root := cgroupRootFor(sb.dir, h.Name)
		if err := makeCgroupRoot(root); err != nil {
			return fmt.Errorf("nodes: %s: %w", h.Name, err)
		}
		if err := sb.startComponent(ctx, &kubeletHost{h: h, bin: sh, nsenter: pre.nsenter, cgroupRoot: root}); err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
	}
	return nil
}

// inotifyLimit is a machine-wide inotify sysctl and the least the nodes
// need of it.
type inotifyLimit struct {
	path string // under /proc/sys
	min  int
}

// inotifyLimits: every kubelet's cAdvisor, its certificate and plugin
// watchers, containerd and the pods take inotify instances of root's one
// allowance (128 by default). Two clusters of up to seven nodes exhaust it:
// a kubelet then exits with "Failed to start cAdvisor: inotify_init: too
// many open files" and restarts until another lets one go (a worker took
// more than 3 minutes to register so). kind documents the same limits.
var inotifyLimits = []inotifyLimit{
	{"/proc/sys/fs/inotify/max_user_instances", 1024},
	{"/proc/sys/fs/inotify/max_user_watches", 524288},
}

// raiseInotifyLimits raises each limit to its minimum, never lowers one,
// and says what it changed: the setting is the machine's and outlives the
// sandbox.
func raiseInotifyLimits(limits []inotifyLimit, progress func(string, ...any)) error {
	for _, l := range limits {
		name := strings.ReplaceAll(strings.TrimPrefix(l.path, "/proc/sys/"), "/", ".")
		data, err := os.ReadFile(l.path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		cur, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if cur >= l.min {
			continue
		}
		if err := os.WriteFile(l.path, []byte(strconv.Itoa(l.min)+"\n"), 0o644); err != nil {
			return fmt.Errorf("raising %s from %d to %d, which the nodes' kubelets need (as root: sysctl -w %s=%d): %w",
				name, cur, l.min, name, l.min, err)
		}
		progress("nodes: raised %s from %d to %d for the nodes' kubelets (a machine-wide setting; it stays after down)", name, cur, l.min)
	}
	return nil
}
