package testrig

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/sandbox"
)

// KubeEnv is a running Kubernetes API and a namespace of the test's own.
type KubeEnv struct {
	Kubeconfig string // admin kubeconfig (context sandbox.ContextName)
	Context    string
	Server     string // https://127.0.0.1:PORT
	Namespace  string // created for this test, deleted at its cleanup
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	// Sandbox is the shared sandbox the cluster belongs to, for tests that
	// add a component to it (a controller manager).
	Sandbox *sandbox.Sandbox
}

// Kube returns the test binary's shared cluster and a fresh namespace for t.
func Kube(t testing.TB) *KubeEnv {
	t.Helper()
	requireMain(t)
	shared.kubeOnce.Do(func() {
		shared.kube, shared.kubeErr = shared.start(sandbox.Options{NoSSH: true})
	})
	if shared.kubeErr != nil {
		unavailable(t, "the sandbox cluster (etcd, kube-apiserver, kube-controller-manager)", shared.kubeErr)
	}
	return kubeEnvFor(t, shared.kube)
}

// Full returns the test binary's shared full sandbox, one cluster and its
// SSH hosts together as `cairn sandbox up` starts them (with three external
// etcd hosts, etcd0..etcd2): in netns mode the
// control plane runs on cp0 behind the load balancer, and cp0 holds
// kubeadm's /etc/kubernetes. The KubeEnv has a fresh namespace for t.
func Full(t testing.TB) (*KubeEnv, *SSHEnv) {
	t.Helper()
	requireMain(t)
	shared.fullOnce.Do(func() {
		shared.full, shared.fullErr = shared.start(sandbox.Options{EtcdHosts: 3})
	})
	if shared.fullErr != nil {
		unavailable(t, "the full sandbox (cluster, load balancer and SSH hosts)", shared.fullErr)
	}
	return kubeEnvFor(t, shared.full), &SSHEnv{Inventory: shared.full.Inventory(), InventoryPath: shared.full.Dir() + "/inventory.json"}
}

// kubeEnvFor makes clients for sb's cluster and a namespace for t.
func kubeEnvFor(t testing.TB, sb *sandbox.Sandbox) *KubeEnv {
	t.Helper()
	info := sb.Kube()
	cfg, err := clientcmd.BuildConfigFromFlags("", info.Kubeconfig)
	if err != nil {
		t.Fatalf("testrig: load kubeconfig %s: %v", info.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 30 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("testrig: client: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("testrig: dynamic client: %v", err)
	}
	ns := "t-" + testName(t, 40) + "-" + randSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{"cairn.dev/test": "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testrig: create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// Deletion finishes in the background (the controller manager's
		// namespace controller); the cluster goes away with the binary.
		bg := metav1.DeletePropagationBackground
		err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testrig: delete namespace %s: %v", ns, err)
		}
	})
	return &KubeEnv{
		Kubeconfig: info.Kubeconfig,
		Context:    info.Context,
		Server:     info.Server,
		Namespace:  ns,
		Config:     cfg,
		Client:     client,
		Dynamic:    dyn,
		Sandbox:    sb,
	}
}

// Kubectl runs kubectl against the cluster, in the test's namespace, with
// stdin (may be empty), and returns its standard output. It fails t if
// kubectl fails or is missing.
func (k *KubeEnv) Kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := k.KubectlErr(t, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KubectlErr is Kubectl returning the error instead of failing t.
func (k *KubeEnv) KubectlErr(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	path, err := exec.LookPath("kubectl")
	if err != nil {
		unavailable(t, "kubectl", &sandbox.MissingError{Name: "kubectl", Where: "PATH", Install: "apt-get install -y kubectl (or a kubectl binary on PATH)"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := append([]string{"--kubeconfig=" + k.Kubeconfig, "--context=" + k.Context, "--namespace=" + k.Namespace}, args...)
	cmd := exec.CommandContext(ctx, path, full...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+k.Kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Own starts a sandbox of t's own with opts (a cluster and SSH hosts, as
// `cairn sandbox up` starts them), stopped at t's cleanup: for a test that
// changes its hosts in ways no other test should see (a Cilium agent's
// datapath in their network namespaces). The KubeEnv has a fresh
// namespace for t.
func Own(t testing.TB, opts sandbox.Options) (*KubeEnv, *SSHEnv) {
	t.Helper()
	requireMain(t)
	opts.StateDir = t.TempDir() + "/sandbox"
	opts.DieWithParent = true
	if os.Getenv("CAIRN_RIG_VERBOSE") != "" {
		opts.Progress = func(msg string) { fmt.Fprintln(os.Stderr, "testrig:", msg) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	sb, err := sandbox.Up(ctx, opts)
	if err != nil {
		unavailable(t, "a sandbox of the test's own", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := sb.Down(ctx); err != nil {
			t.Errorf("testrig: stopping the test's sandbox: %v", err)
		}
	})
	return kubeEnvFor(t, sb), &SSHEnv{Inventory: sb.Inventory(), InventoryPath: sb.Dir() + "/inventory.json"}
}
