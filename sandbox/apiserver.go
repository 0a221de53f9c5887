package sandbox

import (
	"context"
	"strconv"
)

// apiServer is kube-apiserver on 127.0.0.1, serving with the sandbox CA and
// authenticating the admin by a static token.
type apiServer struct {
	bin, etcdURL, token string
	info                *KubeInfo // set by Start
}

const componentAPIServer = "kube-apiserver"

func (a *apiServer) Name() string { return componentAPIServer }

func (a *apiServer) Start(ctx context.Context, sb *Sandbox) (Probe, error) {
	kd := func(elem ...string) string { return sb.path(append([]string{"kube"}, elem...)...) }
	port, err := freePort()
	if err != nil {
		return Probe{}, err
	}
	a.info = &KubeInfo{Kubeconfig: sb.path("kubeconfig"), Context: ContextName, Token: a.token, CAFile: kd("ca.crt"), EtcdURL: a.etcdURL,
		Server: "https://127.0.0.1:" + strconv.Itoa(port)}
	// The Kube probe needs the server before state.Kube is final.
	sb.mu.Lock()
	sb.state.Kube = a.info
	sb.mu.Unlock()
	sb.progress("kube: starting kube-apiserver %s on %s", KubeVersion, a.info.Server)
	_, err = sb.spawn(a.Name(), []string{a.bin,
		"--etcd-servers=" + a.etcdURL,
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
	}, serverEnv())
	return Probe{Kind: ProbeKube, URL: "/readyz"}, err
}
