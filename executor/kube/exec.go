package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/nodepod"
)

// Pods is the runner of target=pod blocks: the block's script runs in a
// container of each chosen pod through the API's exec subresource (what
// kubectl exec does), one result per pod, fanned out as ssh hosts are
// (executor.FanOut).
func (r *Runner) Pods() executor.Runner { return podRunner{r} }

// Nodes is the runner of target=node blocks: for each chosen node a
// short-lived privileged pod pinned to it (NodePod), and the block's script
// run through exec in the node's own namespaces (nsenter into PID 1's, as
// kubectl debug node --profile=sysadmin does). The pod is deleted when the
// node's part ends, is cancelled or fails.
func (r *Runner) Nodes() executor.Runner { return nodeRunner{r} }

type podRunner struct{ r *Runner }

type nodeRunner struct{ r *Runner }

// DefaultNodeImage is the node pod's image when neither the block nor
// Config.NodeImage names one.
const DefaultNodeImage = nodepod.DefaultImage

// shellWrapper is what a pod or node runs: /bin/sh starts bash (sh when
// the container has no bash) reading the preamble and script from
// standard input (executor.ScriptInput) with standard error joined to
// standard output, so the output keeps its order; when bash ends, or a
// signal ends the wrapper, the run's leftover processes are reaped by
// their CAIRN_SESSION (executor.ReapScript).
func shellWrapper(session string) string {
	return `cairn_reap() { ` + executor.ReapCommands(session) + `; } 2>/dev/null
trap 'cairn_reap; exit 143' TERM HUP INT
if command -v bash >/dev/null 2>&1; then bash --noprofile --norc -euo pipefail -s 2>&1; else sh -eu -s 2>&1; fi
rc=$?
cairn_reap
exit $rc`
}

// PodCommand is the exec command of a target=pod block.
func PodCommand(session string) []string {
	return []string{"/bin/sh", "-c", shellWrapper(session)}
}

// NodeCommand is the exec command of a target=node block, run in the node
// pod: the wrapper in the node's namespaces, with the node's /bin/sh and
// bash.
func NodeCommand(session string) []string {
	return append(append([]string{}, nodepod.Nsenter...), "/bin/sh", "-c", shellWrapper(session))
}

// selection is how a pod or node block chooses where it runs, with
// parameter values filled in and checked against the field they land in.
type selection struct {
	namespace, name, selector, workload, container, nodes, image, from string
}

func newSelection(b *runbook.Block, env map[string]string) (*selection, error) {
	f := &valueFiller{env: env}
	sub := f.fill
	s := &selection{
		namespace: sub("namespace", b.Namespace, isNamespace, "a namespace name (a DNS label)"),
		name:      sub("name", b.Name, isObjectName, "an object name"),
		selector:  sub("selector", b.Selector, isSelectorValue, "a label key or value"),
		workload:  sub("workload", b.Workload, func(v string) bool { return isObjectName(v) || isWorkload(v) }, "a workload name or KIND/NAME"),
		container: sub("container", b.Container, isNamespace, "a container name"),
		nodes:     sub("nodes", b.Nodes, isNodeList, "node names"),
		image:     sub("image", b.Image, isImageRef, "an image reference"),
		from:      sub("from", b.From, isNodeName, "a node name"),
	}
	if b.From != "" && s.from == "" {
		f.problems = append(f.problems, fmt.Sprintf("from=%s is empty: name the node the files come from", b.From))
	}
	if s.workload != "" && !isWorkload(s.workload) && len(f.problems) == 0 {
		f.problems = append(f.problems, fmt.Sprintf("workload=%s is %q, not KIND/NAME with KIND one of ds, deploy, sts, rs, job", b.Workload, s.workload))
	}
	if err := f.err(b); err != nil {
		return nil, err
	}
	if s.selector != "" {
		if _, err := labels.Parse(s.selector); err != nil {
			return nil, fmt.Errorf("%w: block %q: selector=%s: %v", executor.ErrBadParam, b.ID, s.selector, err)
		}
	}
	return s, nil
}

func isWorkload(v string) bool {
	_, n, ok := runbook.WorkloadResource(v)
	return ok && isObjectName(n)
}

