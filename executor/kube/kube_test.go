package kube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }

// sink collects a run's output.
type sink struct {
	mu     sync.Mutex
	b      bytes.Buffer
	events []executor.Event
}

func (s *sink) Output(_ string, p []byte) { s.mu.Lock(); s.b.Write(p); s.mu.Unlock() }
func (s *sink) Event(ev executor.Event) {
	s.mu.Lock()
	s.events = append(s.events, ev)
	s.mu.Unlock()
}
func (s *sink) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// loadRunbook parses the test runbook: the blocks under test come from the
// model, as the engine's do.
func loadRunbook(t *testing.T, name string) *runbook.Runbook {
	t.Helper()
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse(name, src)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return rb
}

type env struct {
	t  *testing.T
	k  *testrig.KubeEnv
	r  *kube.Runner
	rb *runbook.Runbook
	// vars are the parameter values every block gets.
	vars map[string]string
}

func setup(t *testing.T, cfg kube.Config) *env {
	t.Helper()
	k := testrig.Kube(t)
	cfg.Kubeconfig = k.Kubeconfig
	r, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rb := loadRunbook(t, "testdata/kube-runner.md")
	vars := map[string]string{}
	for _, p := range rb.Params {
		vars[p.Name] = p.Default
	}
	vars["NS"] = k.Namespace
	return &env{t: t, k: k, r: r, rb: rb, vars: vars}
}

// run runs block id with the block's own timeout, as the engine does.
func (e *env) run(id string, extra ...string) (executor.HostResult, string) {
	e.t.Helper()
	return e.runCtx(context.Background(), id, extra...)
}

