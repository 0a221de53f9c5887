// Package kube runs native Kubernetes actions (target=kube blocks with an
// action) through the API: server-side apply of multi-document manifests,
// get with a JSONPath projection, patch, delete, scale and wait. It also
// guards which cluster a runbook may touch and writes the pinned kubeconfig
// that target=kube shell blocks run kubectl with.
//
// A Runner is bound to one kubeconfig context for its whole life:
//
//	r, err := kube.New(kube.Config{Kubeconfig: path, Context: name})
//	t, err := r.Guard(rb)          // which cluster; ErrContextRefused if rb does not allow it
//	res, err := r.Run(ctx, job, sink)
//
// Objects returned by actions land in HostResult.Objects as map[string]any;
// EvalJSONPath, CheckJSONPath and CaptureJSONPath evaluate JSONPath on them
// with kubectl's semantics.
package kube

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// DefaultFieldManager is the field manager of server-side applies.
const DefaultFieldManager = "cairn"

// Defaults for Config.
const (
	defaultWatchTimeout = 5 * time.Minute
	defaultCRDWait      = 30 * time.Second
)

// Config says which cluster a Runner talks to.
type Config struct {
	// Kubeconfig is an explicit kubeconfig file. Empty: the usual loading
	// rules ($KUBECONFIG, a list of files, else ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context to use. Empty: current-context.
	Context string
	// FieldManager for server-side apply; default DefaultFieldManager.
	FieldManager string
	// WatchTimeout bounds each watch of action=wait; the watch is then
	// re-listed. Default 5m. Tests lower it to exercise the re-list.
	WatchTimeout time.Duration
	// NodeImage is the image of target=node pods when the block names
	// none; default DefaultNodeImage.
	NodeImage string
	// CRDWait bounds how long apply waits for a kind defined by a CRD
	// applied earlier in the same manifest to be served. Default 30s.
	CRDWait time.Duration
}

// Target is the cluster a Runner touches, for the page to show.
type Target struct {
	Context   string
	Cluster   string
	Server    string
	User      string
	Namespace string // the context's default namespace; "" means default
}

// String is the target as the page shows it:
// context "x" (cluster "y" at https://..., user "z").
func (t Target) String() string {
	s := fmt.Sprintf("context %q (cluster %q at %s, user %q", t.Context, t.Cluster, t.Server, t.User)
	if t.Namespace != "" {
		s += fmt.Sprintf(", namespace %q", t.Namespace)
	}
	return s + ")"
}

// Runner runs target=kube blocks that have an action. It is safe for
// concurrent use; discovery results are cached and refreshed when a kind is
// unknown.
type Runner struct {
	cfg    Config
	target Target
	raw    clientcmdapi.Config // the merged kubeconfig, paths resolved
	dyn    dynamic.Interface
	meta   metadata.Interface // lists of metadata only (nodes named by a block)
	rest   *rest.Config
	core   corev1client.CoreV1Interface
	authz  authorizationv1client.AuthorizationV1Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	kinds  meta.RESTMapper // mapper with short names (deploy, cm, ...)

	// Lists and watches that action=wait started, for tests.
	waitLists, waitWatches atomic.Int64
}

var _ executor.Runner = (*Runner)(nil)

