package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
	"golang.org/x/term"
)

const sandboxUsage = `Usage:
  cairn sandbox COMMAND [flags]

Start or stop the local sandbox: a real Kubernetes control plane (etcd,
kube-apiserver, kube-controller-manager on 127.0.0.1) and real SSH hosts
(3 control-plane hosts and 1 worker, each sshd in its own network namespace),
for trying the bundled runbooks. The server binaries come from
scripts/sandbox-bins.sh.

Commands:
  up       start the sandbox (or keep the healthy one that runs)
  down     stop it and remove its state; leaves no process, namespace or link
  status   show what runs where; exits 1 unless every part answers
  env      print shell exports (KUBECONFIG, ...) for: eval "$(cairn sandbox env)"

Run 'cairn sandbox COMMAND --help' for a command's flags and examples.
`

func runSandbox(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(m.Stdout, sandboxUsage)
		if len(args) == 0 {
			return &usageError{cmd: "sandbox", msg: "no sandbox command given (up, down, status or env)"}
		}
		return nil
	}
	switch args[0] {
	case "up":
		return done(sandboxUp(ctx, m, args[1:]))
	case "down":
		return done(sandboxDown(ctx, m, args[1:]))
	case "status":
		return done(sandboxStatus(ctx, m, args[1:]))
	case "env":
		return done(sandboxEnv(ctx, m, args[1:]))
	}
	return &usageError{cmd: "sandbox", msg: fmt.Sprintf("unknown sandbox command %q (want up, down, status or env)", args[0])}
}

// stateDirFlag adds --state-dir to fs.
func stateDirFlag(fs *flag.FlagSet) *string {
	return fs.String("state-dir", sandbox.DefaultStateDir(), "directory for the sandbox's keys, kubeconfig, inventory, logs and state")
}