// isNodeList: node names separated by spaces or commas.
func isNodeList(v string) bool {
	for _, n := range runbook.SplitHosts(v) {
		if !isNodeName(n) {
			return false
		}
	}
	return true
}

// isImageRef accepts what an image reference is made of, and nothing that
// could be read as another field or option.
func isImageRef(v string) bool {
	if v == "" || len(v) > 512 || strings.HasPrefix(v, "-") {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/:@", r)) {
			return false
		}
	}
	return true
}

// start is what both runners do first: the context guard, the values the
// preamble carries, and the selection. (The engine's Where names the
// cluster and the selection.)
func (r *Runner) start(job *executor.Job, want runbook.Target) (*selection, error) {
	b := job.Block
	if b == nil {
		return nil, errors.New("kube: job has no block")
	}
	if b.Target != want {
		return nil, fmt.Errorf("block %q: target=%s, not %s", b.ID, b.Target, want)
	}
	if _, err := r.Guard(job.Runbook); err != nil {
		return nil, err
	}
	if err := executor.CheckScriptEnv(job); err != nil {
		return nil, err
	}
	return newSelection(b, job.Env)
}

// Run implements executor.Runner for target=pod.
func (p podRunner) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	r := p.r
	sel, err := r.start(job, runbook.TargetPod)
	if err != nil {
		return nil, err
	}
	ns := r.nsOr(sel.namespace)
	pods, err := r.choosePods(ctx, ns, sel, out)
	if err != nil {
		return nil, err
	}
	if err := r.canExec(ctx, ns); err != nil {
		return nil, err
	}
	byName := map[string]*corev1.Pod{}
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = pods[i].Name
		byName[pods[i].Name] = &pods[i]
	}
	return executor.FanOut(ctx, job, names, job.Block.Parallel, func(ctx context.Context, name string) executor.HostResult {
		pod := byName[name]
		if pod.Status.Phase != corev1.PodRunning {
			return executor.HostResult{Exit: -1, Err: fmt.Errorf("pod %s/%s is %s, not Running", ns, name, pod.Status.Phase)}
		}
		c := sel.container
		if c == "" {
			c = defaultContainer(pod)
		}
		session := executor.NewID()
		exit, err := r.execScript(ctx, job, out, ns, name, c, name, PodCommand(session), session, nil)
		return executor.HostResult{Exit: exit, Err: err}
	}, out), nil
}

// Resolve names the pods the block would run in now (executor.Resolver):
// a confirmation lists them. Nothing runs.
func (p podRunner) Resolve(ctx context.Context, job *executor.Job) ([]string, error) {
	sel, err := p.r.start(job, runbook.TargetPod)
	if err != nil {
		return nil, err
	}
	ns := p.r.nsOr(sel.namespace)
	pods, err := p.r.choosePods(ctx, ns, sel, quiet{})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(pods))
	for i := range pods {
		names[i] = ns + "/" + pods[i].Name
	}
	return names, nil
}

// Resolve names the nodes the block would run on now (executor.Resolver).
func (n nodeRunner) Resolve(ctx context.Context, job *executor.Job) ([]string, error) {
	sel, err := n.r.start(job, runbook.TargetNode)
	if err != nil {
		return nil, err
	}
	return n.r.chooseNodes(ctx, sel)
}

// quiet is a Sink for work that shows nothing (resolving targets).
type quiet struct{}

func (quiet) Output(string, []byte) {}
func (quiet) Event(executor.Event)  {}

// nsOr is the namespace a block works in: its own, else the context's,
// else default.
func (r *Runner) nsOr(ns string) string {
	return r.namespaceFor(&action{namespace: ns})
}

// defaultContainer is kubectl's choice: the annotated default container,
// else the first.
func defaultContainer(pod *corev1.Pod) string {
	if c := pod.Annotations["kubectl.kubernetes.io/default-container"]; c != "" {
		return c
	}
	if len(pod.Spec.Containers) > 0 {
		return pod.Spec.Containers[0].Name
	}
	return ""
}