// New loads the kubeconfig, selects the context and builds the clients. It
// does not contact the cluster.
func New(cfg Config) (*Runner, error) {
	if cfg.FieldManager == "" {
		cfg.FieldManager = DefaultFieldManager
	}
	if cfg.WatchTimeout <= 0 {
		cfg.WatchTimeout = defaultWatchTimeout
	}
	if cfg.CRDWait <= 0 {
		cfg.CRDWait = defaultCRDWait
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	name := cfg.Context
	if name == "" {
		name = raw.CurrentContext
	}
	if name == "" {
		return nil, fmt.Errorf("load kubeconfig %s: no current-context; choose a context", strings.Join(rules.GetLoadingPrecedence(), ":"))
	}
	kctx, ok := raw.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("load kubeconfig %s: no context %q (have: %s)", strings.Join(rules.GetLoadingPrecedence(), ":"), name, strings.Join(contextNames(raw), ", "))
	}
	t := Target{Context: name, Cluster: kctx.Cluster, User: kctx.AuthInfo, Namespace: kctx.Namespace}
	if c, ok := raw.Clusters[kctx.Cluster]; ok {
		t.Server = c.Server
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube context %q: %w", name, err)
	}
	rc = rest.CopyConfig(rc)
	rc.WarningHandlerWithContext = warningToSink{}
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube context %q: discovery client: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube context %q: dynamic client: %w", name, err)
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube context %q: metadata client: %w", name, err)
	}
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube context %q: core client: %w", name, err)
	}
	authz, err := authorizationv1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube context %q: authorization client: %w", name, err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	return &Runner{
		cfg:    cfg,
		target: t,
		raw:    raw,
		dyn:    dyn,
		meta:   meta,
		rest:   rc,
		core:   core,
		authz:  authz,
		mapper: mapper,
		kinds:  restmapper.NewShortcutExpander(mapper, cached, nil),
	}, nil
}

func contextNames(c clientcmdapi.Config) []string {
	var names []string
	for n := range c.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Target reports the cluster this Runner touches.
func (r *Runner) Target() Target { return r.target }

// Guard reports the cluster a block of rb would touch and refuses, with an
// error wrapping executor.ErrContextRefused, a context that rb's front
// matter (kube.contexts: names or path.Match globs) does not allow. An empty
// list allows every context.
func (r *Runner) Guard(rb *runbook.Runbook) (Target, error) {
	var patterns []string
	if rb != nil {
		patterns = rb.Meta.KubeContexts
	}
	return r.target, CheckContext(r.target, patterns)
}

// Where is Guard for Engine.KubeWhere: the target as the page shows it.
func (r *Runner) Where(rb *runbook.Runbook) (string, error) {
	t, err := r.Guard(rb)
	return t.String(), err
}

// CheckContext is Guard's test: nil when patterns is empty or one of them
// matches t.Context (exactly, or as a path.Match glob).
func CheckContext(t Target, patterns []string) error {
	if len(patterns) == 0 {
		return nil
	}
	for _, p := range patterns {
		if p == t.Context {
			return nil
		}
		if ok, err := path.Match(p, t.Context); err == nil && ok {
			return nil
		}
	}
	quoted := make([]string, len(patterns))
	for i, p := range patterns {
		quoted[i] = fmt.Sprintf("%q", p)
	}
	return fmt.Errorf("%w: %s is not one of the runbook's kube.contexts [%s]; switch context or add it to the front matter",
		executor.ErrContextRefused, t, strings.Join(quoted, ", "))
}

// Run implements executor.Runner: one HostResult named after the context.
// Exit is 0 on success, 1 when the API refused or a condition failed (Err
// says why), -1 when the block did not run or ctx ended first.
func (r *Runner) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	res := executor.HostResult{Host: r.target.Context, Exit: -1, Start: time.Now()}
	p := &printer{sink: out, host: r.target.Context}
	objs, exit, err := r.run(ctx, job, p)
	res.Objects, res.Exit, res.Err, res.Before = objs, exit, err, p.before
	res.Duration = time.Since(res.Start)
	return []executor.HostResult{res}, nil
}

