package sandbox

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/sandbox/kubeapi"
)

// Status describes a sandbox as found now.
type Status struct {
	Dir       string
	Complete  bool // Up finished
	Started   time.Time
	Procs     []ProcStatus
	Kube      *KubeInfo // nil without a cluster
	KubeReady bool      // /readyz answered ok
	Inventory *Inventory
	LB        *LBInfo // the load balancer in front of kube-apiserver
	Hosts     []HostStatus
	// Components are the servers, each with its probe's answer.
	Components []ComponentStatus
	Problems   []string
	// Nodes: the hosts are kubeadm-ready nodes (Options.Nodes).
	Nodes bool
}

// ProcStatus is one server process.
type ProcStatus struct {
	Name  string
	PID   int
	Alive bool
	Log   string
}

// HostStatus is one SSH host.
type HostStatus struct {
	Name    string
	Address string
	Port    int
	Up      bool // answered with an SSH banner
}

// Healthy reports whether Up finished and every part answers.
func (s Status) Healthy() bool { return s.Complete && len(s.Problems) == 0 }

// ID tells one sandbox from the next in the same state directory: when it
// was started. A server keeps to the sandbox it first used (cmd/cairn's
// targets) and asks before it uses another.
func (s Status) ID() string {
	if s.Started.IsZero() {
		return ""
	}
	return s.Started.UTC().Format(time.RFC3339Nano)
}

// Summary is a one-line description.
func (s Status) Summary() string {
	if s.Healthy() {
		return "healthy"
	}
	if len(s.Problems) == 0 {
		return "incomplete"
	}
	return strings.Join(s.Problems, "; ")
}

// Scope is the part of a sandbox a caller is about to use. A status taken
// in a scope probes only its components and counts only their problems:
// `cairn run` of a block on two hosts neither dials the 98 others nor
// refuses the sandbox because one of them is down. Processes out of scope
// are still listed, with whether they are alive.
type Scope struct {
	// Cluster: the cluster's servers, everything but the SSH hosts' sshd.
	Cluster bool
	// Hosts are the SSH hosts used, by name; nil means every host.
	Hosts []string
}

// has reports whether component name (a server or a process) is in scope;
// a nil scope holds everything.
func (sc *Scope) has(name string) bool {
	if sc == nil {
		return true
	}
	host, ok := strings.CutPrefix(name, hostComponentPrefix)
	if !ok {
		return sc.Cluster
	}
	return sc.Hosts == nil || slices.Contains(sc.Hosts, host)
}

// Status checks every process and probes every component of the sandbox,
// each probe bounded by a few seconds.
func (sb *Sandbox) Status(ctx context.Context) Status { return sb.StatusIn(ctx, nil) }

// StatusIn is Status for the components in scope only (nil: all of them).
// A component out of scope is not probed: it counts as healthy when its
// processes are alive, and a dead one is not a problem of this status.
func (sb *Sandbox) StatusIn(ctx context.Context, scope *Scope) Status {
	sb.mu.Lock()
	st := sb.state
	st.Components = append([]componentState(nil), st.Components...)
	sb.mu.Unlock()
	s := Status{Dir: sb.dir, Complete: st.Complete, Started: st.Started, Kube: st.Kube, Inventory: st.Inventory, LB: st.LB, Nodes: st.WantNodes}
	if !st.Complete {
		s.Problems = append(s.Problems, "start-up did not finish")
	}
	if st.Version < stateVersion {
		s.Problems = append(s.Problems, "started by an older cairn; `cairn sandbox up` replaces it")
	}
	pids := map[string][]int{}
	for _, p := range st.Procs {
		alive := procAlive(p)
		pids[p.Name] = append(pids[p.Name], p.PID)
		s.Procs = append(s.Procs, ProcStatus{Name: p.Name, PID: p.PID, Alive: alive, Log: p.Log})
		if !alive && scope.has(p.Name) {
			s.Problems = append(s.Problems, fmt.Sprintf("%s (pid %d) is not running; see %s", p.Name, p.PID, p.Log))
		}
	}
	// Probes run at once (eight at a time), not one after another: a
	// sandbox of a hundred hosts answers in about one probe's time.
	errs := make([]error, len(st.Components))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range st.Components {
		if !scope.has(c.Name) {
			errs[i] = sb.procsAlive(c.Name)
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = sb.probe(ctx, c.Probe)
		})
	}
	wg.Wait()
	healthy := map[string]bool{}
	for i, c := range st.Components {
		cs := ComponentStatus{Name: c.Name, Probe: c.Probe, PIDs: pids[c.Name], Unprobed: !scope.has(c.Name)}
		if err := errs[i]; err != nil {
			cs.Err = err.Error()
			if !cs.Unprobed {
				s.Problems = append(s.Problems, c.Name+": "+err.Error())
			}
		} else {
			cs.Healthy = true
		}
		healthy[c.Name] = cs.Healthy
		s.Components = append(s.Components, cs)
	}
	s.KubeReady = healthy[componentAPIServer]
	if st.WantKube && !st.WantNodes && st.Complete && st.Kube == nil {
		s.Problems = append(s.Problems, "cluster missing from state")
	}
	if st.Inventory != nil {
		for _, h := range st.Inventory.Hosts {
			s.Hosts = append(s.Hosts, HostStatus{Name: h.Name, Address: h.Address, Port: h.Port, Up: healthy[hostComponent(h.Name)]})
		}
	}
	return s
}

// StatusOf reports on the sandbox recorded in dir (DefaultStateDir if empty).
func StatusOf(ctx context.Context, dir string) (Status, error) { return StatusOfIn(ctx, dir, nil) }

// StatusOfIn is StatusOf for the components in scope (nil: all).
func StatusOfIn(ctx context.Context, dir string, scope *Scope) (Status, error) {
	sb, err := Open(dir)
	if err != nil {
		return Status{}, err
	}
	return sb.StatusIn(ctx, scope), nil
}

// api is the sandbox's REST client for its apiserver as the admin.
func (k *KubeInfo) api() *kubeapi.Client {
	return &kubeapi.Client{Server: k.Server, CAFile: k.CAFile, Token: k.Token}
}

// freePorts returns n distinct free ports on 127.0.0.1, holding all n
// listeners open until every port is known.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. Another process
// may take it before the server binds it; starting servers check for that.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
