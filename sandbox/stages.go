package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A stage is one step of Up, in the manner of kind's create actions: what
// it starts, for which shapes of sandbox (in), what it needs from the
// stages before it and what it gives the ones after. Up runs the stages of
// its shape in order; TestStagesInOrder checks, for every shape, that each
// need is given by an earlier stage. A new component is started by a stage
// here (or by one a stage already runs).
type stage struct {
	name  string
	in    func(o *Options) bool
	needs []string
	gives []string
	// run is a method expression of *Sandbox (receiver first).
	run func(sb *Sandbox, ctx context.Context, pre prereqs) error
}

// What stages give each other.
const (
	giveImages       = "node images"   // archives of the images the nodes import
	giveHosts        = "hosts"         // SSH hosts (in netns mode with the bridge)
	giveRuntimes     = "runtimes"      // containerd on each node
	giveKubelets     = "kubelets"      // kubelet on each node, waiting for kubeadm
	giveAPIServer    = "apiserver"     // etcd, kube-apiserver, the controller manager
	giveLB           = "load balancer" // haproxy in front of the apiserver(s)
	giveCiliumValues = "cilium values" // the chart values the Cilium runbook uses
	giveFirstCP      = "first control plane"
	giveEtcdMembers  = "external etcd"
)

func withSSH(o *Options) bool    { return !o.NoSSH }
func withNodes(o *Options) bool  { return o.Nodes && !o.NoSSH }
func nodesKube(o *Options) bool  { return o.Nodes && !o.NoSSH && !o.NoKube }
func ownKube(o *Options) bool    { return !o.Nodes && !o.NoKube }
func kubeAndSSH(o *Options) bool { return !o.NoKube && !o.NoSSH }

// stages is Up's list. Nodes are bare machines (kubeadm init in the
// runbook makes their cluster); without nodes the sandbox runs its own
// control plane.
var stages = []stage{
	{name: "node images", in: withNodes, gives: []string{giveImages},
		run: func(sb *Sandbox, ctx context.Context, _ prereqs) error {
			// The archives the runbook imports on each node (the
			// air-gapped recipe): made once from the binaries, then
			// cached beside them.
			if _, err := EnsureImages(ctx, sb.binDir(), func(m string) { sb.progress("%s", m) }); err != nil {
				return fmt.Errorf("nodes: %w", err)
			}
			return nil
		}},
	{name: "ssh hosts", in: withSSH, gives: []string{giveHosts}, run: (*Sandbox).startSSH},
	{name: "container runtimes", in: withNodes, needs: []string{giveHosts, giveImages}, gives: []string{giveRuntimes}, run: (*Sandbox).startRuntimes},
	{name: "kubelets", in: withNodes, needs: []string{giveRuntimes}, gives: []string{giveKubelets}, run: (*Sandbox).startKubelets},
	{name: "control plane", in: ownKube, gives: []string{giveAPIServer}, run: (*Sandbox).startKube},
	// The load balancer listens on the hosts' bridge too, so it comes
	// after them. With nodes it forwards to the control-plane hosts'
	// apiservers-to-be; else to the sandbox's own.
	{name: "load balancer", in: nodesKube, needs: []string{giveHosts, giveKubelets}, gives: []string{giveLB}, run: (*Sandbox).startLB},
	{name: "load balancer", in: ownKube, needs: []string{giveAPIServer}, gives: []string{giveLB}, run: (*Sandbox).startLB},
	{name: "cilium values", in: nodesKube, needs: []string{giveLB}, gives: []string{giveCiliumValues},
		run: func(sb *Sandbox, _ context.Context, _ prereqs) error {
			if err := sb.writeCiliumValues(sb.LoadBalancer()); err != nil {
				return fmt.Errorf("nodes: %w", err)
			}
			return nil
		}},
	{name: "first control plane", in: ownKube, needs: []string{giveAPIServer, giveLB}, gives: []string{giveFirstCP}, run: (*Sandbox).kubeadmFirstControlPlane},
	{name: "external etcd", in: kubeAndSSH, needs: []string{giveHosts}, gives: []string{giveEtcdMembers}, run: (*Sandbox).startExternalEtcd},
}

// stagesFor lists the stages of a shape, in order, and checks that each
// need is given before it.
func stagesFor(o *Options) ([]stage, error) {
	given := map[string]bool{}
	var out []stage
	for _, st := range stages {
		if !st.in(o) {
			continue
		}
		for _, n := range st.needs {
			if !given[n] {
				return nil, fmt.Errorf("stage %q needs %s, which no earlier stage gives for %s", st.name, n, shape(!o.NoKube, !o.NoSSH, o.Nodes))
			}
		}
		for _, g := range st.gives {
			given[g] = true
		}
		out = append(out, st)
	}
	return out, nil
}

func (sb *Sandbox) up(ctx context.Context, pre prereqs) error {
	list, err := stagesFor(&sb.opts)
	if err != nil {
		return err
	}
	for _, st := range list {
		if err := st.run(sb, ctx, pre); err != nil {
			return err
		}
	}
	return nil
}

// A cleanup undoes one kind of thing a sandbox leaves on the machine. Each
// reads what it undoes from state.json, as Status reads the probes: Down
// may run in another process than Up, where no component value exists.
// down runs them all, in order, and keeps going past a failure so that a
// second Down retries only what is left.
type cleanup struct {
	name string
	run  func(ctx context.Context, sb *Sandbox, ds *downState) error
}

// downState is what cleanups share: the network namespaces pinned before
// the processes that hold them stop.
type downState struct {
	procs []procState
	pins  *nsPins
}

var cleanups = []cleanup{
	// Reverse start order: hosts, controller manager, apiserver, etcd.
	{"processes", func(ctx context.Context, sb *Sandbox, ds *downState) error {
		var errs []error
		for i := len(ds.procs) - 1; i >= 0; i-- {
			p := ds.procs[i]
			sb.progress("stopping %s (pid %d)", p.Name, p.PID)
			if err := sb.stopProc(ctx, p, 10*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}},
	// Anything a component started that outlived its recorded process.
	{"marked processes", func(ctx context.Context, sb *Sandbox, _ *downState) error { return killMarked(ctx, sb.marker()) }},
	{"network devices", func(ctx context.Context, sb *Sandbox, ds *downState) error { return sb.downNet(ctx, ds.pins.links) }},
	// The kubelets' cgroup roots, once their processes are gone.
	{"kubelet cgroups", func(_ context.Context, sb *Sandbox, _ *downState) error {
		sb.mu.Lock()
		nodes := sb.state.WantNodes
		sb.mu.Unlock()
		if !nodes {
			return nil
		}
		return removeCgroupTree(CgroupTree(sb.dir))
	}},
	{"hosts line", func(_ context.Context, sb *Sandbox, _ *downState) error {
		sb.mu.Lock()
		lb := sb.state.LB
		sb.mu.Unlock()
		if lb == nil || lb.HostsFile == "" {
			return nil
		}
		if err := removeHostsLine(lb.HostsFile, hostsMarker(sb.dir)); err != nil {
			return fmt.Errorf("remove %s from %s: %w", LBName, lb.HostsFile, err)
		}
		return nil
	}},
}
