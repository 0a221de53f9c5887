package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
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

// Status checks every process and probes every component of the sandbox,
// each probe bounded by a few seconds.
func (sb *Sandbox) Status(ctx context.Context) Status {
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
		if !alive {
			s.Problems = append(s.Problems, fmt.Sprintf("%s (pid %d) is not running; see %s", p.Name, p.PID, p.Log))
		}
	}
	// Probes run at once (eight at a time), not one after another: a
	// sandbox of a hundred hosts answers in about one probe's time.
	errs := make([]error, len(st.Components))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, c := range st.Components {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = sb.probe(ctx, c.Probe)
		})
	}
	wg.Wait()
	healthy := map[string]bool{}
	for i, c := range st.Components {
		cs := ComponentStatus{Name: c.Name, Probe: c.Probe, PIDs: pids[c.Name]}
		if err := errs[i]; err != nil {
			cs.Err = err.Error()
			s.Problems = append(s.Problems, c.Name+": "+err.Error())
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

// Status reports on the sandbox recorded in dir (DefaultStateDir if empty).
func StatusOf(ctx context.Context, dir string) (Status, error) {
	sb, err := Open(dir)
	if err != nil {
		return Status{}, err
	}
	return sb.Status(ctx), nil
}

// kubeHTTPClient trusts only the sandbox CA.
func kubeHTTPClient(k *KubeInfo, timeout time.Duration) (*http.Client, error) {
	pem, err := os.ReadFile(k.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", k.CAFile)
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			Proxy:             nil, // loopback only, never through a proxy
			DisableKeepAlives: true,
		},
	}, nil
}

// kubeGet GETs path from the apiserver as the admin and returns status and body.
func kubeGet(ctx context.Context, k *KubeInfo, path string) (int, string, error) {
	return kubeDo(ctx, k, http.MethodGet, path, "")
}

// kubeApply POSTs the JSON object body to the collection at path as the
// admin; an object that already exists is left as it is.
func kubeApply(ctx context.Context, k *KubeInfo, path, body string) error {
	code, out, err := kubeDo(ctx, k, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK && code != http.StatusConflict {
		return fmt.Errorf("POST %s: %d %s", path, code, strings.TrimSpace(out))
	}
	return nil
}

func kubeDo(ctx context.Context, k *KubeInfo, method, path, body string) (int, string, error) {
	c, err := kubeHTTPClient(k, 3*time.Second)
	if err != nil {
		return 0, "", err
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, k.Server+path, rd)
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if k.Token != "" {
		req.Header.Set("Authorization", "Bearer "+k.Token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	// Whole objects (a ConfigMap the Cilium operator reads), bounded.
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, string(b), nil
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