// choosePods lists the pods a block runs in, by name, by a workload's
// selector or by its own; pods being deleted are left out (a rollout's old
// pods), and none at all is an error.
func (r *Runner) choosePods(ctx context.Context, ns string, sel *selection, out executor.Sink) ([]corev1.Pod, error) {
	pods := r.core.Pods(ns)
	var what string
	var list []corev1.Pod
	switch {
	case sel.name != "":
		what = "pod " + ns + "/" + sel.name
		pod, err := pods.Get(ctx, sel.name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		list = []corev1.Pod{*pod}
	default:
		selector := sel.selector
		what = fmt.Sprintf("pods of %s in namespace %s", selector, ns)
		if sel.workload != "" {
			var err error
			if selector, err = r.workloadSelector(ctx, ns, sel.workload); err != nil {
				return nil, err
			}
			what = fmt.Sprintf("pods of %s in namespace %s (%s)", sel.workload, ns, selector)
		}
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		list = l.Items
	}
	var keep []corev1.Pod
	for _, p := range list {
		if p.DeletionTimestamp != nil {
			out.Event(executor.Event{Kind: "info", Message: fmt.Sprintf("pod %s is being deleted; left out", p.Name)})
			continue
		}
		keep = append(keep, p)
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("no pods: %s match none", what)
	}
	return keep, nil
}

// workloadSelector reads a workload's own label selector.
func (r *Runner) workloadSelector(ctx context.Context, ns, workload string) (string, error) {
	res, name, ok := runbook.WorkloadResource(workload)
	if !ok {
		return "", fmt.Errorf("%w: workload=%s: write KIND/NAME with KIND one of ds, deploy, sts, rs, job", executor.ErrBadParam, workload)
	}
	group := "apps"
	if res == "jobs" {
		group = "batch"
	}
	obj, err := r.dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: res}).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("workload %s in namespace %s: %w", workload, ns, err)
	}
	raw, found, err := unstructured.NestedMap(obj.Object, "spec", "selector")
	if err != nil || !found {
		return "", fmt.Errorf("workload %s in namespace %s has no spec.selector", workload, ns)
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &ls); err != nil {
		return "", fmt.Errorf("workload %s: spec.selector: %w", workload, err)
	}
	s, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return "", fmt.Errorf("workload %s: spec.selector: %w", workload, err)
	}
	if s.Empty() {
		return "", fmt.Errorf("workload %s: its selector is empty; Cairn never runs in every pod", workload)
	}
	return s.String(), nil
}

// canExec asks the API whether this user may exec into pods of ns, so a
// missing permission is one message before anything runs rather than one
// per pod.
func (r *Runner) canExec(ctx context.Context, ns string) error {
	return r.can(ctx, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "exec"})
}

func (r *Runner) can(ctx context.Context, ra authorizationv1.ResourceAttributes) error {
	rev, err := r.authz.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("check permission to %s %s: %w", ra.Verb, resourceName(ra), err)
	}
	if !rev.Status.Allowed {
		why := ""
		if rev.Status.Reason != "" {
			why = " (" + rev.Status.Reason + ")"
		}
		return fmt.Errorf("%w: %s may not %s %s in namespace %q%s; ask for a Role that grants it, or use another context",
			executor.ErrPermanent, r.target.User, ra.Verb, resourceName(ra), ra.Namespace, why)
	}
	return nil
}

func resourceName(ra authorizationv1.ResourceAttributes) string {
	if ra.Subresource != "" {
		return ra.Resource + "/" + ra.Subresource
	}
	return ra.Resource
}

// execScript runs command in one container with the job's preamble and
// script on standard input, streaming its output as host's, and returns
// the exit status. When ctx ends first it reaps the run's processes in the
// container (they carry session) before it returns: closing the stream
// alone does not end a process the runtime started. reap, when not nil,
// is the reaper's command prefix (nsenter for node pods).
func (r *Runner) execScript(ctx context.Context, job *executor.Job, out executor.Sink, ns, pod, container, host string, command []string, session string, reap []string) (int, error) {
	w := &hostWriter{host: host, out: out}
	err := r.stream(ctx, ns, pod, container, command, strings.NewReader(executor.ScriptInput(job, host, session)), w)
	if ctx.Err() != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		cmd := append(append([]string{}, reap...), "/bin/sh", "-c", executor.ReapScript(session))
		if rerr := r.stream(rctx, ns, pod, container, cmd, nil, io.Discard); rerr != nil && !isExit(rerr) {
			out.Event(executor.Event{Kind: "info", Host: host, Message: fmt.Sprintf("could not end the script's processes in %s/%s: %v", ns, pod, rerr)})
		}
		return -1, executor.CtxErr(ctx)
	}
	var ce interface{ ExitStatus() int }
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ce):
		return ce.ExitStatus(), nil
	default:
		return -1, fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
}