func (e *env) runCtx(parent context.Context, id string, extra ...string) (executor.HostResult, string) {
	e.t.Helper()
	b := e.rb.BlockByID(id)
	if b == nil {
		e.t.Fatalf("no block %q", id)
	}
	vars := map[string]string{}
	for k, v := range e.vars {
		vars[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	ctx, cancel := context.WithTimeout(parent, b.Timeout)
	defer cancel()
	var out sink
	res, err := e.r.Run(ctx, &executor.Job{Runbook: e.rb, Block: b, Env: vars, RunID: "t"}, &out)
	if err != nil || len(res) != 1 {
		e.t.Fatalf("%s: Run = %v, %v", id, res, err)
	}
	return res[0], out.String()
}

// mustRun runs id and fails the test unless it exits 0 with no error.
func (e *env) mustRun(id string, extra ...string) (executor.HostResult, string) {
	e.t.Helper()
	res, out := e.run(id, extra...)
	if res.Exit != 0 || res.Err != nil {
		e.t.Fatalf("%s: exit %d, err %v\n%s", id, res.Exit, res.Err, out)
	}
	return res, out
}

// verify checks the block's own expectations with the engine's verifier.
func (e *env) verify(id string, res executor.HostResult, out string) {
	e.t.Helper()
	b := e.rb.BlockByID(id)
	v := executor.Verify(b, []executor.HostResult{res}, map[string]string{res.Host: out}, kube.Checker{})
	if !v.OK {
		e.t.Errorf("%s: not verified: %v\n%s", id, v.Reasons, out)
	}
}

// ciliumCRDs installs Cilium's own CiliumNode and CiliumPodIPPool CRDs (the
// files of the cilium module scripts/sandbox-bins.sh copies), then the
// default pool and cilium-config of the testdata.
func (e *env) ciliumCRDs() {
	e.t.Helper()
	for _, c := range [][2]string{{"v2", "ciliumnodes"}, {"v2alpha1", "ciliumpodippools"}} {
		path := sandbox.CiliumCRD(sandbox.BinDir(), c[0], c[1])
		y, err := os.ReadFile(path)
		if err != nil {
			if testrig.InCI() {
				e.t.Fatalf("Cilium's CRDs: %v (scripts/sandbox-bins.sh copies them)", err)
			}
			e.t.Skipf("Cilium's CRDs: %v (run scripts/sandbox-bins.sh)", err)
		}
		e.k.Kubectl(e.t, string(y), "apply", "--server-side", "--force-conflicts", "-f", "-")
		e.k.Kubectl(e.t, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+c[1]+".cilium.io")
	}
	e.mustRun("apply-pool")
}

var (
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	nodeGVR = schema.GroupVersionResource{Group: "cilium.io", Version: "v2", Resource: "ciliumnodes"}
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// noWatchesLeft fails t if a watch or a goroutine of this package outlives
// the runs (allowing a moment for closed streams to return).
func noWatchesLeft(t *testing.T) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); ; {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		leak := false
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "watch.(*StreamWatcher)") || strings.Contains(g, "cairn/executor/kube.") {
				leak = true
			}
		}
		if !leak {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("goroutines left behind:\n%s", stacks)
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

// A CRD and a custom resource of it in the same manifest, with discovery
// already cached from an earlier block: the runner must notice the new kind.
func TestApplyCRDAndCustomResourceInOneManifest(t *testing.T) {
	e := setup(t, kube.Config{})
	group := "t" + strings.ReplaceAll(strings.TrimPrefix(e.k.Namespace, "t-"), "-", "") + ".cilium.test"
	res, out := e.mustRun("get-ns") // warms discovery before the CRD exists
	if strings.TrimSpace(out) != e.k.Namespace || len(res.Objects) != 1 {
		t.Fatalf("get-ns: %q %v", out, res.Objects)
	}

	start := time.Now()
	res, out = e.mustRun("apply-crds", "GROUP", group, "POOL_CIDR", "10.20.0.0/16")
	t.Logf("apply of 2 CRDs + CR + ConfigMap: %s", time.Since(start))
	want := []string{
		"customresourcedefinition.apiextensions.k8s.io/ciliumpodippools." + group + " serverside-applied",
		"customresourcedefinition.apiextensions.k8s.io/ciliumnodes." + group + " serverside-applied",
		"ciliumpodippool." + group + "/default serverside-applied",
		"configmap/cilium-config serverside-applied",
	}
	if got := lines(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	if res.Host != "cairn-sandbox" || len(res.Objects) != 4 {
		t.Errorf("host %q, %d objects", res.Host, len(res.Objects))
	}
	pool, err := e.k.Dynamic.Resource(schema.GroupVersionResource{Group: group, Version: "v2alpha1", Resource: "ciliumpodippools"}).
		Get(ctxT(t, 10*time.Second), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the custom resource was not created: %v", err)
	}
	if cidrs, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "ipv4", "cidrs"); len(cidrs) != 1 || cidrs[0] != "10.20.0.0/16" {
		t.Errorf("pool cidrs %v: the parameter was not substituted", cidrs)
	}
	if len(pool.GetManagedFields()) == 0 || pool.GetManagedFields()[0].Manager != "cairn" {
		t.Errorf("managed fields %v, want manager cairn", pool.GetManagedFields())
	}
	cm, err := e.k.Client.CoreV1().ConfigMaps(e.k.Namespace).Get(ctxT(t, 10*time.Second), "cilium-config", metav1.GetOptions{})
	if err != nil || cm.Data["ipam"] != "multi-pool" {
		t.Errorf("configmap in the block's namespace: %v %v", cm, err)
	}
	// Returned objects are plain JSON maps, without managedFields.
	obj, ok := res.Objects[2].(map[string]any)
	if !ok {
		t.Fatalf("object is %T", res.Objects[2])
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(obj, "metadata", "managedFields"); found {
		t.Error("managedFields in the returned object")
	}
	if ok, why := kube.CheckJSONPath(res.Objects[2:3], runbook.JSONPathCheck{Path: "{.spec.ipv4.cidrs[0]}", Op: "=", Value: "10.20.0.0/16"}); !ok {
		t.Error(why)
	}

	// Applying again changes nothing and still succeeds.
	if _, out := e.mustRun("apply-crds", "GROUP", group, "POOL_CIDR", "10.20.0.0/16"); len(lines(out)) != 4 {
		t.Errorf("second apply: %q", out)
	}
	// Delete the CRDs and apply it all again with the same runner: its
	// discovery still knows the kind from before the CRD went away.
	crds := []string{"ciliumpodippools." + group, "ciliumnodes." + group}
	for _, n := range crds {
		if err := e.k.Dynamic.Resource(crdGVR).Delete(ctxT(t, 10*time.Second), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctxT(t, 40*time.Second), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.k.Dynamic.Resource(crdGVR).Get(ctx, crds[0], metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("CRD not deleted: %v", err)
	}
	start = time.Now()
	if _, out := e.mustRun("apply-crds", "GROUP", group, "POOL_CIDR", "10.20.0.0/16"); len(lines(out)) != 4 {
		t.Errorf("apply after the CRDs were deleted: %q", out)
	}
	t.Logf("apply after deleting the CRDs: %s", time.Since(start))
	t.Cleanup(func() {
		for _, n := range crds {
			_ = e.k.Dynamic.Resource(crdGVR).Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
}

// API warnings reach the run's output, as kubectl prints them.
func TestApplyWarnings(t *testing.T) {
	e := setup(t, kube.Config{})
	b := *e.rb.BlockByID("apply-web")
	b.Content = "apiVersion: v1\nkind: Pod\nmetadata: {name: warned}\nspec:\n  nodeSelector: {beta.kubernetes.io/arch: amd64}\n  containers: [{name: a, image: pause}]\n"
	var out sink
	res, _ := e.r.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: e.rb, Block: &b, Env: e.vars}, &out)
	t.Logf("exit %d err %v\n%s", res[0].Exit, res[0].Err, out.String())
	if res[0].Exit != 0 || !strings.Contains(out.String(), "Warning: spec.nodeSelector[beta.kubernetes.io/arch]: deprecated") {
		t.Errorf("no warning in the output: %q", out.String())
	}
}

func TestApplyErrors(t *testing.T) {
	e := setup(t, kube.Config{CRDWait: 2 * time.Second})
	for _, tc := range []struct{ body, want string }{
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: x-}\n", "needs metadata.name"},
		{"kind: ConfigMap\nmetadata: {name: x}\n", "needs apiVersion and kind"},
		{"apiVersion: nothere.cairn.test/v1\nkind: Gadget\nmetadata: {name: x}\n", "does not serve Gadget in nothere.cairn.test/v1"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: elsewhere}\n", `is in namespace "elsewhere" but the block says namespace=`},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: [1]}\n", "apply configmap/x"},
		{"a: [\n", "manifest document 1"},
	} {
		b := *e.rb.BlockByID("apply-web")
		b.Content = tc.body
		var out sink
		res, _ := e.r.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: e.rb, Block: &b, Env: e.vars}, &out)
		wantExit := 1
		if strings.HasPrefix(tc.want, "manifest document") {
			wantExit = -1 // refused before anything was sent
		}
		if res[0].Exit != wantExit || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), tc.want) {
			t.Errorf("%q: exit %d err %v, want %q", tc.body, res[0].Exit, res[0].Err, tc.want)
		}
		if !strings.Contains(out.String(), "error: ") {
			t.Errorf("%q: the error is not in the output: %q", tc.body, out.String())
		}
	}
}

