package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// GroupEtcd is the group of the external etcd hosts (Options.EtcdHosts).
const GroupEtcd = "etcd"

// EtcdHostName is the name of external etcd host i: etcd0, etcd1, ...
func EtcdHostName(i int) string { return fmt.Sprintf("etcd%d", i) }

// The external etcd cluster is built the way kubeadm's "set up a highly
// available etcd cluster with kubeadm" does it: one etcd CA made by
// `kubeadm init phase certs etcd-ca`, then, for each member, its server,
// peer and health-check certificates and the apiserver's client certificate
// from `kubeadm init phase certs etcd-server|etcd-peer|etcd-healthcheck-client|
// apiserver-etcd-client` with that member's name and address. Each member's
// /etc/kubernetes/pki holds its files (the CA key only on the first, as the
// guide leaves it), and a real etcd member runs TLS-only in the host's
// network namespace on 2379/2380.

// etcdMember is one member of the external etcd cluster, in its host's
// network namespace.
type etcdMember struct {
	bin     string
	host    Host
	nsPID   int
	nsenter string
	pki     string // its certificate directory (kubeadm's certificatesDir)
	cluster string // --initial-cluster
}

func (e *etcdMember) Name() string { return "etcd-" + e.host.Name }

func (e *etcdMember) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	ip := e.host.Address
	data := sb.path("etcd-data", e.host.Name)
	_ = os.RemoveAll(data)
	node := cpNode{name: e.host.Name, ip: ip, nsPID: e.nsPID, nsenter: e.nsenter}
	p := func(f string) string { return filepath.Join(e.pki, f) }
	sb.progress("etcd: starting member %s on https://%s:2379", e.host.Name, ip)
	_, err := sb.spawn(e.Name(), node.wrap([]string{e.bin,
		"--name=" + e.host.Name,
		"--data-dir=" + data,
		"--listen-client-urls=https://127.0.0.1:2379,https://" + ip + ":2379",
		"--advertise-client-urls=https://" + ip + ":2379",
		"--listen-peer-urls=https://" + ip + ":2380",
		"--initial-advertise-peer-urls=https://" + ip + ":2380",
		"--initial-cluster=" + e.cluster,
		"--initial-cluster-state=new",
		"--client-cert-auth=true",
		"--trusted-ca-file=" + p("etcd/ca.crt"),
		"--cert-file=" + p("etcd/server.crt"),
		"--key-file=" + p("etcd/server.key"),
		"--peer-client-cert-auth=true",
		"--peer-trusted-ca-file=" + p("etcd/ca.crt"),
		"--peer-cert-file=" + p("etcd/peer.crt"),
		"--peer-key-file=" + p("etcd/peer.key"),
		"--unsafe-no-fsync",
		"--log-level=warn",
	}), serverEnv())
	// TLS with client certificates only: the probe sees the port; Up
	// checks /health with a client certificate once the cluster has formed.
	return Probe{Kind: ProbeTCP, URL: node.hostPort(2379)}, err
}

// startExternalEtcd makes the external etcd cluster on the GroupEtcd hosts.
func (sb *Sandbox) startExternalEtcd(ctx context.Context, pre prereqs) error {
	inv := sb.Inventory()
	if inv == nil || len(inv.Groups[GroupEtcd]) == 0 {
		return nil
	}
	if inv.Mode != NetworkNamespaces {
		sb.progress("etcd: the %s hosts run no etcd member in %s mode (members need a network namespace each)", GroupEtcd, inv.Mode)
		return nil
	}
	var members []Host
	for _, name := range inv.Groups[GroupEtcd] {
		h, _ := inv.Host(name)
		members = append(members, h)
	}
	if len(members) == 0 {
		return nil
	}
	kubeadm := pre.kube.kubeadm
	root := sb.path("etcd-pki")
	sb.progress("etcd: certificates for %d external members (kubeadm init phase certs etcd-*)", len(members))
	caDir := filepath.Join(root, "ca")
	cfg := func(dir string, h Host) (string, error) {
		path := filepath.Join(dir, "kubeadm-etcd.yaml")
		y := kubeadmConfigFor(dir, h.Name, h.Address, fmt.Sprintf(`etcd:
  local:
    serverCertSANs: ["%[1]s"]
    peerCertSANs: ["%[1]s"]
`, h.Address))
		return path, os.WriteFile(path, []byte(y), 0o600)
	}
	if err := os.MkdirAll(caDir, 0o700); err != nil {
		return err
	}
	c, err := cfg(caDir, members[0])
	if err != nil {
		return err
	}
	if err := sb.kubeadm(ctx, kubeadm, "init", "phase", "certs", "etcd-ca", "--config", c); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	var cluster []string
	for _, h := range members {
		cluster = append(cluster, h.Name+"=https://"+h.Address+":2380")
	}
	for i, h := range members {
		dir := filepath.Join(root, h.Name)
		if err := copyTree(caDir, dir); err != nil {
			return err
		}
		c, err := cfg(dir, h)
		if err != nil {
			return err
		}
		for _, phase := range []string{"etcd-server", "etcd-peer", "etcd-healthcheck-client", "apiserver-etcd-client"} {
			if err := sb.kubeadm(ctx, kubeadm, "init", "phase", "certs", phase, "--config", c); err != nil {
				return fmt.Errorf("etcd: %s: %w", h.Name, err)
			}
		}
		_ = os.Remove(c)
		hostPKI := filepath.Join(h.Root, "etc", "kubernetes", "pki")
		if err := copyTree(dir, hostPKI); err != nil {
			return fmt.Errorf("etcd: %s: %w", h.Name, err)
		}
		if i > 0 {
			// The guide removes the CA key from every host but the first.
			_ = os.Remove(filepath.Join(hostPKI, "etcd", "ca.key"))
		}
		pid := sb.hostPID(h.Name)
		if err := sb.startComponent(ctx, &etcdMember{bin: pre.kube.etcd, host: h, nsPID: pid, nsenter: pre.nsenter, pki: dir, cluster: strings.Join(cluster, ",")}); err != nil {
			return fmt.Errorf("etcd: %w", err)
		}
	}
	sb.progress("etcd: waiting for the %d members to form a cluster", len(members))
	return sb.waitServing(ctx, "etcd-"+members[0].Name, func(ctx context.Context) error {
		return etcdHealth(ctx, filepath.Join(root, members[0].Name), "https://"+members[0].Address+":2379")
	})
}

// etcdHealth GETs /health from url with the apiserver's etcd client
// certificate in dir (the bridge is checked by the caller's probes).
func etcdHealth(ctx context.Context, dir, url string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "apiserver-etcd-client.crt"), filepath.Join(dir, "apiserver-etcd-client.key"))
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "etcd", "ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"health":"true"`) {
		return fmt.Errorf("etcd %s/health: %d %s", url, resp.StatusCode, b)
	}
	return nil
}

// hostPID is the pid of host name's first process (its namespaces' owner).
func (sb *Sandbox) hostPID(name string) int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.state.Net != nil {
		for _, hs := range sb.state.Net.Hosts {
			if hs.Name == name {
				return hs.PID
			}
		}
	}
	return 0
}