func isExit(err error) bool {
	var ce interface{ ExitStatus() int }
	return errors.As(err, &ce)
}

// stream runs one exec: WebSocket first (the API's current protocol),
// SPDY when the server or a proxy cannot upgrade to it, as kubectl does.
func (r *Runner) stream(ctx context.Context, ns, pod, container string, command []string, stdin io.Reader, w io.Writer) error {
	return r.stream2(ctx, ns, pod, container, command, stdin, w, w)
}

// stream2 is stream with standard output and error apart.
func (r *Runner) stream2(ctx context.Context, ns, pod, container string, command []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := r.core.RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdin: stdin != nil, Stdout: true, Stderr: true}, execCodec())
	spdy, err := remotecommand.NewSPDYExecutor(r.rest, "POST", req.URL())
	if err != nil {
		return err
	}
	ws, err := remotecommand.NewWebSocketExecutor(r.rest, "GET", req.URL().String())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// execCodec encodes PodExecOptions as query parameters. Built on first
// use: the scheme cost every cairn command 8–17 ms at start-up.
var execCodec = sync.OnceValue(func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	return runtime.NewParameterCodec(s)
})

// hostWriter is one pod's or node's output.
type hostWriter struct {
	host string
	out  executor.Sink
}

func (w *hostWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.out.Output(w.host, append([]byte(nil), p...))
	}
	return len(p), nil
}

// Run implements executor.Runner for target=node.
func (n nodeRunner) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	r := n.r
	sel, err := r.start(job, runbook.TargetNode)
	if err != nil {
		return nil, err
	}
	ns := r.nsOr(sel.namespace)
	image := sel.image
	if image == "" {
		image = r.nodeImage()
	}
	nodes, err := r.chooseNodes(ctx, sel)
	if err != nil {
		return nil, err
	}
	// What a killed executor left: gone before this one adds its own.
	if _, err := r.SweepNodePods(ctx, ns); err != nil {
		out.Event(executor.Event{Kind: "info", Message: "clean-up of earlier node pods: " + err.Error()})
	}
	// One server-side dry run answers both questions a node block raises
	// before it starts: may this user make the pod, and does Pod Security
	// admission in ns allow a privileged one.
	dry := r.NodePod(job, ns, nodes[0], image)
	if _, err := r.core.Pods(ns).Create(ctx, dry, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		return nil, r.nodePodRefused(ns, err)
	}
	if err := r.canExec(ctx, ns); err != nil {
		return nil, err
	}
	var nc *nodeCopy
	if job.Block.Action == "copy" {
		if nc, err = r.newNodeCopy(ctx, job, out, ns, image, sel.from); err != nil {
			return nil, err
		}
		defer nc.close()
	}
	return executor.FanOut(ctx, job, nodes, job.Block.Parallel, func(ctx context.Context, node string) executor.HostResult {
		exit, err := r.onNode(ctx, job, out, ns, node, image, nc)
		return executor.HostResult{Exit: exit, Err: err}
	}, out), nil
}

func (r *Runner) nodeImage() string {
	if r.cfg.NodeImage != "" {
		return r.cfg.NodeImage
	}
	return DefaultNodeImage
}

// nodePodRefused says why the dry run failed, and what to do.
func (r *Runner) nodePodRefused(ns string, err error) error {
	switch {
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "PodSecurity"):
		return fmt.Errorf("%w: a node block needs a privileged pod in namespace %q, and Pod Security admission there refuses it: %v; use namespace= of a namespace labelled pod-security.kubernetes.io/enforce=privileged (kube-system usually is)",
			executor.ErrPermanent, ns, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: a node block makes a pod in namespace %q: %v; ask for a Role that grants create on pods and pods/exec there", executor.ErrPermanent, ns, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: namespace %q: %v", executor.ErrPermanent, ns, err)
	}
	return fmt.Errorf("make a node pod in namespace %q: %w", ns, err)
}

