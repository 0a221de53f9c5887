package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/sandbox/imagebuild"
)

// Errors.
var (
	// ErrMissing is wrapped by MissingError: a prerequisite (a binary or a
	// Debian package) is not installed.
	ErrMissing = imagebuild.ErrMissing
	// ErrNotRunning means the state directory holds no sandbox.
	ErrNotRunning = errors.New("sandbox is not running")
)

// Network modes for the SSH hosts.
type Network string

const (
	// NetworkAuto uses namespaces where they are allowed, else loopback.
	NetworkAuto Network = ""
	// NetworkNamespaces puts each host in its own network namespace on a
	// bridge (10.200.N.0/24), sshd on port 22. Needs root.
	NetworkNamespaces Network = "netns"
	// NetworkLoopback runs each sshd on 127.0.0.1 on a port of its own.
	NetworkLoopback Network = "loopback"
)

// HostSpec names one SSH host and its groups.
type HostSpec struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups"`
}

// Group names used by DefaultHosts.
const (
	GroupControlPlane = "control-plane"
	GroupWorkers      = "workers"
)

// DefaultHosts returns three control-plane hosts (cp0..cp2) and one worker (w0).
func DefaultHosts() []HostSpec {
	return []HostSpec{
		{Name: "cp0", Groups: []string{GroupControlPlane}},
		{Name: "cp1", Groups: []string{GroupControlPlane}},
		{Name: "cp2", Groups: []string{GroupControlPlane}},
		{Name: "w0", Groups: []string{GroupWorkers}},
	}
}

// Options configure Up. The zero value starts everything in DefaultStateDir.
type Options struct {
	// StateDir holds everything the sandbox owns. Default: DefaultStateDir().
	StateDir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Default: BinDir().
	BinDir string
	// NoKube and NoSSH leave out the cluster or the SSH hosts.
	NoKube, NoSSH bool
	// Nodes makes every SSH host (netns mode) a machine ready for kubeadm
	// (kubelet.go): its own PID namespace, container runtime (Debian's
	// containerd and runc) and kubelet service, the real kubeadm, and the
	// node images in Inventory.ImagesDir. The sandbox then runs no control
	// plane of its own: kubeadm init builds the cluster on the hosts, and
	// the load balancer forwards to the control-plane hosts' port 6443.
	Nodes bool
	// EtcdHosts adds that many SSH hosts (etcd0, etcd1, ...; group etcd),
	// each running a member of one TLS etcd cluster with kubeadm's
	// certificates: the kubeadm runbook's external etcd. Needs the cluster's
	// binaries and netns mode; otherwise they are left out, with a progress
	// line saying why.
	EtcdHosts int
	// Hosts are the SSH hosts. Default: DefaultHosts().
	Hosts []HostSpec
	// Network chooses how SSH hosts are networked. Default: NetworkAuto.
	Network Network
	// DieWithParent makes every server die with the calling process
	// (Pdeathsig), for test binaries. `cairn sandbox up` leaves it false so
	// that the servers outlive the command.
	DieWithParent bool
	// Progress, if set, receives one line per step while starting.
	Progress func(msg string)
	// Timeout bounds start-up of each server. Default 90s.
	Timeout time.Duration
	// Replace lets Up stop a healthy sandbox of another shape in StateDir
	// (with a cluster or not, SSH hosts or not, nodes or not) and start this
	// one. Without it Up refuses with ErrRunning: a server and its page use
	// that sandbox, and replacing it would point their Run buttons at
	// another cluster.
	Replace bool
}

// dirFlag is " --state-dir DIR" unless dir is the default.
func dirFlag(dir string) string {
	if dir == DefaultStateDir() {
		return ""
	}
	return " --state-dir " + dir
}

// ErrRunning is Up's refusal to replace a healthy sandbox without
// Options.Replace.
var ErrRunning = errors.New("a healthy sandbox of another shape runs in the state directory")

// shape names what a sandbox has, for messages.
func shape(kube, ssh, nodes bool) string {
	var parts []string
	if kube && !nodes {
		parts = append(parts, "a cluster")
	}
	if ssh {
		parts = append(parts, "SSH hosts")
	}
	if nodes {
		parts = append(parts, "kubeadm-ready nodes")
	}
	return strings.Join(parts, " and ")
}

