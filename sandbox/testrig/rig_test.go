package testrig_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pkg/sftp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestClientGoReachesAPIServer(t *testing.T) {
	k := testrig.Kube(t)
	v, err := k.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != sandbox.KubeVersion {
		t.Errorf("server version %q, want %q", v.GitVersion, sandbox.KubeVersion)
	}
	ns, err := k.Client.CoreV1().Namespaces().Get(ctxT(t, 10*time.Second), k.Namespace, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get own namespace: %v", err)
	}
	if ns.Labels["cairn.dev/test"] != "true" {
		t.Errorf("namespace labels %v", ns.Labels)
	}
}

func TestKubectlReachesAPIServer(t *testing.T) {
	k := testrig.Kube(t)
	if out := k.Kubectl(t, "", "get", "namespace", k.Namespace, "-o", "name"); strings.TrimSpace(out) != "namespace/"+k.Namespace {
		t.Errorf("kubectl get namespace: %q", out)
	}
	// The kubeconfig alone, as a reader would use it.
	out, err := exec.Command("kubectl", "--kubeconfig", k.Kubeconfig, "config", "current-context").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != sandbox.ContextName {
		t.Errorf("current-context %q, want %q", got, sandbox.ContextName)
	}
	if out := k.Kubectl(t, "", "auth", "can-i", "create", "pods"); strings.TrimSpace(out) != "yes" {
		t.Errorf("kubectl auth can-i create pods: %q", out)
	}
}

