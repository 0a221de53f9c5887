package kube_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// resolveMD has pod and node blocks chosen each way.
const resolveMD = "---\ntitle: r\nkube:\n  contexts: [cairn-sandbox]\nparams:\n  - name: NS\n  - name: NODES\n    type: hosts\n---\n" +
	"## S {#s}\n\n" +
	"```bash {#by-workload target=pod workload=ds/agent namespace=\"${NS}\"}\ntrue\n```\n\n" +
	"```bash {#by-selector target=pod selector=app=web namespace=\"${NS}\"}\ntrue\n```\n\n" +
	"```bash {#none target=pod selector=app=nothing namespace=\"${NS}\"}\ntrue\n```\n\n" +
	"```bash {#named-nodes target=node nodes=$NODES}\ntrue\n```\n\n" +
	"```bash {#labelled-nodes target=node selector=cairn-test/resolve=yes}\ntrue\n```\n"

// TestResolve: pod and node blocks name the pods and nodes they would run
// on, against a real apiserver, without running anything: a workload's own
// selector, a label selector (pods being deleted left out), named nodes
// (each must exist) and labelled nodes; none is an error that says so.
func TestResolve(t *testing.T) {
	k := testrig.Kube(t)
	r, err := kube.New(kube.Config{Kubeconfig: k.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse("r.md", []byte(resolveMD))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ns := k.Namespace
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "agent"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "agent"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "busybox"}},
				// No node has it: the controller makes no pods of its own.
				NodeSelector: map[string]string{"cairn-test/none": "x"}}}}}
	if _, err := k.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pods have a controller of their own, a ConfigMap: an orphan with
	// the DaemonSet's labels is adopted by its controller, which then
	// deletes it (its node is not one the DaemonSet runs on), racing the
	// test. Cairn goes by the workload's selector, not by the owner.
	owner, err := k.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	ownedBy := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	for name, labels := range map[string]map[string]string{"agent-1": {"k8s-app": "agent"}, "agent-2": {"k8s-app": "agent"}, "web-1": {"app": "web"}} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: ownedBy},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, NodeName: "cairn-test-nowhere"}}
		if _, err := k.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cairn-test-resolve-a", "cairn-test-resolve-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"cairn-test/resolve": "yes"}}}
		if _, err := k.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	resolve := func(id string, runner executor.Runner, env map[string]string) ([]string, error) {
		return runner.(executor.Resolver).Resolve(ctx, &executor.Job{Runbook: rb, Block: rb.BlockByID(id), Env: env, RunID: "t"})
	}
	env := map[string]string{"NS": ns, "NODES": "cairn-test-resolve-b"}
	for _, tc := range []struct {
		id     string
		runner executor.Runner
		want   []string
		err    string
	}{
		{"by-workload", r.Pods(), []string{ns + "/agent-1", ns + "/agent-2"}, ""},
		{"by-selector", r.Pods(), []string{ns + "/web-1"}, ""},
		{"none", r.Pods(), nil, "no pods: pods of app=nothing in namespace " + ns + " match none"},
		{"named-nodes", r.Nodes(), []string{"cairn-test-resolve-b"}, ""},
		{"labelled-nodes", r.Nodes(), []string{"cairn-test-resolve-a", "cairn-test-resolve-b"}, ""},
	} {
		got, err := resolve(tc.id, tc.runner, env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, %v; want an error with %q", tc.id, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v", tc.id, got, err, tc.want)
		}
	}
	if _, err := resolve("named-nodes", r.Nodes(), map[string]string{"NS": ns, "NODES": "cairn-test-no-such-node"}); err == nil || !strings.Contains(err.Error(), "cairn-test-no-such-node") {
		t.Errorf("a named node that does not exist: %v", err)
	}

	// More names than are read one by one: one list of every node's
	// metadata answers for all of them, with the same verdicts.
	var many []string
	for i := range 10 {
		n := fmt.Sprintf("cairn-test-resolve-m%d", i)
		many = append(many, n)
		if _, err := k.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}) })
	}
	got, err := resolve("named-nodes", r.Nodes(), map[string]string{"NS": ns, "NODES": strings.Join(many, " ")})
	if err != nil || !reflect.DeepEqual(got, many) {
		t.Errorf("10 named nodes: %v, %v", got, err)
	}
	withMissing := strings.Join(append(many[:9:9], "cairn-test-no-such-node", "cairn-test-nor-this"), ",")
	if _, err := resolve("named-nodes", r.Nodes(), map[string]string{"NS": ns, "NODES": withMissing}); err == nil ||
		!strings.Contains(err.Error(), "no such nodes: cairn-test-no-such-node, cairn-test-nor-this (the cluster has") {
		t.Errorf("11 named nodes, two missing: %v", err)
	}
}