// chooseNodes is the block's node names, or the nodes its selector
// matches; every named node must exist.
func (r *Runner) chooseNodes(ctx context.Context, sel *selection) ([]string, error) {
	if sel.nodes != "" {
		names := runbook.SplitHosts(sel.nodes)
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: nodes= is empty", executor.ErrBadParam)
		}
		return names, r.nodesExist(ctx, names)
	}
	l, err := r.core.Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.selector})
	if err != nil {
		return nil, fmt.Errorf("list nodes of %s: %w", sel.selector, err)
	}
	if len(l.Items) == 0 {
		return nil, fmt.Errorf("no nodes: selector %s matches none", sel.selector)
	}
	names := make([]string, len(l.Items))
	for i, n := range l.Items {
		names[i] = n.Name
	}
	return names, nil
}

// getNodesUpTo is how many named nodes are read one GET each; more are
// checked against one list of every node's metadata. A GET costs a request
// per name; the list costs one request whose size grows with the cluster
// (about half a KiB per node without spec and status), so a few names on a
// big cluster are cheaper one by one and a fleet's worth cheaper at once.
const getNodesUpTo = 8

// nodesExist checks that every named node exists.
func (r *Runner) nodesExist(ctx context.Context, names []string) error {
	if len(names) <= getNodesUpTo {
		for _, n := range names {
			if _, err := r.core.Nodes().Get(ctx, n, metav1.GetOptions{}); err != nil {
				return fmt.Errorf("node %s: %w", n, err)
			}
		}
		return nil
	}
	l, err := r.meta.Resource(corev1.SchemeGroupVersion.WithResource("nodes")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes to find %s: %w", strings.Join(names, ", "), err)
	}
	have := make(map[string]bool, len(l.Items))
	for _, n := range l.Items {
		have[n.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no such nodes: %s (the cluster has %d nodes; kubectl get nodes lists them)", strings.Join(missing, ", "), len(l.Items))
	}
	return nil
}

// Owner is this machine and user as a label value: the node pods of every
// executor of theirs carry it, so that one executor cleans up after
// another that was killed.
func Owner() string {
	h, _ := os.Hostname()
	s := fmt.Sprintf("%s-%d", h, os.Getuid())
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			b.WriteRune(r)
		}
	}
	v := strings.Trim(b.String(), "-._")
	if len(v) > 63 {
		v = strings.Trim(v[len(v)-63:], "-._")
	}
	if v == "" {
		v = "cairn"
	}
	return v
}

// NodePod is the pod a node block runs through on node (nodepod.Spec),
// labelled with this machine's owner and the executor's pid, so that the
// next executor sweeps it when this one was killed.
func (r *Runner) NodePod(job *executor.Job, ns, node, image string) *corev1.Pod {
	return nodepod.Spec{Namespace: ns, Node: node, Image: image, Timeout: job.Block.Timeout,
		RunID: job.RunID, Block: job.Block.ID, Owner: Owner(), PID: fmt.Sprint(os.Getpid())}.Pod()
}

// onNode runs the block on node through its node pod: the script, or
// the copies when nc is not nil.
func (r *Runner) onNode(ctx context.Context, job *executor.Job, out executor.Sink, ns, node, image string, nc *nodeCopy) (int, error) {
	exit := -1
	err := r.withNodePod(ctx, job, out, ns, node, image, func(pod string) error {
		var err error
		if nc != nil {
			exit, err = nc.put(ctx, ns, pod, node)
			return err
		}
		session := executor.NewID()
		exit, err = r.execScript(ctx, job, out, ns, pod, nodepod.Container, node, NodeCommand(session), session, nodepod.Nsenter)
		return err
	})
	return exit, err
}