func (r *Runner) run(ctx context.Context, job *executor.Job, p *printer) ([]any, int, error) {
	b := job.Block
	if b == nil {
		return nil, -1, errors.New("kube: job has no block")
	}
	if _, err := r.Guard(job.Runbook); err != nil {
		p.printf("error: %v\n", err)
		return nil, -1, err
	}
	if b.Target != runbook.TargetKube || b.Action == "" {
		err := fmt.Errorf("block %q: not a native kube action (target=%s, action=%q); a kube shell block runs with the local runner and a pinned kubeconfig", b.ID, b.Target, b.Action)
		p.printf("error: %v\n", err)
		return nil, -1, err
	}
	p.sink.Event(executor.Event{Kind: "info", Host: p.host, Message: r.target.String()})
	a, err := newAction(b, job.Env)
	if err != nil {
		p.printf("error: %v\n", err)
		return nil, -1, err
	}
	ctx = withPrinter(ctx, p)
	var objs []any
	err = ctx.Err() // already over: do nothing
	switch {
	case err != nil:
	case a.verb == "apply":
		objs, err = r.apply(ctx, a, p)
	case a.verb == "get":
		objs, err = r.get(ctx, a, p)
	case a.verb == "patch":
		objs, err = r.patch(ctx, a, p)
	case a.verb == "delete":
		objs, err = r.delete(ctx, a, p)
	case a.verb == "scale":
		objs, err = r.scale(ctx, a, p)
	case a.verb == "wait":
		objs, err = r.wait(ctx, a, p)
	default:
		err = fmt.Errorf("block %q: unknown kube action %q", b.ID, a.verb)
		p.printf("error: %v\n", err)
		return nil, -1, err
	}
	var we *WaitError
	switch {
	case err == nil:
		return objs, 0, nil
	case errors.As(err, &we):
		p.printf("error: %s\n", we.Detail())
		return objs, 1, err
	case ctx.Err() != nil:
		cause := ctx.Err()
		if errors.Is(cause, context.DeadlineExceeded) {
			cause = executor.ErrTimeout
		}
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%s: %w", a.verb, cause)
		} else {
			err = fmt.Errorf("%s: %w (%v)", a.verb, cause, err)
		}
		p.printf("error: %v\n", err)
		return objs, -1, err
	default:
		p.printf("error: %v\n", err)
		return objs, 1, err
	}
}

// action is a block's attributes with parameter references substituted.
type action struct {
	id            string
	verb          string
	kind          string
	name          string
	namespace     string
	selector      string
	fieldSelector string
	jsonpath      string
	patchType     string
	replicas      string
	waitFor       string
	all           bool
	lease         bool   // expect.lease: watch the Lease for a renewal
	body          []byte // JSON documents, one per line (runbook.Manifest.Fill)
	manifest      *runbook.Manifest
}

// newAction fills the block's attributes and body with values. A value is
// checked against the grammar of the field it lands in (a name, a
// namespace, one label value of a selector), so it stays one value there;
// the body's values go into scalars of the parsed manifest (runbook.Manifest).
func newAction(b *runbook.Block, env map[string]string) (*action, error) {
	f := &valueFiller{env: env}
	sub := f.fill
	a := &action{
		id:            b.ID,
		verb:          b.Action,
		kind:          sub("kind", b.Kind, isKindArg, "a resource kind"),
		name:          sub("name", b.Name, isObjectName, "an object name"),
		namespace:     sub("namespace", b.Namespace, isNamespace, "a namespace name (a DNS label)"),
		selector:      sub("selector", b.Selector, isSelectorValue, "a label key or value"),
		fieldSelector: sub("field-selector", b.FieldSelector, isSelectorValue, "a field value"),
		jsonpath:      b.JSONPath,
		patchType:     b.PatchType,
		replicas:      sub("replicas", b.Replicas, isCount, "a count"),
		waitFor:       sub("for", b.For, isSelectorValue, "a condition name or value"),
		all:           b.All,
		lease:         b.Expect.Lease != nil,
	}
	if err := f.err(b); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.Content) != "" {
		m := b.Manifest
		if m == nil || m.Source() != b.Content { // a block built by hand (tests, tools)
			var err error
			if m, err = runbook.ParseManifest(b.Content); err != nil {
				return nil, fmt.Errorf("block %q: %w", b.ID, err)
			}
		}
		body, err := m.Fill(env)
		if err != nil {
			return nil, fmt.Errorf("block %q: %w", b.ID, err)
		}
		a.body, a.manifest = body, m
	}
	return a, nil
}

// valueFiller fills parameter values into attribute text, noting each
// value that does not fit the grammar of the field it lands in (so that it
// stays one value there: one label value, one name).
type valueFiller struct {
	env      map[string]string
	problems []string
}

func (f *valueFiller) fill(attr, s string, ok func(string) bool, want string) string {
	for _, r := range runbook.FindRefs(s, false) {
		if v, has := f.env[r.Name]; has && !ok(v) {
			f.problems = append(f.problems, fmt.Sprintf("%s=%s: the value of $%s (%.60q) is not %s", attr, s, r.Name, v, want))
		}
	}
	return runbook.Substitute(s, f.env, false)
}