// The controller manager runs: it gives every namespace a default
// ServiceAccount.
func TestDefaultServiceAccount(t *testing.T) {
	k := testrig.Kube(t)
	err := wait.PollUntilContextTimeout(ctxT(t, 40*time.Second), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := k.Client.CoreV1().ServiceAccounts(k.Namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no default ServiceAccount in %s: %v", k.Namespace, err)
	}
}

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.rig.cairn.dev
spec:
  group: rig.cairn.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`

func TestCRDBecomesEstablished(t *testing.T) {
	k := testrig.Kube(t)
	k.Kubectl(t, crdYAML, "apply", "-f", "-")
	t.Cleanup(func() { k.KubectlErr(t, "", "delete", "crd", "widgets.rig.cairn.dev", "--wait=false") })
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	err := wait.PollUntilContextTimeout(ctxT(t, 40*time.Second), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := k.Dynamic.Resource(crds).Get(ctx, "widgets.rig.cairn.dev", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructuredSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD not Established: %v", err)
	}
	// A custom resource of the new kind can be created and read back.
	k.Kubectl(t, "apiVersion: rig.cairn.dev/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n", "apply", "-f", "-")
	if out := k.Kubectl(t, "", "get", "widget", "w1", "-o", "jsonpath={.spec.size}"); out != "3" {
		t.Errorf("widget size %q, want 3", out)
	}
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func TestRoleCanBePatched(t *testing.T) {
	k := testrig.Kube(t)
	ctx := ctxT(t, 30*time.Second)
	roles := k.Client.RbacV1().Roles(k.Namespace)
	_, err := roles.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A JSON patch through kubectl ...
	k.Kubectl(t, "", "patch", "role", "reader", "--type=json", `-p=[{"op":"add","path":"/rules/0/verbs/-","value":"list"}]`)
	// ... and a merge patch through client-go.
	patch := `{"rules":[{"apiGroups":[""],"resources":["pods","configmaps"],"verbs":["get","list","watch"]}]}`
	if _, err := roles.Patch(ctx, "reader", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := roles.Get(ctx, "reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Rules[0].Resources, r.Rules[0].Verbs); got != "[pods configmaps] [get list watch]" {
		t.Errorf("rules after patch: %s", got)
	}
}

// Namespace deletion needs the controller manager's namespace controller.
func TestNamespaceDeletionCompletes(t *testing.T) {
	k := testrig.Kube(t)
	ctx := ctxT(t, 90*time.Second)
	k.Kubectl(t, "", "create", "configmap", "c1", "--from-literal=a=b")
	if err := k.Client.CoreV1().Namespaces().Delete(ctx, k.Namespace, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := k.Client.CoreV1().Namespaces().Get(ctx, k.Namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not gone after 60s: %v", k.Namespace, err)
	}
}

func TestSSHHostsAnswerWithOwnHostnames(t *testing.T) {
	e := testrig.SSH(t)
	if len(e.Inventory.Hosts) != 4 {
		t.Fatalf("%d hosts, want 4", len(e.Inventory.Hosts))
	}
	for _, h := range e.Inventory.Hosts {
		if got := strings.TrimSpace(e.Run(t, h.Name, "hostname")); got != h.Name {
			t.Errorf("host %s says hostname %q", h.Name, got)
		}
	}
	if got := fmt.Sprint(e.Inventory.Groups[sandbox.GroupControlPlane], e.Inventory.Groups[sandbox.GroupWorkers]); got != "[cp0 cp1 cp2] [w0]" {
		t.Errorf("groups: %s", got)
	}
	// OpenSSH's client with the generated ssh_config and known_hosts.
	ssh, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no ssh client: apt-get install -y openssh-client")
	}
	ctx := ctxT(t, 20*time.Second)
	// Standard output only: the user's shell start-up files run on the
	// hosts too (bash reads ~/.bashrc under sshd), and whatever they print
	// on stderr (here: pyenv losing a rehash race to a parallel login) is
	// not the hostname's business.
	cmd := exec.CommandContext(ctx, ssh, "-F", e.Inventory.SSHConfig, "-o", "BatchMode=yes", "w0", "hostname")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "w0" {
		t.Errorf("ssh -F config w0 hostname: %v: %q (stderr %q)", err, out, stderr.String())
	}
	// The inventory file on disk says the same as the one in memory.
	b, err := os.ReadFile(e.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	var inv sandbox.Inventory
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	if inv.KnownHosts != e.Inventory.KnownHosts || len(inv.Hosts) != 4 {
		t.Errorf("inventory.json differs: %+v", inv)
	}
}

func TestHostsReachEachOther(t *testing.T) {
	e := testrig.SSH(t)
	if e.Inventory.Mode != sandbox.NetworkNamespaces {
		t.Skip("hosts share loopback in loopback mode")
	}
	w0, _ := e.Inventory.Host("w0")
	// cp0 reaches w0's sshd across the bridge (bash's /dev/tcp needs no tool).
	out := e.Run(t, "cp0", fmt.Sprintf(`timeout 5 bash -c 'exec 3<>/dev/tcp/%s/22; head -c 4 <&3'`, w0.Address))
	if out != "SSH-" {
		t.Errorf("cp0 -> w0:22 read %q", out)
	}
}

func TestSFTPWorks(t *testing.T) {
	e := testrig.SSH(t)
	c := e.Dial(t, "cp1")
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	path := filepath.Join(t.TempDir(), "hello.txt")
	f, err := sc.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("hello from sftp\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := e.Run(t, "cp1", "cat "+path); got != "hello from sftp\n" {
		t.Errorf("cat over ssh: %q", got)
	}
	r, err := sc.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	if string(b) != "hello from sftp\n" {
		t.Errorf("read back over sftp: %q", b)
	}
}

func TestChangedHostKeyIsRefused(t *testing.T) {
	e := testrig.SSH(t)
	cp0, _ := e.Inventory.Host("cp0")
	cp1, _ := e.Inventory.Host("cp1")
	// A known_hosts that lists cp1's key for cp0's address.
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(cp0.KnownAs+" "+cp1.HostKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := e.Inventory.ClientConfigWithKnownHosts(kh)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Inventory.Dial(ctxT(t, 10*time.Second), "cp0", cfg)
	if err == nil {
		c.Close()
		t.Fatal("dial with a changed host key succeeded")
	}
	if !sandbox.IsHostKeyChanged(err) {
		t.Errorf("error is not a host key mismatch: %v", err)
	}
	// OpenSSH refuses too.
	ssh, lerr := exec.LookPath("ssh")
	if lerr != nil {
		return
	}
	out, err := exec.CommandContext(ctxT(t, 20*time.Second), ssh, "-F", e.Inventory.SSHConfig,
		"-o", "UserKnownHostsFile="+kh, "-o", "BatchMode=yes", "cp0", "true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "REMOTE HOST IDENTIFICATION HAS CHANGED") {
		t.Errorf("ssh with a changed key: err %v, output %q", err, out)
	}
}

func TestBrowserRendersLocalPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>rig</title><p id="p">hello</p><script>document.getElementById("p").textContent += " world"</script>`)
	}))
	defer srv.Close()
	ctx := testrig.Browser(t)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#p")))
	if err != nil {
		t.Fatal(err)
	}
	if title != "rig" || text != "hello world" {
		t.Errorf("title %q, text %q", title, text)
	}
}

// TestOfflineBrowser: the offline browser renders a file:// page, and cannot
// reach a server on this machine's loopback.
func TestOfflineBrowser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") }))
	defer srv.Close()
	page := filepath.Join(t.TempDir(), "p.html")
	os.WriteFile(page, []byte(`<title>offline</title><p id=x>from a file</p>`), 0o644)
	ctx := testrig.OfflineBrowser(t)
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(tctx, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.getElementById("x").textContent`))
	if err != nil || text != "from a file" {
		t.Fatalf("page text %q, %v", text, err)
	}
	got, err := chromedp.Run(tctx, chromedp.Evaluate[string](`fetch(`+"`"+srv.URL+"`"+`).then(r => r.text()).catch(e => "failed: " + e)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "failed") {
		t.Fatalf("the offline browser reached %s: %q", srv.URL, got)
	}
}