// A run whose deadline has passed does nothing and says it timed out.
func TestExpiredContext(t *testing.T) {
	e := setup(t, kube.Config{})
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	var out sink
	res, _ := e.r.Run(ctx, &executor.Job{Runbook: e.rb, Block: e.rb.BlockByID("apply-cms"), Env: e.vars}, &out)
	if res[0].Exit != -1 || !errors.Is(res[0].Err, executor.ErrTimeout) {
		t.Errorf("expired context: exit %d err %v\n%s", res[0].Exit, res[0].Err, out.String())
	}
	if l, _ := e.k.Client.CoreV1().ConfigMaps(e.k.Namespace).List(ctxT(t, 10*time.Second), metav1.ListOptions{LabelSelector: "tier"}); len(l.Items) != 0 {
		t.Error("a run with an expired context created objects")
	}
}

func TestGet(t *testing.T) {
	e := setup(t, kube.Config{})
	e.ciliumCRDs()
	e.mustRun("apply-web")

	res, out := e.mustRun("get-web-replicas")
	if out != "1\n" {
		t.Errorf("jsonpath projection %q", out)
	}
	e.verify("get-web-replicas", res, out)
	obj, ok := res.Objects[0].(map[string]any)
	if !ok || obj["kind"] != "Deployment" {
		t.Fatalf("objects %T %v", res.Objects[0], res.Objects)
	}
	vals, missing := executor.Capture(e.rb.BlockByID("get-web-replicas"), out, res.Objects, kube.Checker{})
	if len(missing) > 0 || vals["WEB_UID"] == "" || vals["WEB_UID"] != obj["metadata"].(map[string]any)["uid"] {
		t.Errorf("capture: %v %v", vals, missing)
	}

	res, out = e.mustRun("get-web-short") // short name, label selector, list projection
	if out != "web\n" || len(res.Objects) != 1 {
		t.Errorf("get kind=deploy selector: %q, %d objects", out, len(res.Objects))
	}
	e.verify("get-web-short", res, out)

	_, out = e.mustRun("get-web-yaml")
	for _, s := range []string{"apiVersion: apps/v1\n", "kind: Deployment\n", "  name: web\n", "  replicas: 1\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("YAML lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "managedFields") {
		t.Error("YAML shows managedFields")
	}

	res, out = e.mustRun("get-config-by-field")
	if out != "multi-pool\n" {
		t.Errorf("field selector projection: %q", out)
	}
	e.verify("get-config-by-field", res, out)

	res, out = e.mustRun("get-pool") // cluster-scoped custom resource, as YAML
	if !strings.Contains(out, "kind: CiliumPodIPPool") {
		t.Errorf("get-pool: %s", out)
	}
	e.verify("get-pool", res, out)

	res, out = e.run("get-missing")
	if res.Exit != 1 || !apierrors.IsNotFound(res.Err) || !strings.Contains(out, `configmaps "nope" not found`) {
		t.Errorf("get-missing: exit %d err %v out %q", res.Exit, res.Err, out)
	}

	// An unknown kind is a clear error.
	b := *e.rb.BlockByID("get-web-yaml")
	b.Kind = "gizmos.nothere.cairn.test"
	var s sink
	rs, _ := e.r.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: e.rb, Block: &b, Env: e.vars}, &s)
	if rs[0].Exit != 1 || !strings.Contains(fmt.Sprint(rs[0].Err), `doesn't have a resource type "gizmos.nothere.cairn.test"`) {
		t.Errorf("unknown kind: %+v", rs[0])
	}
}

