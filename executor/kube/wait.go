package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Back-off between re-lists when the API keeps failing or a watch ends at
// once.
const (
	relistMin = 250 * time.Millisecond
	relistMax = 5 * time.Second
)

// WaitError is a wait whose condition did not hold before the block's
// timeout. Its message is the reason, naming the objects that fail and what
// they have; it unwraps to executor.ErrTimeout.
type WaitError struct {
	Reason  string
	Elapsed time.Duration
}

func (e *WaitError) Error() string { return e.Reason }
func (e *WaitError) Unwrap() error { return executor.ErrTimeout }

// Detail is the line printed into the run's output.
func (e *WaitError) Detail() string {
	d := e.Elapsed.Round(time.Second)
	if e.Elapsed < 10*time.Second {
		d = e.Elapsed.Round(100 * time.Millisecond)
	}
	return fmt.Sprintf("timed out after %s: %s", d, e.Reason)
}

// waitCond is a parsed for=.
type waitCond struct {
	del        bool
	condType   string // condition=TYPE[=STATUS]
	condStatus string
	check      *runbook.JSONPathCheck // jsonpath=...
	text       string                 // as shown in reasons
}

func parseFor(s string) (waitCond, error) {
	switch {
	case s == "delete":
		return waitCond{del: true, text: "delete"}, nil
	case strings.HasPrefix(s, "condition="):
		typ, status, _ := strings.Cut(strings.TrimPrefix(s, "condition="), "=")
		if typ == "" {
			return waitCond{}, fmt.Errorf("for=%s: condition= needs a condition type such as Ready", s)
		}
		if status == "" {
			status = "True"
		}
		return waitCond{condType: typ, condStatus: status, text: s}, nil
	case strings.HasPrefix(s, "jsonpath="):
		c, err := runbook.ParseJSONPathCheck(strings.TrimPrefix(s, "jsonpath="))
		if err != nil {
			return waitCond{}, fmt.Errorf("for=%s: %w", s, err)
		}
		if _, err := compile(c.Path); err != nil {
			return waitCond{}, fmt.Errorf("for=%s: %w", s, err)
		}
		return waitCond{check: &c, text: describeCheck(c)}, nil
	}
	return waitCond{}, fmt.Errorf("for=%q: use condition=TYPE, jsonpath={.path}=VALUE, jsonpath={.path} or delete", s)
}

// eval says whether u satisfies the condition, and what it has instead.
func (w waitCond) eval(u *unstructured.Unstructured) (bool, string) {
	switch {
	case w.del:
		return false, "still exists"
	case u.GetDeletionTimestamp() != nil:
		// An object on its way out (a pod just deleted, still Ready while
		// it terminates) never satisfies a wait: the runbook is waiting
		// for its successor, or for the object to stay.
		return false, "a deletion in progress"
	case w.check != nil:
		text, empty, err := evalCheck(w.check.Path, u.Object)
		if err != nil {
			return false, err.Error()
		}
		return holds(*w.check, text, empty), show(text)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if t, _ := m["type"].(string); t != w.condType {
			continue
		}
		status, _ := m["status"].(string)
		has := w.condType + "=" + status
		if reason, _ := m["reason"].(string); reason != "" {
			has += " (" + reason + ")"
		}
		if !strings.EqualFold(status, w.condStatus) {
			return false, has
		}
		if og, ok := m["observedGeneration"].(int64); ok && og < u.GetGeneration() {
			return false, fmt.Sprintf("%s for generation %d, but the object is at generation %d", has, og, u.GetGeneration())
		}
		return true, has
	}
	return false, "no " + w.condType + " condition"
}

// waiter tracks the objects a wait watches.
type waiter struct {
	cond     waitCond
	res      resource
	ns       string
	name     string // "" for every object
	selector string
	fields   string
	objs     map[string]*unstructured.Unstructured // by namespace/name
	shown    string                                // last progress line
}

func key(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }

func (w *waiter) reset(items []unstructured.Unstructured) {
	w.objs = make(map[string]*unstructured.Unstructured, len(items))
	for i := range items {
		w.objs[key(&items[i])] = &items[i]
	}
}

func (w *waiter) sorted() []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(w.objs))
	for _, u := range w.objs {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(key(a), key(b)) })
	return out
}

// state evaluates every object: how many satisfy, and what the others have.
func (w *waiter) state() (done bool, ok int, lag []string) {
	objs := w.sorted()
	for _, u := range objs {
		if sat, has := w.cond.eval(u); sat {
			ok++
		} else {
			lag = append(lag, u.GetName()+" has "+has)
		}
	}
	if w.cond.del {
		return len(objs) == 0, 0, lag
	}
	return len(objs) > 0 && ok == len(objs), ok, lag
}

// subject names what is waited for: deployment.apps/web, or every
// ciliumnodes.cilium.io (in namespace x, with selector y).
func (w *waiter) subject() string {
	var s string
	if w.name != "" {
		s = w.res.ref(w.name)
	} else {
		s = "every " + w.res.plural()
	}
	if w.res.namespaced {
		s += " in namespace " + w.ns
	}
	if w.selector != "" {
		s += " with selector " + w.selector
	}
	if w.fields != "" {
		s += " with field selector " + w.fields
	}
	return s
}

// reason says why the wait does not hold (yet).
func (w *waiter) reason() string {
	_, ok, lag := w.state()
	n := len(w.objs)
	if w.cond.del {
		if w.name != "" {
			return fmt.Sprintf("expected %s to be deleted; it still exists%s", w.subject(), w.pendingDeletion())
		}
		names := make([]string, 0, n)
		for _, u := range w.sorted() {
			names = append(names, u.GetName())
		}
		return fmt.Sprintf("expected %s to be deleted; %d remain: %s%s", w.subject(), n, joinShown(names), w.pendingDeletion())
	}
	switch {
	case w.name != "" && n == 0:
		return fmt.Sprintf("expected %s to satisfy %s; it does not exist", w.subject(), w.cond.text)
	case w.name != "":
		_, has := w.cond.eval(w.sorted()[0])
		return fmt.Sprintf("expected %s to satisfy %s; it has %s", w.subject(), w.cond.text, has)
	case n == 0:
		return fmt.Sprintf("expected %s to satisfy %s; none exist", w.subject(), w.cond.text)
	}
	return fmt.Sprintf("expected %s to satisfy %s; %d of %d do; %s", w.subject(), w.cond.text, ok, n, joinShown(lag))
}

