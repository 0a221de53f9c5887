package sandbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/internal/atomicfile"
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
)

// startKube writes the PKI and the admin token, then starts the cluster's
// components in order: etcd, kube-apiserver (after which the admin
// kubeconfig is written), kube-controller-manager.
func (sb *Sandbox) startKube(ctx context.Context, pre prereqs) error {
	bins := pre.kube
	node := sb.controlPlaneNode(pre)
	if node.onHost() {
		sb.progress("kube: the control plane runs on %s (%s), as kubeadm's static pods would", node.name, node.ip)
	}
	kd := func(elem ...string) string { return sb.path(append([]string{"kube"}, elem...)...) }
	sb.progress("kube: generating the control plane's certificates and keys (kubeadm init phase certs all)")
	if err := sb.writeKubeadmPKI(ctx, bins.kubeadm); err != nil {
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
	etcd := &etcdServer{bin: bins.etcd, node: node}
	if err := sb.startComponent(ctx, etcd); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	api := &apiServer{bin: bins.apiserver, etcdURL: etcd.url, token: token, node: node}
	if err := sb.startComponent(ctx, api); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	info := api.info
	if err := writeKubeconfig(info.Kubeconfig, info); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	sb.mu.Lock()
	sb.state.Kube = info
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return err
	}
	if err := sb.startComponent(ctx, newKCM(bins.kcm, sb, node)); err != nil {
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
	return atomicfile.Write(path, []byte(kubeconfigText(k.Server, ca, adminUser, "token: "+k.Token, "default")), 0o600)
}

// kubeconfigText is a kubeconfig with one cluster and context named
// ContextName, for user with the one credential line cred, in namespace ns
// (none if empty).
func kubeconfigText(server string, ca []byte, user, cred, ns string) string {
	nsLine := ""
	if ns != "" {
		nsLine = "\n    namespace: " + ns
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[4]s
  user:
    %[5]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[4]s%[6]s
current-context: %[1]s
`, ContextName, server, b64(ca), user, cred, nsLine)
}

// writeClientKubeconfig writes a kubeconfig at path that authenticates to
// server with a new client certificate for user (CN) and groups (O), signed
// by the CA in dir (ca.crt, ca.key): what kubeadm writes for
// controller-manager.conf.
func writeClientKubeconfig(dir, path, server, user string, groups []string) error {
	caCert, caKey, err := loadCA(dir)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now,
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("client certificate for %s: %w", user, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return err
	}
	cred := "client-certificate-data: " + b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
		"\n    client-key-data: " + b64(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	cfg := kubeconfigText(server, ca, user, cred, "")
	return atomicfile.Write(path, []byte(cfg), 0o600)
}

// loadCA reads the sandbox CA's certificate and key from dir.
func loadCA(dir string) (*x509.Certificate, any, error) {
	cb, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, fmt.Errorf("%s: no PEM in ca.crt or ca.key", dir)
	}
	cert, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s/ca.crt: %w", dir, err)
	}
	var key any
	if kp.Type == "RSA PRIVATE KEY" { // kubeadm's default
		key, err = x509.ParsePKCS1PrivateKey(kp.Bytes)
	} else {
		key, err = x509.ParsePKCS8PrivateKey(kp.Bytes)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s/ca.key: %w", dir, err)
	}
	return cert, key, nil
}
