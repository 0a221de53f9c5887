package sandbox

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Component is one server of the sandbox: etcd, kube-apiserver, a controller
// manager, an SSH host, a load balancer. Every component is started,
// health-checked and stopped the same way, by the sandbox:
//
//   - Start spawns its processes (sb.spawn records each in state.json before
//     it returns) and says which Probe tells that it serves;
//   - the sandbox waits for the Probe (and for Ready, if the component has a
//     first job to finish), starts it again on a lost port race, and records
//     the component and its Probe in state.json;
//   - Status probes every recorded component again, from any process;
//   - stopping is the sandbox's alone: the component's recorded processes,
//     SIGTERM then SIGKILL, in reverse start order.
type Component interface {
	// Name is unique within a sandbox; its processes and log carry it.
	Name() string
	// Start spawns the component's processes and returns its Probe.
	Start(ctx context.Context, sb *Sandbox) (Probe, error)
}

// readier is a Component with a first job that its Probe does not show (the
// controller manager's first ServiceAccount). Up waits for it once.
type readier interface {
	Ready(ctx context.Context, sb *Sandbox) error
}

// Probe kinds.
const (
	// ProbeHTTP GETs URL (http or https; https is not verified: the
	// controller managers serve self-signed certificates) and wants 200
	// and, if set, Want in the body.
	ProbeHTTP = "http"
	// ProbeKube GETs the path URL from the sandbox's apiserver as its admin.
	ProbeKube = "kube"
	// ProbeSSH dials URL (host:port) and wants an SSH banner.
	ProbeSSH = "ssh"
	// ProbeTCP dials URL (host:port) and wants the connection accepted.
	ProbeTCP = "tcp"
	// ProbeUnix dials the unix socket at URL (a path on this machine).
	ProbeUnix = "unix"
	// ProbeProcess wants the processes of the component named URL alive:
	// for a service whose own health is not the sandbox's to judge (a
	// node's kubelet before kubeadm has configured it).
	ProbeProcess = "process"
)

// Probe says how to tell that a component serves. It is data, recorded in
// state.json, so that any process can check a sandbox another one started.
type Probe struct {
	Kind string `json:"kind"`
	URL  string `json:"url"`
	Want string `json:"want,omitempty"`
}

func (p Probe) String() string { return p.Kind + " " + p.URL }

// componentState is one started component in state.json.
type componentState struct {
	Name  string `json:"name"`
	Probe Probe  `json:"probe"`
}

// ComponentStatus is one component as found now.
type ComponentStatus struct {
	Name    string
	Probe   Probe
	Healthy bool
	Err     string // why not, when not
	PIDs    []int
	// Unprobed: out of the status's scope, so only its processes were
	// checked (Healthy: they are alive).
	Unprobed bool
}

