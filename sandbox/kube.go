package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Cluster settings. The service range is only allocated from, never routed:
// no traffic goes to it.
const (
	serviceCIDR   = "10.0.0.0/24"
	serviceIP     = "10.0.0.1"
	saIssuer      = "https://kubernetes.default.svc.cluster.local"
	adminUser     = "cairn-admin"
	portRetries   = 3
	kubeLogLevel  = "1"
	certLifetime  = 365 * 24 * time.Hour
	etcdName      = "cairn"
	defaultSAPath = "/api/v1/namespaces/default/serviceaccounts/default"
	kubeProcEtcd  = "etcd"
	kubeProcAPI   = "kube-apiserver"
	kubeProcKCM   = "kube-controller-manager"
)

// startKube starts etcd, kube-apiserver and kube-controller-manager and writes
// the kubeconfig.
func (sb *Sandbox) startKube(ctx context.Context, bins kubeBins) error {
	kd := func(elem ...string) string { return sb.path(append([]string{"kube"}, elem...)...) }
	sb.progress("kube: generating certificates and keys")
	if err := writePKI(kd()); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	token, err := randomHex(32)
	if err != nil {
		return err
	}
	// Static token file: token,user,uid,"groups".
	if err := os.WriteFile(kd("tokens.csv"), []byte(fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", token, adminUser, adminUser)), 0o600); err != nil {
		return fmt.Errorf("kube: write token file: %w", err)
	}

	env := serverEnv()

	// etcd.
	var etcdURL string
	if err := retryPorts(func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		cport, pport := ports[0], ports[1]
		etcdURL = "http://127.0.0.1:" + strconv.Itoa(cport)
		peer := "http://127.0.0.1:" + strconv.Itoa(pport)
		sb.progress("kube: starting etcd %s on %s", EtcdVersion, etcdURL)
		_ = os.RemoveAll(kd("etcd"))
		c, err := sb.spawn(kubeProcEtcd, []string{bins.etcd,
			"--name=" + etcdName,
			"--data-dir=" + kd("etcd"),
			"--listen-client-urls=" + etcdURL,
			"--advertise-client-urls=" + etcdURL,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + etcdName + "=" + peer,
			"--initial-cluster-state=new",
			"--unsafe-no-fsync", // a throwaway cluster: speed over durability
			"--log-level=warn",
		}, env)
		if err != nil {
			return err
		}
		return sb.waitHTTP(ctx, c, kubeProcEtcd, func(ctx context.Context) error { return probeEtcd(ctx, etcdURL) })
	}); err != nil {
		return fmt.Errorf("kube: %w", err)
	}

	// kube-apiserver.
	info := &KubeInfo{Kubeconfig: sb.path("kubeconfig"), Context: ContextName, Token: token, CAFile: kd("ca.crt"), EtcdURL: etcdURL}
	if err := retryPorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		info.Server = "https://127.0.0.1:" + strconv.Itoa(port)
		sb.progress("kube: starting kube-apiserver %s on %s", KubeVersion, info.Server)
		c, err := sb.spawn(kubeProcAPI, []string{bins.apiserver,
			"--etcd-servers=" + etcdURL,
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			// With a 127.0.0.1 advertise address the default endpoint
			// reconciler kills the server.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + kd("certs"),
			"--tls-cert-file=" + kd("apiserver.crt"),
			"--tls-private-key-file=" + kd("apiserver.key"),
			"--client-ca-file=" + kd("ca.crt"),
			"--service-account-key-file=" + kd("sa.pub"),
			"--service-account-signing-key-file=" + kd("sa.key"),
			"--service-account-issuer=" + saIssuer,
			"--token-auth-file=" + kd("tokens.csv"),
			"--authorization-mode=RBAC",
			"--service-cluster-ip-range=" + serviceCIDR,
			"--allow-privileged=true",
			"--profiling=false",
			"--v=" + kubeLogLevel,
		}, env)
		if err != nil {
			return err
		}
		return sb.waitHTTP(ctx, c, kubeProcAPI, func(ctx context.Context) error { return probeReadyz(ctx, info) })
	}); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	if err := writeKubeconfig(info.Kubeconfig, info); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	sb.mu.Lock()
	sb.state.Kube = info
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return err
	}

	// kube-controller-manager: default ServiceAccounts, namespace deletion,
	// garbage collection.
	if err := retryPorts(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		sb.progress("kube: starting kube-controller-manager on 127.0.0.1:%d", port)
		c, err := sb.spawn(kubeProcKCM, []string{bins.kcm,
			"--kubeconfig=" + info.Kubeconfig,
			"--authentication-kubeconfig=" + info.Kubeconfig,
			"--authorization-kubeconfig=" + info.Kubeconfig,
			"--leader-elect=false",
			"--service-account-private-key-file=" + kd("sa.key"),
			"--root-ca-file=" + kd("ca.crt"),
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + kd("kcm-certs"),
			"--v=" + kubeLogLevel,
		}, env)
		if err != nil {
			return err
		}
		// Ready means it did its first job: the default ServiceAccount.
		return sb.waitHTTP(ctx, c, kubeProcKCM, func(ctx context.Context) error {
			code, body, err := kubeGet(ctx, info, defaultSAPath)
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("default ServiceAccount: %d %s", code, strings.TrimSpace(body))
			}
			return nil
		})
	}); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	sb.progress("kube: cluster ready at %s (kubeconfig %s, context %s)", info.Server, info.Kubeconfig, ContextName)
	return nil
}