// The CCM runbook's Lease RBAC patch, both ways, on a real Role; strategic
// merge on a ConfigMap; and the merge fallback for a custom resource.
func TestPatch(t *testing.T) {
	e := setup(t, kube.Config{})
	e.ciliumCRDs()
	e.mustRun("apply-role")
	roles := e.k.Client.RbacV1().Roles(e.k.Namespace)
	const role = "system::leader-locking-kube-controller-manager"

	_, out := e.mustRun("patch-role-json")
	if out != "role.rbac.authorization.k8s.io/"+role+" patched\n" {
		t.Errorf("patch output %q", out)
	}
	got, err := roles.Get(ctxT(t, 10*time.Second), role, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rules) != 3 || got.Rules[2].Resources[0] != "leases" || got.Rules[2].ResourceNames[0] != "cloud-provider-extraction-migration" ||
		got.Rules[0].Resources[0] != "configmaps" {
		t.Errorf("after the JSON patch: %+v", got.Rules)
	}
	res, out := e.mustRun("get-role")
	if out != "configmaps configmaps leases\n" {
		t.Errorf("get-role: %q", out)
	}
	e.verify("get-role", res, out)

	e.mustRun("patch-role-merge") // the merge patch replaces the list
	got, _ = roles.Get(ctxT(t, 10*time.Second), role, metav1.GetOptions{})
	if len(got.Rules) != 1 || got.Rules[0].Resources[0] != "leases" || len(got.Rules[0].Verbs) != 4 {
		t.Errorf("after the merge patch: %+v", got.Rules)
	}
	if _, out := e.mustRun("patch-role-merge"); !strings.HasSuffix(out, " patched (no change)\n") {
		t.Errorf("repeated patch: %q", out)
	}

	_, out = e.mustRun("patch-config") // strategic (default), YAML body
	cm, _ := e.k.Client.CoreV1().ConfigMaps(e.k.Namespace).Get(ctxT(t, 10*time.Second), "cilium-config", metav1.GetOptions{})
	if cm.Data["ipam"] != "multi-pool" || cm.Data["enable-cluster-pool-to-multi-pool-migration"] != "true" {
		t.Errorf("strategic patch: %v\n%s", cm.Data, out)
	}

	res, out = e.mustRun("patch-pool")
	if !strings.Contains(out, "does not support strategic merge patch") || !strings.Contains(out, "ciliumpodippool.cilium.io/default patched") {
		t.Errorf("custom resource patch: %q", out)
	}
	if ok, why := kube.CheckJSONPath(res.Objects, runbook.JSONPathCheck{Path: "{.metadata.labels.pool}", Op: "=", Value: "default"}); !ok {
		t.Error(why)
	}

	// A malformed JSON patch is refused before it is sent.
	b := *e.rb.BlockByID("patch-role-json")
	b.Content = `{"op": "add"}`
	var s sink
	rs, _ := e.r.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: e.rb, Block: &b, Env: e.vars}, &s)
	if rs[0].Exit != 1 || !strings.Contains(fmt.Sprint(rs[0].Err), "needs a JSON Patch") {
		t.Errorf("bad JSON patch: %+v", rs[0])
	}
}

func TestScaleAndWaitCondition(t *testing.T) {
	e := setup(t, kube.Config{})
	e.mustRun("apply-web")
	deploys := e.k.Client.AppsV1().Deployments(e.k.Namespace)

	res, out := e.mustRun("scale-web", "REPLICAS", "3")
	if out != "deployment.apps/web scaled\n" {
		t.Errorf("scale output %q", out)
	}
	d, err := deploys.Get(ctxT(t, 10*time.Second), "web", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("spec.replicas after scale: %v %v", d, err)
	}
	if ok, why := kube.CheckJSONPath(res.Objects, runbook.JSONPathCheck{Path: "{.spec.replicas}", Op: "=", Value: "3"}); !ok {
		t.Errorf("scale object: %s", why)
	}

	// No nodes: the Deployment never becomes Available with replicas > 0.
	err = wait.PollUntilContextTimeout(ctxT(t, 30*time.Second), 100*time.Millisecond, 25*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := deploys.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == "Available" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the controller manager never set Available: %v", err)
	}
	start := time.Now()
	res, out = e.run("wait-web-available-short")
	want := fmt.Sprintf("expected deployment.apps/web in namespace %s to satisfy condition=Available; it has Available=False (MinimumReplicasUnavailable)", e.k.Namespace)
	if res.Exit != 1 || res.Err == nil || res.Err.Error() != want || !errors.Is(res.Err, executor.ErrTimeout) {
		t.Errorf("wait on an unavailable deployment: exit %d err %v\nwant %s", res.Exit, res.Err, want)
	}
	if !strings.Contains(out, "error: timed out after 2") || !strings.Contains(out, want) {
		t.Errorf("output lacks the reason:\n%s", out)
	}
	if d := time.Since(start); d < 2*time.Second || d > 4*time.Second {
		t.Errorf("the 2s wait took %s", d)
	}

	// Scaled to zero, it is Available.
	e.mustRun("scale-web-zero")
	start = time.Now()
	res, out = e.mustRun("wait-web-available")
	t.Logf("wait for Available after scale to 0: %s", time.Since(start))
	if !strings.HasSuffix(out, "deployment.apps/web condition met\n") || len(res.Objects) != 1 {
		t.Errorf("wait output %q", out)
	}

	// A bad replica count is refused.
	if res, _ := e.run("scale-web", "REPLICAS", "-1"); res.Exit != -1 || !strings.Contains(fmt.Sprint(res.Err), "not a count") {
		t.Errorf("replicas=-1: %+v", res)
	}
	noWatchesLeft(t)
}