// pendingDeletion notes finalizers that hold objects back.
func (w *waiter) pendingDeletion() string {
	var held []string
	for _, u := range w.sorted() {
		if u.GetDeletionTimestamp() != nil && len(u.GetFinalizers()) > 0 {
			held = append(held, fmt.Sprintf("%s (finalizers %s)", u.GetName(), strings.Join(u.GetFinalizers(), ", ")))
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "; deletion is pending on " + joinShown(held)
}

// progress prints a line when the state changes in a way worth telling.
func (w *waiter) progress(p *printer) {
	_, ok, _ := w.state()
	var line string
	switch {
	case w.cond.del:
		line = fmt.Sprintf("waiting: %d of %s remain", len(w.objs), w.subject())
	case w.name != "" && len(w.objs) == 0:
		line = fmt.Sprintf("waiting: %s does not exist yet", w.subject())
	case w.name != "":
		_, has := w.cond.eval(w.sorted()[0])
		line = fmt.Sprintf("waiting: %s has %s", w.res.ref(w.name), has)
	default:
		line = fmt.Sprintf("waiting: %d of %d %s satisfy %s", ok, len(w.objs), w.res.plural(), w.cond.text)
	}
	if line != w.shown {
		w.shown = line
		p.printf("%s\n", line)
	}
}

func (w *waiter) objects() []any {
	out := make([]any, 0, len(w.objs))
	for _, u := range w.sorted() {
		out = append(out, plain(u))
	}
	return out
}

// wait lists the objects, then watches them until the condition holds for
// the named object, or for every matching object (at least one), or until
// they are gone (for=delete). A watch that ends (the server expires watches)
// is followed by a fresh list. ctx bounds it: on its deadline the result is
// a WaitError naming what does not hold.
func (r *Runner) wait(ctx context.Context, a *action, p *printer) ([]any, error) {
	cond, err := parseFor(a.waitFor)
	if err != nil {
		return nil, err
	}
	res, err := r.resolveKind(ctx, a.kind)
	if err != nil {
		return nil, err
	}
	if a.name == "" && !a.all && a.selector == "" && a.fieldSelector == "" {
		return nil, errors.New("wait needs name=, selector= or all=true")
	}
	ns := r.namespaceFor(a)
	w := &waiter{cond: cond, res: res, ns: ns, name: a.name, selector: a.selector, fields: a.fieldSelector}
	fields := a.fieldSelector
	if a.name != "" {
		fields = strings.Trim("metadata.name="+a.name+","+fields, ",")
	}
	opts := metav1.ListOptions{LabelSelector: a.selector, FieldSelector: fields}
	c := r.client(res, ns)
	start := time.Now()
	backoff := relistMin
	listed := false
	for {
		r.waitLists.Add(1)
		l, err := list(ctx, c, opts)
		if err == nil {
			listed = true
			w.reset(l.Items)
			if done, _, _ := w.state(); done {
				return w.succeed(p), nil
			}
			w.progress(p)
			began := time.Now()
			var done bool
			done, err = r.watchUntil(ctx, c, opts, l.GetResourceVersion(), w, p)
			if done {
				return w.succeed(p), nil
			}
			if err == nil && time.Since(began) > time.Second {
				backoff = relistMin // a watch that expired normally: re-list now
				continue
			}
		}
		if ctx.Err() != nil {
			break
		}
		if !retryable(err) {
			return w.objects(), fmt.Errorf("wait for %s: %w", w.subject(), err)
		}
		if sleep(ctx, backoff) != nil {
			break
		}
		backoff = min(2*backoff, relistMax)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return w.objects(), ctx.Err()
	}
	reason := w.reason()
	if !listed {
		reason = fmt.Sprintf("could not list %s before the timeout", w.subject())
	}
	return w.objects(), &WaitError{Reason: reason, Elapsed: time.Since(start)}
}

func (w *waiter) succeed(p *printer) []any {
	switch {
	case w.cond.del && w.name != "":
		p.printf("%s deleted\n", w.res.ref(w.name))
	case w.cond.del:
		p.printf("%s: none remain\n", w.subject())
	default:
		for _, u := range w.sorted() {
			p.printf("%s condition met\n", w.res.ref(u.GetName()))
		}
	}
	return w.objects()
}

// watchUntil watches from rv and applies events to w until the condition
// holds (true), the watch ends (false, nil: re-list) or fails.
func (r *Runner) watchUntil(ctx context.Context, c dynamic.ResourceInterface, opts metav1.ListOptions, rv string, w *waiter, p *printer) (bool, error) {
	secs := max(int64(r.cfg.WatchTimeout/time.Second), 1)
	opts.ResourceVersion = rv
	opts.AllowWatchBookmarks = true
	opts.TimeoutSeconds = &secs
	opts.Limit = 0
	r.waitWatches.Add(1)
	wi, err := c.Watch(ctx, opts)
	if err != nil {
		return false, err
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false, nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					w.objs[key(u)] = u
				}
			case watch.Deleted:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok {
					delete(w.objs, key(u))
				}
			case watch.Bookmark:
				continue
			case watch.Error:
				return false, apierrors.FromObject(ev.Object)
			}
			if done, _, _ := w.state(); done {
				return true, nil
			}
			w.progress(p)
		}
	}
}

// retryable reports whether a list or watch failure may pass: the API is
// busy or unreachable for a moment, or the watch's version expired.
func retryable(err error) bool {
	if err == nil {
		return true
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return true // connection trouble
	}
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err)
}
