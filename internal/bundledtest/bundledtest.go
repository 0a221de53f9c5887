// Package bundledtest holds the tests of the bundled runbooks and what
// they share across packages: its own tests (package bundledtest_test) run
// the runbooks' blocks through the executor against the sandbox's servers,
// cmd/cairn/nodetest runs them with the cairn binary on sandbox
// nodes. It reads the runbooks, reads `cairn run`'s progress lines, and
// plays the parts a test plays in more than one place: the administrator's
// ssh-agent and shell, and a cloud provider's RBAC for its
// cloud-controller-manager.
package bundledtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	_ "github.com/cairn-dev/cairn/lint" // the bundled runbooks pass the content lints too
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// ContentDir is the repository's content directory, found from this
// file's place in the source tree, so tests of any package can name it.
func ContentDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "content")
}

// Path is the path of the bundled runbook file (a name in content/).
func Path(file string) string { return filepath.Join(ContentDir(), file) }

// Parse parses the bundled runbook file.
func Parse(t testing.TB, file string) *runbook.Runbook {
	t.Helper()
	path := Path(file)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse(path, src)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return rb
}

// Ctx is a context that ends with t (or after d).
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// NeedSandboxBins skips (fails under CI) without the server binaries and
// the extra ones named (sandbox.BinKCMN, ...).
func NeedSandboxBins(t testing.TB, extra ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a sandbox")
	}
	err := sandbox.CheckBins(sandbox.BinDir())
	for _, b := range extra {
		if _, serr := os.Stat(filepath.Join(sandbox.BinDir(), b)); serr != nil && err == nil {
			err = fmt.Errorf("%s not built (scripts/sandbox-bins.sh): %w", b, serr)
		}
	}
	if err != nil {
		if testrig.InCI() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

var (
	blockLine  = regexp.MustCompile(`^\[\d+/\d+\] (\S+)`)
	resultLine = regexp.MustCompile(`^  (✓ verified|✗ [a-z]+)`)
)

// Outcomes reads `cairn run`'s (and the exported script's) progress lines:
// block id → "✓ verified" or "✗ failed" …, in order.
func Outcomes(out string) []string {
	var res []string
	cur := ""
	for _, l := range strings.Split(out, "\n") {
		if m := blockLine.FindStringSubmatch(l); m != nil {
			cur = m[1]
		}
		if m := resultLine.FindStringSubmatch(l); m != nil && cur != "" {
			res = append(res, cur+" "+m[1])
			cur = ""
		}
	}
	return res
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// StartAdminAgent starts the administrator's ssh-agent (a real one, on its
// own socket, killed at the end) holding the key identity, and returns the
// environment that reaches it.
func StartAdminAgent(t testing.TB, identity string) []string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	env := append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if !WaitForFile(sock, 5*time.Second) {
		t.Fatal("ssh-agent made no socket")
	}
	add := exec.Command("ssh-add", identity)
	add.Env = env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
	return env
}

// RunAsAdmin runs script in a root shell on host reached with ssh -A (the
// agent in env forwarded, as the kubeadm runbook's scp path has the
// administrator do), with the scp path's parameters exported.
func RunAsAdmin(ctx context.Context, inv *sandbox.Inventory, env []string, host, script string, params map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, k := range []string{"CONTROL_PLANE_HOSTS", "COPY_USER", "ETCD_TOPOLOGY"} {
		fmt.Fprintf(&b, "export %s=%s\n", k, runbook.ShellQuote(params[k]))
	}
	b.WriteString(script)
	cmd := exec.CommandContext(ctx, "ssh", "-A", "-F", inv.SSHConfig, host, "sudo -E -s")
	cmd.Env = env
	cmd.Stdin = strings.NewReader(b.String())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WaitForFile reports whether path exists within limit.
func WaitForFile(path string, limit time.Duration) bool {
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
	}
	return false
}

// The leader-migration runbook's names: the user a provider's CCM
// authenticates as (client certificates from the cluster CA), the lease
// Leader Migration holds, and the cloud controllers that move.
const (
	CCMUser        = "cloud-controller-manager"
	MigrationLease = "cloud-provider-extraction-migration"
)

// CloudControllers are the controllers that move from KCM to the CCM.
var CloudControllers = []string{"service-lb-controller", "node-route-controller", "cloud-node-lifecycle-controller"}

// StartedRe matches either manager's log line for starting controller c
// (KCM: "Starting controller" controller="c"; the CCM: Starting "c").
func StartedRe(c string) *regexp.Regexp {
	return regexp.MustCompile(`"Start(ing|ed) controller" controller="` + c + `"|Start(ing|ed) "` + c + `"`)
}

// ProviderRBAC plays what a cloud provider's RBAC manifest gives its CCM
// (the user CCMUser): read access, events, delegated authn/authz, and a
// leader-locking Role in kube-system for its own lease only, named as the
// runbook's CCM_LEADER_ROLE default. Removed at cleanup.
func ProviderRBAC(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	ctx := Ctx(t, time.Minute)
	rbac := client.RbacV1()
	subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: CCMUser}}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cairn-test:cloud-controller-manager"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status", "services/status"}, Verbs: []string{"patch", "update"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "system::leader-locking-cloud-controller-manager", Namespace: "kube-system"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"cloud-controller-manager"}, Verbs: []string{"get", "update"}},
	}}
	if _, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name}, Subjects: subj,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), cr.Name, metav1.DeleteOptions{}) })
	if _, err := rbac.Roles("kube-system").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.Roles("kube-system").Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	for _, rb := range []*rbacv1.RoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "cairn-test:ccm-leader-locking"}, Subjects: subj, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cairn-test:ccm-authentication-reader"}, Subjects: subj, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}},
	} {
		if _, err := rbac.RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = rbac.RoleBindings("kube-system").Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
		})
	}
}