func TestDelete(t *testing.T) {
	e := setup(t, kube.Config{})
	e.mustRun("apply-cms")
	cms := e.k.Client.CoreV1().ConfigMaps(e.k.Namespace)

	_, out := e.mustRun("wait-cache") // a wait on a label selector
	if out != "configmap/cache-a condition met\nconfigmap/cache-b condition met\n" {
		t.Errorf("wait with a selector: %q", out)
	}

	res, out := e.mustRun("delete-cache")
	if out != "configmap \"cache-a\" deleted\nconfigmap \"cache-b\" deleted\n" || len(res.Objects) != 2 {
		t.Errorf("delete by selector: %q, %d objects", out, len(res.Objects))
	}
	for _, n := range []string{"cache-a", "cache-b"} {
		if _, err := cms.Get(ctxT(t, 10*time.Second), n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s still there: %v", n, err)
		}
	}
	if _, out := e.mustRun("wait-cache-gone"); out != "every configmaps in namespace "+e.k.Namespace+" with selector tier=cache: none remain\n" {
		t.Errorf("wait for=delete with a selector: %q", out)
	}
	if _, out := e.mustRun("delete-none"); out != "No resources found\n" {
		t.Errorf("delete matching nothing: %q", out)
	}
	if _, out := e.mustRun("delete-keep"); out != "configmap \"keep\" deleted\n" {
		t.Errorf("delete by field selector: %q", out)
	}

	// An object being deleted (held here by a finalizer, as a pod is while
	// it terminates) satisfies no condition, though its fields match.
	if _, out := e.mustRun("wait-doomed-short"); !strings.HasSuffix(out, "configmap/doomed condition met\n") {
		t.Fatalf("wait on doomed: %q", out)
	}
	patch := []byte(`{"metadata":{"finalizers":["cairn.dev/hold"]}}`)
	if _, err := cms.Patch(ctxT(t, 10*time.Second), "doomed", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctxT(t, 10*time.Second), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, out = e.run("wait-doomed-short")
	if res.Exit != 1 || !strings.Contains(fmt.Sprint(res.Err), "it has a deletion in progress") {
		t.Errorf("wait on an object being deleted: exit %d, %v\n%s", res.Exit, res.Err, out)
	}
	if _, err := cms.Patch(ctxT(t, 10*time.Second), "doomed", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, out := e.mustRun("wait-doomed-gone"); out != "configmap/doomed deleted\n" {
		t.Fatalf("doomed after its finalizer went: %q", out)
	}
	if _, err := cms.Create(ctxT(t, 10*time.Second), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "doomed"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A wait for=delete ends when the object goes.
	go func() {
		time.Sleep(700 * time.Millisecond)
		_ = cms.Delete(context.Background(), "doomed", metav1.DeleteOptions{})
	}()
	start := time.Now()
	_, out = e.mustRun("wait-doomed-gone")
	if d := time.Since(start); d < 500*time.Millisecond || !strings.HasSuffix(out, "configmap/doomed deleted\n") {
		t.Errorf("wait for=delete after %s: %q", d, out)
	}
	if _, out := e.mustRun("wait-doomed-gone"); out != "configmap/doomed deleted\n" { // already gone
		t.Errorf("wait for=delete on a missing object: %q", out)
	}
	left, _ := cms.List(ctxT(t, 10*time.Second), metav1.ListOptions{})
	for _, c := range left.Items {
		if c.Name != "kube-root-ca.crt" {
			t.Errorf("left: %s", c.Name)
		}
	}

	// Never everything: a delete without name or selectors is refused.
	b := *e.rb.BlockByID("delete-cache")
	b.Selector = ""
	var s sink
	rs, _ := e.r.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: e.rb, Block: &b, Env: e.vars}, &s)
	if rs[0].Exit != 1 || !strings.Contains(fmt.Sprint(rs[0].Err), "refusing to delete every configmaps") {
		t.Errorf("delete everything: %+v", rs[0])
	}
}

// moveNodes gives each node its pool allocation after delay, one after the
// other, skipping those in skip. It returns a func that waits for it to end.
func moveNodes(t *testing.T, e *env, delay time.Duration, skip ...string) func() {
	t.Helper()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, n := range []string{"kind-control-plane", "kind-worker", "kind-worker2", "kind-worker3"} {
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return
			}
			if contains(skip, n) {
				continue
			}
			u, err := e.k.Dynamic.Resource(nodeGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Errorf("get node %s: %v", n, err)
				return
			}
			cidrs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "ipam", "podCIDRs")
			patch := fmt.Sprintf(`{"spec":{"ipam":{"pools":{"requested":[{"pool":"default","needed":{"ipv4-addrs":16}}],"allocated":[{"pool":"default","cidrs":[%q]}]}}}}`, cidrs[0])
			if _, err := e.k.Dynamic.Resource(nodeGVR).Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("move node %s: %v", n, err)
				return
			}
		}
	}()
	t.Cleanup(cancel)
	return func() { wg.Wait(); cancel() }
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// The Cilium runbook's "wait until every CiliumNode lists its PodCIDR under
// spec.ipam.pools.allocated", with the test moving the nodes over while the
// wait watches; watches expire every second so the wait must re-list.
func TestWaitAllCiliumNodes(t *testing.T) {
	e := setup(t, kube.Config{WatchTimeout: time.Second})
	e.ciliumCRDs()
	res, out := e.mustRun("wait-crd-established") // short name crd
	if out != "customresourcedefinition.apiextensions.k8s.io/ciliumnodes.cilium.io condition met\n" {
		t.Errorf("wait for Established: %q", out)
	}
	t.Cleanup(func() {
		_ = e.k.Dynamic.Resource(nodeGVR).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})

	// No CiliumNode yet: "every" needs at least one.
	if res, _ := e.run("wait-pools-short"); res.Err == nil || res.Err.Error() != "expected every ciliumnodes.cilium.io to satisfy {.spec.ipam.pools.allocated[0].pool}=default; none exist" {
		t.Errorf("wait with no objects: %+v", res)
	}

	e.mustRun("apply-nodes")
	lists0, watches0 := kube.WaitCalls(e.r)
	done := moveNodes(t, e, 600*time.Millisecond)
	start := time.Now()
	res, out = e.run("wait-pools")
	done()
	took := time.Since(start)
	t.Logf("wait for 4 nodes moved 0.6s apart: %s\n%s", took, out)
	if res.Exit != 0 || res.Err != nil {
		t.Fatalf("wait-pools: exit %d err %v\n%s", res.Exit, res.Err, out)
	}
	if took < 2*time.Second {
		t.Errorf("the wait ended after %s, before the last node moved", took)
	}
	lists, watches := kube.WaitCalls(e.r)
	t.Logf("%d lists, %d watches", lists-lists0, watches-watches0)
	if lists-lists0 < 2 || watches-watches0 < 2 {
		t.Errorf("%d lists and %d watches in %s with 1s watches: the wait did not re-list", lists-lists0, watches-watches0, took)
	}
	for _, n := range []string{"kind-control-plane", "kind-worker", "kind-worker2", "kind-worker3"} {
		if !strings.Contains(out, "ciliumnode.cilium.io/"+n+" condition met\n") {
			t.Errorf("no condition met for %s", n)
		}
	}
	if !strings.Contains(out, "waiting: 0 of 4 ciliumnodes.cilium.io satisfy") || !strings.Contains(out, "waiting: 3 of 4 ciliumnodes.cilium.io satisfy") {
		t.Errorf("no progress lines:\n%s", out)
	}
	if len(res.Objects) != 4 {
		t.Errorf("%d objects", len(res.Objects))
	}
	if ok, why := kube.CheckJSONPath(res.Objects, runbook.JSONPathCheck{Path: "{.spec.ipam.pools.allocated[0].cidrs[0]}", Op: "!=", Value: ""}); !ok {
		t.Error(why)
	}
	// The runbook's own form: the list is non-empty.
	if _, out := e.mustRun("wait-pools-allocated"); strings.Count(out, "condition met") != 4 {
		t.Errorf("wait-pools-allocated: %q", out)
	}
	res, out = e.mustRun("get-node", "NODE", "kind-worker2")
	e.verify("get-node", res, out)

	// Back to cluster-pool; kind-worker3 never moves.
	for _, n := range []string{"kind-control-plane", "kind-worker", "kind-worker2", "kind-worker3"} {
		if _, err := e.k.Dynamic.Resource(nodeGVR).Patch(ctxT(t, 10*time.Second), n, types.MergePatchType, []byte(`{"spec":{"ipam":{"pools":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	done = moveNodes(t, e, 300*time.Millisecond, "kind-worker3")
	start = time.Now()
	res, out = e.run("wait-pools-short")
	done()
	want := `expected every ciliumnodes.cilium.io to satisfy {.spec.ipam.pools.allocated[0].pool}=default; 3 of 4 do; kind-worker3 has ""`
	if res.Exit != 1 || res.Err == nil || res.Err.Error() != want || !errors.Is(res.Err, executor.ErrTimeout) {
		t.Errorf("laggard: exit %d err %v\nwant %s", res.Exit, res.Err, want)
	}
	if !strings.Contains(out, want) {
		t.Errorf("the reason is not in the output:\n%s", out)
	}
	if d := time.Since(start); d < 4*time.Second || d > 6*time.Second {
		t.Errorf("the 4s wait took %s", d)
	}
	// The engine's verifier reports it as the failure reason.
	v := executor.Verify(e.rb.BlockByID("wait-pools-short"), []executor.HostResult{res}, map[string]string{res.Host: out}, kube.Checker{})
	if v.OK || len(v.Reasons) != 1 || v.Reasons[0] != want {
		t.Errorf("verdict %+v", v)
	}

	// Cancel (not timeout) ends the wait with exit -1.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	res, _ = e.runCtx(ctx, "wait-pools")
	if res.Exit != -1 || !errors.Is(res.Err, context.Canceled) || res.Err.Error() != "wait: context canceled" {
		t.Errorf("cancelled wait: exit %d err %v", res.Exit, res.Err)
	}
	noWatchesLeft(t)
}

// writeKubeconfig writes a kubeconfig with the sandbox context and a second,
// unreachable one (current), with the CA in a file beside it, referred to by
// a relative path: the pinned copy must embed it.
func writeKubeconfig(t *testing.T, k *testrig.KubeEnv) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(k.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cluster := cfg.Clusters[cfg.Contexts[k.Context].Cluster]
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), cluster.CertificateAuthorityData, 0o600); err != nil {
		t.Fatal(err)
	}
	cluster.CertificateAuthorityData = nil
	cluster.CertificateAuthority = "ca.crt"
	prod := cluster.DeepCopy()
	prod.Server = "https://127.0.0.1:1"
	cfg.Clusters["prod-east"] = prod
	cfg.AuthInfos["prod-admin"] = cfg.AuthInfos[cfg.Contexts[k.Context].AuthInfo].DeepCopy()
	pc := cfg.Contexts[k.Context].DeepCopy()
	pc.Cluster, pc.AuthInfo, pc.Namespace = "prod-east", "prod-admin", "payments"
	cfg.Contexts["prod-east"] = pc
	cfg.CurrentContext = "prod-east"
	path := filepath.Join(dir, "config")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGuard(t *testing.T) {
	k := testrig.Kube(t)
	path := writeKubeconfig(t, k)
	rb := loadRunbook(t, "testdata/kube-runner.md")

	// current-context is prod-east: the runbook does not allow it.
	prod, err := kube.New(kube.Config{Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := prod.Guard(rb)
	if !errors.Is(err, executor.ErrContextRefused) {
		t.Fatalf("guard on prod-east: %v", err)
	}
	if tg.Context != "prod-east" || tg.Cluster != "prod-east" || tg.Server != "https://127.0.0.1:1" || tg.User != "prod-admin" || tg.Namespace != "payments" {
		t.Errorf("target %+v", tg)
	}
	for _, s := range []string{`"prod-east"`, "https://127.0.0.1:1", `["cairn-sandbox", "kind-*"]`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("refusal %q lacks %s", err, s)
		}
	}
	// Run refuses too, before touching anything.
	var out sink
	res, _ := prod.Run(ctxT(t, 10*time.Second), &executor.Job{Runbook: rb, Block: rb.BlockByID("apply-cms"), Env: map[string]string{"NS": k.Namespace}}, &out)
	if res[0].Exit != -1 || !errors.Is(res[0].Err, executor.ErrContextRefused) || res[0].Host != "prod-east" {
		t.Errorf("run on a refused context: %+v", res[0])
	}
	if l, _ := k.Client.CoreV1().ConfigMaps(k.Namespace).List(ctxT(t, 10*time.Second), metav1.ListOptions{LabelSelector: "tier"}); len(l.Items) != 0 {
		t.Error("a refused run created objects")
	}
	if where, err := prod.Where(rb); !errors.Is(err, executor.ErrContextRefused) || !strings.Contains(where, "prod-east") {
		t.Errorf("Where: %q %v", where, err)
	}

	// The sandbox context by name, though it is not current.
	sb, err := kube.New(kube.Config{Kubeconfig: path, Context: "cairn-sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	tg, err = sb.Guard(rb)
	if err != nil || tg.Context != "cairn-sandbox" || tg.Server != k.Server {
		t.Errorf("guard on cairn-sandbox: %+v %v", tg, err)
	}
	for _, tc := range []struct {
		patterns []string
		ok       bool
	}{
		{nil, true},
		{[]string{"cairn-*"}, true},
		{[]string{"kind-*", "cairn-sand?ox"}, true},
		{[]string{"cairn-sandbox-2"}, false},
		{[]string{"[bad"}, false},
		{[]string{"prod-*"}, false},
	} {
		r := &runbook.Runbook{Meta: runbook.Meta{KubeContexts: tc.patterns}}
		if _, err := sb.Guard(r); (err == nil) != tc.ok {
			t.Errorf("patterns %q: %v", tc.patterns, err)
		}
	}
	var s sink
	res, _ = sb.Run(ctxT(t, 20*time.Second), &executor.Job{Runbook: rb, Block: rb.BlockByID("get-ns"), Env: map[string]string{"NS": k.Namespace}}, &s)
	if res[0].Exit != 0 || strings.TrimSpace(s.String()) != k.Namespace {
		t.Errorf("run on the sandbox context: %+v %q", res[0], s.String())
	}
	if len(s.events) == 0 || !strings.Contains(s.events[0].Message, `context "cairn-sandbox"`) {
		t.Errorf("no target event: %+v", s.events)
	}

	if _, err := kube.New(kube.Config{Kubeconfig: path, Context: "nope"}); err == nil || !strings.Contains(err.Error(), `no context "nope" (have: cairn-sandbox, prod-east)`) {
		t.Errorf("unknown context: %v", err)
	}
}

// The pinned kubeconfig holds just the chosen context, embeds what it
// referred to by path, is private, and works with kubectl: run by the local
// runner the way the engine runs a target=kube shell block.
func TestPinnedKubeconfig(t *testing.T) {
	k := testrig.Kube(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	path := writeKubeconfig(t, k)
	r, err := kube.New(kube.Config{Kubeconfig: path, Context: "cairn-sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	pinned, cleanup, err := r.PinnedKubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(pinned)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("pinned file %v %v", fi, err)
	}
	if di, _ := os.Stat(filepath.Dir(pinned)); di.Mode().Perm() != 0o700 {
		t.Errorf("pinned dir mode %v", di.Mode())
	}
	cfg, err := clientcmd.LoadFromFile(pinned)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "cairn-sandbox" || len(cfg.Contexts) != 1 || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		t.Errorf("pinned config: current %q, %d contexts, %d clusters, %d users", cfg.CurrentContext, len(cfg.Contexts), len(cfg.Clusters), len(cfg.AuthInfos))
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) == 0 || c.CertificateAuthority != "" {
			t.Errorf("the CA was not embedded: %+v", c)
		}
	}

	cmd := exec.Command(kubectl, "config", "get-contexts", "-o", "name")
	cmd.Env = []string{"KUBECONFIG=" + pinned, "HOME=" + t.TempDir(), "PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "cairn-sandbox\n" {
		t.Errorf("kubectl config get-contexts: %q %v", out, err)
	}

	rb := loadRunbook(t, "testdata/kube-runner.md")
	b := rb.BlockByID("kubectl-ns")
	if b.Target != runbook.TargetKube || b.Action != "" {
		t.Fatalf("kubectl-ns is %s/%q", b.Target, b.Action)
	}
	lr := &local.Runner{ExtraEnv: []string{"KUBECONFIG=" + pinned}, Dir: t.TempDir()}
	var out sink
	res, _ := lr.Run(ctxT(t, 30*time.Second), &executor.Job{Runbook: rb, Block: b, Env: map[string]string{"NS": k.Namespace}}, &out)
	if res[0].Exit != 0 || out.String() != "namespace/"+k.Namespace+"\ncairn-sandbox\n" {
		t.Errorf("kubectl through the local runner: exit %d err %v\n%s", res[0].Exit, res[0].Err, out.String())
	}
	// The kube runner itself does not run shell blocks.
	res, _ = r.Run(ctxT(t, 10*time.Second), &executor.Job{Runbook: rb, Block: b}, &out)
	if res[0].Exit != -1 || !strings.Contains(fmt.Sprint(res[0].Err), "not a native kube action") {
		t.Errorf("shell block on the kube runner: %+v", res[0])
	}

	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(pinned)); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s", filepath.Dir(pinned))
	}
}

// The bundled practice runbook's kube blocks, as a reader would run them.
func TestPracticeRunbookKubeBlocks(t *testing.T) {
	k := testrig.Kube(t)
	r, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	rb := loadRunbook(t, "../../content/practice.md")
	vars := map[string]string{"NAMESPACE": k.Namespace + "-p", "STAMP": "0123456789ab"}
	t.Cleanup(func() {
		_ = k.Client.CoreV1().Namespaces().Delete(context.Background(), vars["NAMESPACE"], metav1.DeleteOptions{})
		_ = k.Dynamic.Resource(crdGVR).Delete(context.Background(), "practicenotes.cairn.dev", metav1.DeleteOptions{})
	})
	for _, id := range []string{"apply-objects", "wait-crd", "wait-sa", "patch-role", "get-role", "apply-pod", "pod-running", "delete-ns", "delete-crd"} {
		b := rb.BlockByID(id)
		if b == nil {
			t.Fatalf("practice runbook has no block %q", id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
		var out sink
		res, _ := r.Run(ctx, &executor.Job{Runbook: rb, Block: b, Env: vars}, &out)
		cancel()
		v := executor.Verify(b, res, map[string]string{res[0].Host: out.String()}, kube.Checker{})
		t.Logf("%s: exit %d verified %v %v\n%s", id, res[0].Exit, v.OK, v.Reasons, out.String())
		wantOK := id != "pod-running" // the runbook's deliberate failure: no nodes
		if v.OK != wantOK {
			t.Errorf("%s: verified %v, want %v: %v\n%s", id, v.OK, wantOK, v.Reasons, out.String())
		}
	}
}