func sandboxUp(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "sandbox up", "sandbox up [flags]", `  # Start the cluster (on cp0, behind haproxy as lb.cairn.internal), hosts cp0-2, w0 and
  # etcd0-2, then point kubectl at it:
  cairn sandbox up && eval "$(cairn sandbox env)" && kubectl get ns

  # SSH hosts only, on 127.0.0.1 ports (no network namespaces):
  cairn sandbox up --no-kube --network=loopback

  # Five control-plane hosts and two workers, no external etcd hosts:
  cairn sandbox up --control-planes=5 --workers=2 --etcd-hosts=0

  # Bare kubeadm-ready nodes (containerd, the kubelet service, node images;
  # no cluster yet): walk content/kubeadm-ha.md on them to build one
  cairn sandbox up --nodes

  # A healthy sandbox of another shape runs (make run started one): replace it
  cairn sandbox up --nodes --replace`)
	dir := stateDirFlag(fs)
	binDir := fs.String("bin-dir", sandbox.BinDir(), "directory holding etcd, kube-apiserver, kube-controller-manager and kubeadm (env "+sandbox.EnvBinDir+")")
	noKube := fs.Bool("no-kube", false, "do not start the Kubernetes control plane")
	noSSH := fs.Bool("no-ssh", false, "do not start SSH hosts")
	network := fs.String("network", "auto", "SSH host networking: auto, netns (own namespace per host, needs root) or loopback (127.0.0.1 ports)")
	cps := fs.Int("control-planes", 3, "number of control-plane SSH hosts (cp0, cp1, ...)")
	workers := fs.Int("workers", 1, "number of worker SSH hosts (w0, w1, ...)")
	nodes := fs.Bool("nodes", false, "make every host a bare node ready for kubeadm (own PID namespace, containerd and runc, the kubelet service, node images; netns mode, root): no cluster runs until kubeadm init builds one on the hosts")
	etcdHosts := fs.Int("etcd-hosts", 3, "number of external etcd hosts (etcd0, ...), each a member of one TLS etcd cluster made with kubeadm's certificates (netns mode; 0: none)")
	timeout := fs.Duration("timeout", 90*time.Second, "start-up limit for each server")
	quiet := fs.Bool("quiet", false, "print no progress lines")
	replace := fs.Bool("replace", false, "stop a healthy sandbox of another shape in --state-dir and start this one (without it, up refuses, or asks on a terminal)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{cmd: "sandbox up", msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	var mode sandbox.Network
	switch *network {
	case "auto":
		mode = sandbox.NetworkAuto
	case "netns":
		mode = sandbox.NetworkNamespaces
	case "loopback":
		mode = sandbox.NetworkLoopback
	default:
		return &usageError{cmd: "sandbox up", msg: fmt.Sprintf("--network=%q: want auto, netns or loopback", *network)}
	}
	if *noKube && *noSSH {
		return &usageError{cmd: "sandbox up", msg: "--no-kube and --no-ssh together leave nothing to start"}
	}
	if *cps < 0 || *workers < 0 || *etcdHosts < 0 || *cps+*workers == 0 && !*noSSH {
		return &usageError{cmd: "sandbox up", msg: "want at least one SSH host (--control-planes, --workers), or --no-ssh"}
	}
	var hosts []sandbox.HostSpec
	for i := 0; i < *cps; i++ {
		hosts = append(hosts, sandbox.HostSpec{Name: fmt.Sprintf("cp%d", i), Groups: []string{sandbox.GroupControlPlane}})
	}
	for i := 0; i < *workers; i++ {
		hosts = append(hosts, sandbox.HostSpec{Name: fmt.Sprintf("w%d", i), Groups: []string{sandbox.GroupWorkers}})
	}
	start := time.Now()
	opts := sandbox.Options{
		StateDir: *dir, BinDir: *binDir, NoKube: *noKube, NoSSH: *noSSH,
		Hosts: hosts, Network: mode, Timeout: *timeout, EtcdHosts: *etcdHosts, Nodes: *nodes,
	}
	if !*quiet {
		opts.Progress = func(msg string) {
			fmt.Fprintf(m.Stderr, "[%5.1fs] %s\n", time.Since(start).Seconds(), msg)
		}
	}
	opts.Replace = *replace
	sb, err := sandbox.Up(ctx, opts)
	if errors.Is(err, sandbox.ErrRunning) && isTerminal(m.Stdin) {
		fmt.Fprintf(m.Stderr, "%v\nReplace it? [y/N] ", err)
		ans, _ := bufio.NewReader(m.Stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(ans)); a == "y" || a == "yes" {
			opts.Replace = true
			sb, err = sandbox.Up(ctx, opts)
		} else {
			return errors.New("sandbox up: not replaced; the running sandbox is left as it was")
		}
	}
	if err != nil {
		return err
	}
	printStatus(m.Stdout, sb.Status(ctx))
	fmt.Fprintf(m.Stdout, "\nUse it:   eval \"$(cairn sandbox env%s)\"\nStop it:  cairn sandbox down%s\n", dirArg(*dir), dirArg(*dir))
	return nil
}

func sandboxDown(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "sandbox down", "sandbox down [flags]", `  # Stop the sandbox and delete its state (safe to run twice):
  cairn sandbox down`)
	dir := stateDirFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sb, err := sandbox.Open(*dir)
	if errors.Is(err, sandbox.ErrNotRunning) {
		fmt.Fprintf(m.Stdout, "no sandbox in %s\n", *dir)
		return nil
	}
	if err != nil {
		return err
	}
	// Teardown goes on after ^C: stopping half-way would leave processes
	// and devices behind. Each step is bounded.
	if err := sb.Down(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("sandbox down: %w (run it again, or see the logs in %s/logs)", err, *dir)
	}
	fmt.Fprintf(m.Stdout, "sandbox in %s stopped and removed\n", *dir)
	return nil
}

func sandboxStatus(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "sandbox status", "sandbox status [flags]", `  # Is the sandbox up? (exit status 0 if every part answers)
  cairn sandbox status`)
	dir := stateDirFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	st, err := sandbox.StatusOf(ctx, *dir)
	if errors.Is(err, sandbox.ErrNotRunning) {
		fmt.Fprintf(m.Stdout, "no sandbox in %s; start one with: cairn sandbox up\n", *dir)
		return errSilent
	}
	if err != nil {
		return err
	}
	printStatus(m.Stdout, st)
	if !st.Healthy() {
		return errSilent
	}
	return nil
}

