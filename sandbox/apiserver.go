package sandbox

import (
	"context"
	"strconv"
)

// apiServer is kube-apiserver on 127.0.0.1, serving with the sandbox CA and
// authenticating the admin by a static token.
type apiServer struct {
	bin, etcdURL, token string
	node                cpNode
	info                *KubeInfo // set by Start
}

const componentAPIServer = "kube-apiserver"

func (a *apiServer) Name() string { return componentAPIServer }

func (a *apiServer) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	kd := func(elem ...string) string { return sb.path(append([]string{"kube"}, elem...)...) }
	pki := func(name string) string { return sb.path("kube", "pki", name) }
	ports, err := a.node.ports(portAPIServer)
	if err != nil {
		return Probe{}, err
	}
	port := ports[0]
	a.info = &KubeInfo{Kubeconfig: sb.path("kubeconfig"), Context: ContextName, Token: a.token, CAFile: pki("ca.crt"), EtcdURL: a.etcdURL,
		Server: "https://" + a.node.hostPort(port)}
	// The Kube probe needs the server before state.Kube is final.
	sb.mu.Lock()
	sb.state.Kube = a.info
	sb.mu.Unlock()
	sb.progress("kube: starting kube-apiserver %s on %s", KubeVersion, a.info.Server)
	argv := []string{a.bin,
		"--etcd-servers=" + a.etcdURL,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + kd("certs"),
		// kubeadm's certificate flags, on kubeadm's PKI.
		"--tls-cert-file=" + pki("apiserver.crt"),
		"--tls-private-key-file=" + pki("apiserver.key"),
		"--client-ca-file=" + pki("ca.crt"),
		"--kubelet-client-certificate=" + pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + pki("apiserver-kubelet-client.key"),
		"--proxy-client-cert-file=" + pki("front-proxy-client.crt"),
		"--proxy-client-key-file=" + pki("front-proxy-client.key"),
		"--requestheader-client-ca-file=" + pki("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--service-account-key-file=" + pki("sa.pub"),
		"--service-account-signing-key-file=" + pki("sa.key"),
		"--service-account-issuer=" + saIssuer,
		// Joining nodes authenticate with bootstrap tokens, as on kubeadm.
		"--enable-bootstrap-token-auth=true",
		// The sandbox's own admin: a static token (its kubeconfig).
		"--token-auth-file=" + kd("tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
		"--v=" + kubeLogLevel,
	}
	if a.node.onHost() {
		// As kubeadm's static pod: all of the host's addresses, its own
		// advertised.
		argv = append(argv, "--advertise-address="+a.node.ip)
	} else {
		argv = append(argv, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			// With a 127.0.0.1 advertise address the default endpoint
			// reconciler kills the server.
			"--endpoint-reconciler-type=none")
	}
	_, err = sb.spawn(a.Name(), a.node.wrap(argv), serverEnv())
	return Probe{Kind: ProbeKube, URL: "/readyz"}, err
}