// err is ErrBadParam naming every value that did not fit, or nil.
func (f *valueFiller) err(b *runbook.Block) error {
	if len(f.problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: block %q: %s", executor.ErrBadParam, b.ID, strings.Join(f.problems, "; "))
}

// The value grammars below are written out, not regular expressions:
// counted repeats such as {0,316} compile into programs of hundreds of
// instructions, which cost every cairn command about 700 KB and a few
// milliseconds at start-up (kube_grammar_test.go holds them to the
// expressions they replace).

func isAlnumLower(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isAlpha(c byte) bool      { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

// all reports whether every byte of v passes ok.
func all(v string, ok func(byte) bool) bool {
	for i := 0; i < len(v); i++ {
		if !ok(v[i]) {
			return false
		}
	}
	return true
}

// isKindArg: a kind or resource name, [A-Za-z][A-Za-z0-9.-]{0,252}.
func isKindArg(v string) bool {
	return len(v) >= 1 && len(v) <= 253 && isAlpha(v[0]) &&
		all(v, func(c byte) bool { return isAlpha(c) || isDigit(c) || c == '.' || c == '-' })
}

// isNamespace: a DNS label, [a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?.
func isNamespace(v string) bool {
	return len(v) >= 1 && len(v) <= 63 && isAlnumLower(v[0]) && isAlnumLower(v[len(v)-1]) &&
		all(v, func(c byte) bool { return isAlnumLower(c) || c == '-' })
}

// isSelectorValue: one side of a label selector term, [A-Za-z0-9._/-]{0,316}.
func isSelectorValue(v string) bool {
	return len(v) <= 316 && all(v, func(c byte) bool { return isAlpha(c) || isDigit(c) || strings.IndexByte("._/-", c) >= 0 })
}

// isCount: [0-9]{1,9}.
func isCount(v string) bool { return len(v) >= 1 && len(v) <= 9 && all(v, isDigit) }

// isNodeName: a DNS subdomain, what node names are:
// [a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?.
func isNodeName(v string) bool {
	return len(v) >= 1 && len(v) <= 253 && isAlnumLower(v[0]) && isAlnumLower(v[len(v)-1]) &&
		all(v, func(c byte) bool { return isAlnumLower(c) || c == '-' || c == '.' })
}

// isObjectName accepts what the API accepts as one path segment of an
// object name (RBAC names may hold colons), and nothing that could reach
// another object: no slash, percent, whitespace or control character.
func isObjectName(v string) bool {
	if v == "" || v == "." || v == ".." || len(v) > 253 {
		return false
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r == '/' || r == '%' || r == ',' || r > 0x7e {
			return false
		}
	}
	return true
}

// resource is a kind resolved through discovery.
type resource struct {
	gvr        schema.GroupVersionResource
	gvk        schema.GroupVersionKind
	namespaced bool
}

// ref is kubectl's name for one object: deployment.apps/web, configmap/x.
func (res resource) ref(name string) string {
	k := strings.ToLower(res.gvk.Kind)
	if res.gvk.Group != "" {
		k += "." + res.gvk.Group
	}
	return k + "/" + name
}

// plural is the resource as kubectl spells it in messages: deployments.apps.
func (res resource) plural() string { return res.gvr.GroupResource().String() }

func fromMapping(m *meta.RESTMapping) resource {
	return resource{gvr: m.Resource, gvk: m.GroupVersionKind, namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}
}

// resolveKind maps what a block's kind= says (Deployment, deployments,
// deployments.apps, deploy, ciliumnodes.cilium.io, deployments.v1.apps) to
// a resource the way kubectl does. An unknown kind refreshes discovery once:
// a CRD created since the last look may define it.
func (r *Runner) resolveKind(ctx context.Context, kind string) (resource, error) {
	if kind == "" {
		return resource{}, errors.New("kind= is empty")
	}
	res, err := r.mappingFor(kind)
	if err != nil && meta.IsNoMatchError(err) {
		r.resetDiscovery()
		res, err = r.mappingFor(kind)
	}
	if err != nil {
		if meta.IsNoMatchError(err) {
			_, gr := schema.ParseResourceArg(kind)
			return resource{}, fmt.Errorf("the server doesn't have a resource type %q", gr.String())
		}
		return resource{}, fmt.Errorf("resolve kind %q: %w", kind, err)
	}
	return res, ctx.Err()
}

func (r *Runner) mappingFor(arg string) (resource, error) {
	full, gr := schema.ParseResourceArg(arg)
	var gvk schema.GroupVersionKind
	if full != nil {
		gvk, _ = r.kinds.KindFor(*full)
	}
	if gvk.Empty() {
		gvk, _ = r.kinds.KindFor(gr.WithVersion(""))
	}
	if !gvk.Empty() {
		m, err := r.kinds.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return resource{}, err
		}
		return fromMapping(m), nil
	}
	fullKind, gk := schema.ParseKindArg(arg)
	if fullKind != nil {
		if m, err := r.kinds.RESTMapping(fullKind.GroupKind(), fullKind.Version); err == nil {
			return fromMapping(m), nil
		}
	}
	m, err := r.kinds.RESTMapping(gk)
	if err != nil {
		return resource{}, err
	}
	return fromMapping(m), nil
}

// mapGVK maps an object's apiVersion and kind.
func (r *Runner) mapGVK(gvk schema.GroupVersionKind) (resource, error) {
	m, err := r.kinds.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return resource{}, err
	}
	return fromMapping(m), nil
}

// resetDiscovery forgets cached discovery (the mapper locks itself); the
// next mapping looks again.
func (r *Runner) resetDiscovery() { r.mapper.Reset() }

// namespaceFor is the namespace a namespaced action works in: the block's,
// else the context's, else default.
func (r *Runner) namespaceFor(a *action) string {
	switch {
	case a.namespace != "":
		return a.namespace
	case r.target.Namespace != "":
		return r.target.Namespace
	}
	return "default"
}

// client returns the dynamic client for res in ns (ignored when res is
// cluster-scoped).
func (r *Runner) client(res resource, ns string) dynamic.ResourceInterface {
	if res.namespaced {
		return r.dyn.Resource(res.gvr).Namespace(ns)
	}
	return r.dyn.Resource(res.gvr)
}

// printer writes a run's output lines to its sink.
type printer struct {
	sink executor.Sink
	host string
	// before holds the objects as first read when an action reads them
	// twice (expect.lease); Run reports them as HostResult.Before.
	before []any
}

func (p *printer) printf(format string, args ...any) {
	p.sink.Output(p.host, fmt.Appendf(nil, format, args...))
}

func (p *printer) write(b []byte) {
	if len(b) > 0 {
		p.sink.Output(p.host, b)
	}
}

// API warnings (deprecated versions, unknown fields) go to the output of
// the run whose request drew them, as kubectl prints them.
type printerKey struct{}

func withPrinter(ctx context.Context, p *printer) context.Context {
	return context.WithValue(ctx, printerKey{}, p)
}

type warningToSink struct{}

func (warningToSink) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	if p, ok := ctx.Value(printerKey{}).(*printer); ok {
		p.printf("Warning: %s\n", text)
	}
}

// MissingResources reports which API resources (plural.group, or a plural
// of the core group such as pods) the cluster does not serve, after fresh
// discovery (a CRD installed a moment ago counts). It checks rb's context
// guard first.
func (r *Runner) MissingResources(ctx context.Context, rb *runbook.Runbook, names []string) ([]string, error) {
	if _, err := r.Guard(rb); err != nil {
		return nil, err
	}
	r.resetDiscovery()
	var missing []string
	for _, n := range names {
		gr := schema.ParseGroupResource(n)
		if _, err := r.mapper.ResourceFor(gr.WithVersion("")); err != nil {
			if meta.IsNoMatchError(err) {
				missing = append(missing, n)
				continue
			}
			return nil, fmt.Errorf("discovery for %s: %w", n, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return missing, nil
}