// EnvStateDir names the sandbox a shell uses: `cairn sandbox env` exports it,
// and every command that looks for "the" sandbox honours it.
const EnvStateDir = "CAIRN_SANDBOX_DIR"

// DefaultStateDir is $CAIRN_SANDBOX_DIR when set, else
// ${XDG_STATE_HOME:-$HOME/.local/state}/cairn/sandbox.
func DefaultStateDir() string {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d
	}
	st := os.Getenv("XDG_STATE_HOME")
	if st == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		st = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(st, "cairn", "sandbox")
}

// state is what state.json records: enough for Down and Status to work from
// another process.
type state struct {
	Version   int         `json:"version"`
	Started   time.Time   `json:"started"`
	Complete  bool        `json:"complete"` // Up finished
	WantKube  bool        `json:"wantKube"`
	WantSSH   bool        `json:"wantSSH"`
	WantNodes bool        `json:"wantNodes,omitempty"` // hosts with a container runtime (Options.Nodes)
	Procs     []procState `json:"procs"`
	Net       *netState   `json:"net,omitempty"`
	Kube      *KubeInfo   `json:"kube,omitempty"`
	Inventory *Inventory  `json:"inventory,omitempty"`
	LB        *LBInfo     `json:"lb,omitempty"`
	// Components are the servers started, in start order (their processes
	// are in Procs under the same names).
	Components []componentState `json:"components,omitempty"`
	BinDir     string           `json:"binDir,omitempty"`
}

const stateVersion = 2

// KubeInfo tells where the cluster answers.
type KubeInfo struct {
	Server     string `json:"server"`     // https://127.0.0.1:PORT
	Kubeconfig string `json:"kubeconfig"` // path of the admin kubeconfig
	Context    string `json:"context"`    // ContextName
	Token      string `json:"-"`          // admin bearer token (in the kubeconfig)
	CAFile     string `json:"caFile"`     // CA of the serving certificate
	EtcdURL    string `json:"etcdURL"`
}

// ContextName is the kubeconfig context (and cluster and user) of the sandbox.
const ContextName = "cairn-sandbox"

// Sandbox is a running sandbox. Its methods are safe for concurrent use.
type Sandbox struct {
	dir     string
	opts    Options
	spawner *spawner

	mu       sync.Mutex
	state    state
	children map[int]*child
}

// Dir returns the state directory.
func (sb *Sandbox) Dir() string { return sb.dir }

// Kube returns where the cluster answers, or nil without one.
func (sb *Sandbox) Kube() *KubeInfo {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.state.Kube
}

// LoadBalancer returns where the load balancer in front of kube-apiserver
// answers, or nil without a cluster.
func (sb *Sandbox) LoadBalancer() *LBInfo {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.state.LB
}

// Inventory returns the SSH hosts, or nil without them.
func (sb *Sandbox) Inventory() *Inventory {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.state.Inventory
}

// binDir is where the server binaries are: the one Up was given, else
// BinDir().
func (sb *Sandbox) binDir() string {
	if sb.opts.BinDir != "" {
		return sb.opts.BinDir
	}
	if sb.state.BinDir != "" {
		return sb.state.BinDir
	}
	return BinDir()
}

func (sb *Sandbox) path(elem ...string) string {
	return filepath.Join(append([]string{sb.dir}, elem...)...)
}

func (sb *Sandbox) progress(format string, args ...any) {
	if sb.opts.Progress != nil {
		sb.opts.Progress(fmt.Sprintf(format, args...))
	}
}

func (sb *Sandbox) saveState() error {
	sb.mu.Lock()
	b, err := json.MarshalIndent(sb.state, "", "  ")
	sb.mu.Unlock()
	if err != nil {
		return err
	}
	return atomicfile.Write(sb.path("state.json"), append(b, '\n'), 0o600)
}