// errPortTaken means a server exited at start, probably because another
// process took its port between freePort and bind; the start is retried.
var errPortTaken = errors.New("address already in use")

func retryPorts(f func() error) error {
	var err error
	for i := 0; i < portRetries; i++ {
		if err = f(); !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// waitHTTP waits until probe succeeds, the process exits (an error with the
// tail of its log) or the start-up timeout passes.
func (sb *Sandbox) waitHTTP(ctx context.Context, c *child, name string, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, sb.opts.Timeout)
	defer cancel()
	logPath := sb.path("logs", name+".log")
	var last error
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		if c.exited() {
			tail := logTail(logPath, 15)
			err := fmt.Errorf("%s exited during start-up (log %s):\n%s", name, logPath, tail)
			if strings.Contains(tail, "address already in use") {
				// Drop the dead process from the state; the caller retries.
				sb.forget(c.cmd.Process.Pid)
				return fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("%s not ready after %s (last probe: %v); see %s", name, sb.opts.Timeout, last, logPath)
			}
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (sb *Sandbox) forget(pid int) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for i, p := range sb.state.Procs {
		if p.PID == pid {
			sb.state.Procs = append(sb.state.Procs[:i], sb.state.Procs[i+1:]...)
			break
		}
	}
	delete(sb.children, pid)
}

func probeEtcd(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/health", nil)
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(buf[:n]), `"true"`) {
		return fmt.Errorf("etcd /health: %d %s", resp.StatusCode, buf[:n])
	}
	return nil
}

// serverEnv is the environment of the servers: the caller's, less proxy
// settings (every address they use is loopback).
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "all_proxy", "no_proxy", "kubeconfig":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// writePKI writes a CA, the apiserver's serving certificate and the
// service-account key pair into dir.
func writePKI(dir string) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "cairn-sandbox-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create CA: %w", err)
	}
	caCert, _ := x509.ParseCertificate(caDER)

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now,
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("create serving certificate: %w", err)
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files := []struct {
		name  string
		typ   string
		der   []byte
		perm  os.FileMode
		isKey bool
	}{
		{"ca.crt", "CERTIFICATE", caDER, 0o644, false},
		{"ca.key", "", nil, 0o600, true},
		{"apiserver.crt", "CERTIFICATE", srvDER, 0o644, false},
		{"apiserver.key", "", nil, 0o600, true},
		{"sa.key", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey), 0o600, false},
		{"sa.pub", "PUBLIC KEY", saPub, 0o644, false},
	}
	for _, f := range files {
		typ, der := f.typ, f.der
		if f.isKey {
			k := caKey
			if f.name == "apiserver.key" {
				k = srvKey
			}
			if der, err = x509.MarshalPKCS8PrivateKey(k); err != nil {
				return err
			}
			typ = "PRIVATE KEY"
		}
		b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
		if err := os.WriteFile(dir+"/"+f.name, b, f.perm); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n.Add(n, big.NewInt(1))
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// readToken reads the admin token back from the static token file.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok, _, ok := strings.Cut(string(b), ",")
	if !ok {
		return "", fmt.Errorf("%s: no token", path)
	}
	return tok, nil
}

// writeKubeconfig writes an admin kubeconfig with one cluster, user and
// context, all named ContextName (the user is named after adminUser).
func writeKubeconfig(path string, k *KubeInfo) error {
	ca, err := os.ReadFile(k.CAFile)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    token: %[5]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[4]s
    namespace: default
current-context: %[1]s
`, ContextName, k.Server, b64(ca), adminUser, k.Token)
	return writeFileAtomic(path, []byte(cfg), 0o600)
}