// withNodePod makes the node pod, waits until it runs, calls fn with its
// name and deletes the pod, whatever happened.
func (r *Runner) withNodePod(ctx context.Context, job *executor.Job, out executor.Sink, ns, node, image string, fn func(pod string) error) error {
	pods := r.core.Pods(ns)
	pod, err := pods.Create(ctx, r.NodePod(job, ns, node, image), metav1.CreateOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return executor.CtxErr(ctx)
		}
		return fmt.Errorf("make the node pod: %w", r.nodePodRefused(ns, err))
	}
	defer r.deleteNodePod(ctx, out, node, pod)
	out.Event(executor.Event{Kind: "info", Host: node, Message: fmt.Sprintf("pod %s/%s (image %s)", ns, pod.Name, image)})
	if err := r.waitRunning(ctx, pod); err != nil {
		if ctx.Err() != nil {
			return executor.CtxErr(ctx)
		}
		return err
	}
	return fn(pod.Name)
}

// nodePodGrace is nodepod.Grace, for DeleteOptions.
var nodePodGrace = int64(nodepod.Grace)

// deleteNodePod deletes the pod, also when ctx has ended.
func (r *Runner) deleteNodePod(ctx context.Context, out executor.Sink, node string, pod *corev1.Pod) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := r.core.Pods(pod.Namespace).Delete(dctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &nodePodGrace})
	if err != nil && !apierrors.IsNotFound(err) {
		out.Event(executor.Event{Kind: "info", Host: node, Message: fmt.Sprintf("could not delete pod %s/%s: %v (its deadline ends it; the next node block deletes it)", pod.Namespace, pod.Name, err)})
	}
}

// waitRunning watches the pod until its container runs. A pod that
// cannot start (the image cannot be pulled, the node refuses it) is an
// error naming why.
func (r *Runner) waitRunning(ctx context.Context, pod *corev1.Pod) error {
	pods := r.core.Pods(pod.Namespace)
	check := func(p *corev1.Pod) (bool, error) {
		switch p.Status.Phase {
		case corev1.PodFailed, corev1.PodSucceeded:
			return false, fmt.Errorf("node pod %s/%s ended before the script ran: %s %s", p.Namespace, p.Name, p.Status.Reason, p.Status.Message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				return true, nil
			}
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					return false, fmt.Errorf("node pod %s/%s cannot start: %s: %s (image %s; set image= on the block or --node-image)", p.Namespace, p.Name, w.Reason, w.Message, p.Spec.Containers[0].Image)
				}
			}
		}
		return false, nil
	}
	for {
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watch node pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		ok, err := func() (bool, error) {
			defer w.Stop()
			for ev := range w.ResultChan() {
				p, isPod := ev.Object.(*corev1.Pod)
				if !isPod {
					continue // a watch error: watch again
				}
				pod = p
				if ev.Type == "DELETED" {
					return false, fmt.Errorf("node pod %s/%s was deleted before the script ran", p.Namespace, p.Name)
				}
				if ok, err := check(p); ok || err != nil {
					return ok, err
				}
			}
			return false, ctx.Err()
		}()
		if ok || err != nil {
			return err
		}
		// The watch closed: read the pod again and go on from there.
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if ok, err := check(p); ok || err != nil {
			return err
		}
		pod = p
	}
}

// sweepMu keeps two blocks of one executor from sweeping at once.
var sweepMu sync.Mutex

// SweepNodePods deletes node pods of this machine and user that no live
// executor owns: those of an executor that was killed (its process is
// gone) and those whose deadline has passed. It looks in every namespace
// when it may list there, else in ns ("": the context's). It returns how
// many it deleted.
func (r *Runner) SweepNodePods(ctx context.Context, ns string) (int, error) {
	sweepMu.Lock()
	defer sweepMu.Unlock()
	sel := labels.Set{nodepod.LabelManagedBy: "cairn", nodepod.LabelRole: nodepod.Role, nodepod.LabelOwner: Owner()}.String()
	l, err := r.core.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if apierrors.IsForbidden(err) {
		l, err = r.core.Pods(r.nsOr(ns)).List(ctx, metav1.ListOptions{LabelSelector: sel})
	}
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, p := range l.Items {
		over := p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
		if !over && processAlive(p.Annotations[nodepod.AnnotationPID]) {
			continue
		}
		if p.DeletionTimestamp != nil {
			continue // on its way
		}
		if err := r.core.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &nodePodGrace}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