// startComponent starts c and waits until it serves, bounded by the
// start-up timeout; a start that lost its port to another process is tried
// again. On success c is recorded in state.json.
func (sb *Sandbox) startComponent(ctx context.Context, c Component) error {
	name := c.Name()
	sb.mu.Lock()
	for _, cs := range sb.state.Components {
		if cs.Name == name {
			sb.mu.Unlock()
			return fmt.Errorf("%s: a component of that name already runs", name)
		}
	}
	sb.mu.Unlock()
	err := retryPorts(func() error {
		probe, err := c.Start(ctx, sb)
		if err != nil {
			return errors.Join(err, sb.stopComponentProcs(context.WithoutCancel(ctx), name))
		}
		wait := func(ctx context.Context) error { return sb.probe(ctx, probe) }
		if r, ok := c.(readier); ok {
			wait = func(ctx context.Context) error {
				if err := sb.probe(ctx, probe); err != nil {
					return err
				}
				return r.Ready(ctx, sb)
			}
		}
		if err := sb.waitServing(ctx, name, wait); err != nil {
			return errors.Join(err, sb.stopComponentProcs(context.WithoutCancel(ctx), name))
		}
		sb.mu.Lock()
		sb.state.Components = append(sb.state.Components, componentState{Name: name, Probe: probe})
		sb.mu.Unlock()
		return sb.saveState()
	})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Add starts c in a running sandbox (a controller manager a runbook needs,
// say) the way Up starts its own components; Down stops it with the rest.
func (sb *Sandbox) Add(ctx context.Context, c Component) error {
	unlock, err := lockDir(ctx, sb.dir)
	if err != nil {
		return err
	}
	defer unlock()
	return sb.startComponent(ctx, c)
}

// Remove stops the component named name and forgets it, the way a node loss
// does when kill is true (SIGKILL at once: no lease released) or the way
// `systemctl stop` does otherwise.
func (sb *Sandbox) Remove(ctx context.Context, name string, kill bool) error {
	unlock, err := lockDir(ctx, sb.dir)
	if err != nil {
		return err
	}
	defer unlock()
	found := false
	sb.mu.Lock()
	for i, cs := range sb.state.Components {
		if cs.Name == name {
			sb.state.Components = append(sb.state.Components[:i], sb.state.Components[i+1:]...)
			found = true
			break
		}
	}
	sb.mu.Unlock()
	if !found {
		return fmt.Errorf("sandbox: no component %q", name)
	}
	grace := 10 * time.Second
	if kill {
		grace = 0
	}
	if err := sb.stopProcs(ctx, name, grace); err != nil {
		return err
	}
	return sb.saveState()
}

// Component returns the recorded component called name.
func (sb *Sandbox) Component(name string) (Probe, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, cs := range sb.state.Components {
		if cs.Name == name {
			return cs.Probe, true
		}
	}
	return Probe{}, false
}

func (sb *Sandbox) stopComponentProcs(ctx context.Context, name string) error {
	return sb.stopProcs(ctx, name, 5*time.Second)
}

// stopProcs stops the processes of component name (each process carries
// its component's name), newest first, and drops them from the state.
func (sb *Sandbox) stopProcs(ctx context.Context, name string, grace time.Duration) error {
	sb.mu.Lock()
	var procs []procState
	for _, p := range sb.state.Procs {
		if p.Name == name {
			procs = append(procs, p)
		}
	}
	sb.mu.Unlock()
	if grace == 0 {
		// A crash: nothing gets to clean up (a controller manager keeps its
		// lease until the lease runs out).
		for _, p := range procs {
			if procAlive(p) {
				_ = syscall.Kill(-p.PID, syscall.SIGKILL)
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	}
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := sb.stopProc(ctx, procs[i], grace); err != nil {
			errs = append(errs, err)
			continue
		}
		sb.forget(procs[i].PID)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return sb.saveState()
}

// waitServing waits until ready succeeds, a process of component name exits
// (an error with the tail of its log) or the start-up timeout passes.
func (sb *Sandbox) waitServing(ctx context.Context, name string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, sb.opts.Timeout)
	defer cancel()
	var last error
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		if p, c := sb.exitedProc(name); c != nil {
			tail := logTail(p.Log, 15)
			err := fmt.Errorf("%s exited during start-up (log %s):\n%s", p.Name, p.Log, tail)
			if strings.Contains(tail, "address already in use") {
				// Drop the dead process from the state; the caller retries.
				sb.forget(p.PID)
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("not ready after %s (last probe: %v); see %s", sb.opts.Timeout, last, sb.path("logs", name+".log"))
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

// exitedProc returns a process of component name that this Sandbox started
// and that has exited.
func (sb *Sandbox) exitedProc(name string) (procState, *child) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for _, p := range sb.state.Procs {
		if c := sb.children[p.PID]; p.Name == name && c != nil && c.exited() {
			return p, c
		}
	}
	return procState{}, nil
}

// procsAlive wants every recorded process of component name alive (and at
// least one).
func (sb *Sandbox) procsAlive(name string) error {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	n := 0
	for _, p := range sb.state.Procs {
		if p.Name != name {
			continue
		}
		if !procAlive(p) {
			return fmt.Errorf("%s (pid %d) is not running", name, p.PID)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s has no process", name)
	}
	return nil
}

// probe runs p once, bounded by a few seconds.
func (sb *Sandbox) probe(ctx context.Context, p Probe) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	switch p.Kind {
	case ProbeHTTP:
		if err := sb.dialable(p.URL); err != nil {
			return err
		}
		return probeHTTP(ctx, p.URL, p.Want)
	case ProbeKube:
		k := sb.Kube()
		if k == nil {
			return errors.New("no cluster")
		}
		if err := sb.dialable(k.Server); err != nil {
			return err
		}
		code, body, err := k.api().Get(ctx, p.URL)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("%s: %d %s", p.URL, code, strings.TrimSpace(body))
		}
		return nil
	case ProbeSSH, ProbeTCP:
		if err := sb.dialable("tcp://" + p.URL); err != nil {
			return err
		}
		if p.Kind == ProbeSSH {
			return probeSSH(ctx, p.URL)
		}
		return probeDial(ctx, "tcp", p.URL)
	case ProbeUnix:
		return probeUnix(ctx, p.URL)
	case ProbeProcess:
		return sb.procsAlive(p.URL)
	}
	return fmt.Errorf("unknown probe kind %q", p.Kind)
}

// probeUnix dials the unix socket at path. A socket address holds at most
// 107 bytes, and a state directory under a long test temp dir makes longer
// paths: those are dialled through a descriptor of their directory.
func probeUnix(ctx context.Context, path string) error {
	addr, done, err := unixAddr(path)
	if err != nil {
		return err
	}
	defer done()
	return probeDial(ctx, "unix", addr)
}

// unixAddr is an address that dials the unix socket at path however long
// path is: path itself, or the socket's name under a descriptor of its
// directory (released by done).
func unixAddr(path string) (addr string, done func(), err error) {
	if len(path) < 100 {
		return path, func() {}, nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)), func() { d.Close() }, nil
}

// probeDial wants a connection to addr accepted.
func probeDial(ctx context.Context, network, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// probeHTTP GETs url, never through a proxy, and wants 200 and want in the
// first bytes of the body.
func probeHTTP(ctx context.Context, url, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		// The controller managers serve a self-signed certificate; the
		// probe asks only "does it answer", over loopback.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec
	}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// probeSSH dials addr (host:port) and reads an SSH banner.
func probeSSH(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read banner: %w", err)
	}
	if !strings.HasPrefix(line, "SSH-") {
		return fmt.Errorf("not an SSH server: %q", strings.TrimSpace(line))
	}
	return nil
}

// dialable refuses a URL on a host's 10.200.N.x address once its bridge is
// gone: the packet would leave by the default route.
func (sb *Sandbox) dialable(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if strings.HasPrefix(host, subnetPrefix) && !onLocalBridge(host) {
		return fmt.Errorf("bridge for %s is gone", host)
	}
	return nil
}