// Up starts the sandbox described by opts and waits until every server
// answers. If the state directory already holds a healthy sandbox with the
// same components, Up returns it without starting anything; a broken or
// half-started one is stopped and cleaned up first. If Up fails, it stops
// whatever it had started.
func Up(ctx context.Context, opts Options) (*Sandbox, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	if opts.BinDir == "" {
		opts.BinDir = BinDir()
	}
	if opts.Hosts == nil {
		opts.Hosts = DefaultHosts()
	}
	if opts.EtcdHosts > 0 && !opts.NoKube && !opts.NoSSH {
		opts.Hosts = append([]HostSpec(nil), opts.Hosts...)
		for i := 0; i < opts.EtcdHosts; i++ {
			opts.Hosts = append(opts.Hosts, HostSpec{Name: EtcdHostName(i), Groups: []string{GroupEtcd}})
		}
	}
	if opts.Timeout == 0 {
		opts.Timeout = 90 * time.Second
	}
	if opts.NoKube && opts.NoSSH {
		return nil, errors.New("sandbox: nothing to start (both NoKube and NoSSH)")
	}
	if opts.Nodes && opts.NoSSH {
		return nil, errors.New("sandbox: nodes are the SSH hosts made ready for kubeadm; --nodes cannot go with --no-ssh")
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: state dir: %w", err)
	}
	opts.StateDir = dir

	// Prerequisites first, so that a missing one is named before anything
	// starts.
	var pre prereqs
	if pre, err = checkPrereqs(ctx, &opts); err != nil {
		return nil, err
	}

	// One Up or Down at a time per state directory.
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	if old, err := Open(dir); err == nil {
		st := old.Status(ctx)
		if st.Healthy() && old.state.WantKube == !opts.NoKube && old.state.WantSSH == !opts.NoSSH && old.state.WantNodes == opts.Nodes {
			old.opts.Progress = opts.Progress
			old.progress("sandbox already running in %s", dir)
			return old, nil
		}
		if st.Healthy() && !opts.Replace {
			return nil, fmt.Errorf("sandbox: %w: %s (started %s) has %s, and this start wants %s. Servers and pages using it would lose it: stop it first (cairn sandbox down%s), pass --replace, or give this one its own --state-dir",
				ErrRunning, dir, old.state.Started.Local().Format("2006-01-02 15:04:05"),
				shape(old.state.WantKube, old.state.WantSSH, old.state.WantNodes), shape(!opts.NoKube, !opts.NoSSH, opts.Nodes), dirFlag(dir))
		}
		old.opts.Progress = opts.Progress
		old.progress("cleaning up a previous sandbox in %s (%s)", dir, st.Summary())
		if err := old.down(ctx); err != nil {
			return nil, fmt.Errorf("sandbox: clean up previous sandbox in %s: %w", dir, err)
		}
	} else if !errors.Is(err, ErrNotRunning) {
		return nil, err
	}

	sb := &Sandbox{dir: dir, opts: opts, children: map[int]*child{}}
	for _, d := range []string{"logs", "kube", "ssh", "hosts"} {
		if err := os.MkdirAll(sb.path(d), 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: create state dir: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: state dir: %w", err)
	}
	if opts.DieWithParent {
		sb.spawner = newSpawner()
	}
	sb.state = state{Version: stateVersion, Started: time.Now().UTC(), WantKube: !opts.NoKube, WantSSH: !opts.NoSSH, WantNodes: opts.Nodes, BinDir: opts.BinDir}
	if err := sb.saveState(); err != nil {
		sb.stopSpawner()
		return nil, fmt.Errorf("sandbox: %w", err)
	}

	start := time.Now()
	err = sb.up(ctx, pre)
	if err != nil {
		sb.progress("start failed; cleaning up")
		// Clean up even if ctx was cancelled, bounded by stopProc's own
		// timeouts.
		if derr := sb.down(context.WithoutCancel(ctx)); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", derr))
		}
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	sb.mu.Lock()
	sb.state.Complete = true
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return nil, errors.Join(fmt.Errorf("sandbox: %w", err), sb.down(context.WithoutCancel(ctx)))
	}
	sb.progress("sandbox ready in %.1fs (state in %s)", time.Since(start).Seconds(), dir)
	return sb, nil
}