func sandboxEnv(ctx context.Context, m *Main, args []string) error {
	fs := newFlagSet(m, "sandbox env", "sandbox env [flags]", `  # Point kubectl and the bundled runbooks at the sandbox:
  eval "$(cairn sandbox env)"
  kubectl get namespaces
  ssh -F "$CAIRN_SANDBOX_SSH_CONFIG" cp0 hostname`)
	dir := stateDirFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sb, err := sandbox.Open(*dir)
	if err != nil {
		return fmt.Errorf("%w; start one with: cairn sandbox up", err)
	}
	for _, kv := range sb.Env() {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(m.Stdout, "export %s=%s\n", k, shellQuote(v))
	}
	return nil
}

func printStatus(w io.Writer, st sandbox.Status) {
	state := "healthy"
	if !st.Healthy() {
		state = "NOT healthy: " + st.Summary()
	}
	fmt.Fprintf(w, "sandbox %s: %s\n", st.Dir, state)
	if k := st.Kube; k != nil {
		ready := "ready"
		if !st.KubeReady {
			ready = "not ready"
		}
		fmt.Fprintf(w, "  kube-apiserver %s  %s (%s)\n", sandbox.KubeVersion, k.Server, ready)
		fmt.Fprintf(w, "  kubeconfig     %s  (context %s)\n", k.Kubeconfig, k.Context)
	}
	// Each component with its processes and what its probe said.
	alive := map[int]sandbox.ProcStatus{}
	for _, p := range st.Procs {
		alive[p.PID] = p
	}
	for _, c := range st.Components {
		health := "healthy"
		if !c.Healthy {
			health = "FAILING: " + c.Err
		}
		var pids []string
		for _, pid := range c.PIDs {
			p := alive[pid]
			if p.Alive {
				pids = append(pids, fmt.Sprint(pid))
			} else {
				pids = append(pids, fmt.Sprintf("%d DEAD (see %s)", pid, p.Log))
			}
		}
		fmt.Fprintf(w, "  %-24s pid %-7s %-8s %s\n", c.Name, strings.Join(pids, ","), health, c.Probe)
	}
	if lb := st.LB; lb != nil {
		where := "resolves here and on the hosts"
		if lb.HostsFile == "" {
			where = "resolves on the hosts only (not root here)"
		}
		fmt.Fprintf(w, "  load balancer  %s  (haproxy, %s; in front of %s)\n", lb.Endpoint(), where, strings.Join(lb.Backends, ", "))
	}
	if inv := st.Inventory; inv != nil {
		fmt.Fprintf(w, "  ssh hosts (%s mode, user %s):\n", inv.Mode, inv.User)
		for i, h := range inv.Hosts {
			up := "up"
			if i < len(st.Hosts) && !st.Hosts[i].Up {
				up = "DOWN"
			}
			fmt.Fprintf(w, "    %-5s %-18s %-14s %s\n", h.Name, h.Addr(), strings.Join(h.Groups, ","), up)
		}
		if inv.Mode == sandbox.NetworkNamespaces {
			fmt.Fprintf(w, "  host tools     %s in each host's /usr/local/bin\n", strings.Join(sandbox.HostTools(), ", "))
			if st.Nodes {
				fmt.Fprintf(w, "  nodes          every host is a bare node for kubeadm (containerd, the kubelet service, systemctl for it); kubeadm runs for real\n")
				fmt.Fprintf(w, "  node images    %s (import on each node: ctr -n k8s.io images import FILE)\n", inv.ImagesDir)
				if v := filepath.Join(st.Dir, sandbox.CiliumValuesFile); isFile(v) {
					fmt.Fprintf(w, "  cilium values  %s (after kubeadm, with %s imported: helm install cilium %s -n kube-system -f %s)\n",
						v, filepath.Join(inv.ImagesDir, sandbox.CiliumImagesDir, "*.tar"), st.Facts()[sandbox.FactCiliumChart], v)
				}
			} else {
				fmt.Fprintf(w, "  kubeadm        %s\n", sandbox.KubeadmDryRun)
			}
		}
		fmt.Fprintf(w, "  inventory      %s/inventory.json\n", st.Dir)
		fmt.Fprintf(w, "  ssh config     %s  (ssh -F %s %s)\n", inv.SSHConfig, inv.SSHConfig, inv.Hosts[0].Name)
	}
}

// dirArg repeats --state-dir in printed hints when it is not the default.
func dirArg(dir string) string {
	if dir == sandbox.DefaultStateDir() {
		return ""
	}
	return " --state-dir=" + shellQuote(dir)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// isTerminal reports whether r (or w) is a terminal: a prompt can be
// answered, output can be styled.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