// Open attaches to the sandbox recorded in dir (possibly started by another
// process). It returns ErrNotRunning if dir holds none.
func Open(dir string) (*Sandbox, error) {
	if dir == "" {
		dir = DefaultStateDir()
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (no state in %s)", ErrNotRunning, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read state: %w", err)
	}
	sb := &Sandbox{dir: dir, children: map[int]*child{}}
	if err := json.Unmarshal(b, &sb.state); err != nil {
		return nil, fmt.Errorf("sandbox: %s/state.json is corrupt (%v); remove the directory after stopping its processes by hand", dir, err)
	}
	// Version 1 (no components) is still stopped right; Status calls it
	// unhealthy, so that Up replaces it.
	if sb.state.Version != stateVersion && sb.state.Version != 1 {
		return nil, fmt.Errorf("sandbox: %s/state.json has version %d, want %d", dir, sb.state.Version, stateVersion)
	}
	if sb.state.Kube != nil {
		sb.state.Kube.Token, _ = readToken(sb.path("kube", "tokens.csv"))
	}
	return sb, nil
}

// Down stops every process of the sandbox (waiting for each to exit), removes
// its network devices, then deletes the state directory. It is idempotent.
func (sb *Sandbox) Down(ctx context.Context) error {
	unlock, err := lockDir(ctx, sb.dir)
	if err != nil {
		return err
	}
	defer unlock()
	return sb.down(ctx)
}

// lockDir serialises Up and Down on one state directory, across processes.
// The lock file sits beside the directory, which Down removes.
func lockDir(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return lockFile(ctx, dir+".lock")
}

func (sb *Sandbox) down(ctx context.Context) error {
	sb.mu.Lock()
	procs := append([]procState(nil), sb.state.Procs...)
	sb.mu.Unlock()
	ds := &downState{procs: procs, pins: sb.pinNamespaces(procs)}
	defer ds.pins.close()
	var errs []error
	for _, c := range cleanups {
		if err := c.run(ctx, sb, ds); err != nil {
			errs = append(errs, err)
		}
	}
	sb.stopSpawner()
	if len(errs) > 0 {
		// Keep the state so that a second Down can retry.
		return errors.Join(errs...)
	}
	if err := os.RemoveAll(sb.dir); err != nil {
		return fmt.Errorf("remove %s: %w", sb.dir, err)
	}
	sb.mu.Lock()
	sb.state.Procs = nil
	sb.state.Net = nil
	sb.mu.Unlock()
	return nil
}

func (sb *Sandbox) stopSpawner() {
	sb.mu.Lock()
	s := sb.spawner
	sb.spawner = nil
	sb.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// Down stops the sandbox recorded in dir (DefaultStateDir if empty). It is
// not an error if none runs.
func Down(ctx context.Context, dir string) error {
	sb, err := Open(dir)
	if errors.Is(err, ErrNotRunning) {
		return nil
	}
	if err != nil {
		return err
	}
	return sb.Down(ctx)
}

// Env returns environment variables ("KEY=value") that point tools at the
// sandbox: KUBECONFIG, CAIRN_SANDBOX_INVENTORY, CAIRN_SANDBOX_SSH_CONFIG,
// CAIRN_SANDBOX_DIR, and CAIRN_SSH_CONFIG and CAIRN_KUBECONFIG, which
// exported scripts read (so `eval "$(cairn sandbox env)"` points them at
// the sandbox too).
func (sb *Sandbox) Env() []string {
	env := []string{EnvStateDir + "=" + sb.dir}
	if k := sb.Kube(); k != nil {
		env = append(env, "KUBECONFIG="+k.Kubeconfig, "CAIRN_KUBECONFIG="+k.Kubeconfig)
	}
	if lb := sb.LoadBalancer(); lb != nil {
		// What the kubeadm runbook calls LOAD_BALANCER_DNS and _PORT.
		env = append(env, "CAIRN_SANDBOX_LB_NAME="+lb.Name, "CAIRN_SANDBOX_LB_PORT="+strconv.Itoa(lb.Port))
	}
	if inv := sb.Inventory(); inv != nil {
		env = append(env, "CAIRN_SANDBOX_INVENTORY="+sb.path("inventory.json"), "CAIRN_SANDBOX_SSH_CONFIG="+inv.SSHConfig, "CAIRN_SSH_CONFIG="+inv.SSHConfig)
	}
	return env
}
