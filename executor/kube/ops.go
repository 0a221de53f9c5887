package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/executor"
)

// listChunk is the page size of lists, as kubectl's --chunk-size.
const listChunk = 500

// get prints the objects as YAML, or the block's jsonpath projection.
func (r *Runner) get(ctx context.Context, a *action, p *printer) ([]any, error) {
	res, err := r.resolveKind(ctx, a.kind)
	if err != nil {
		return nil, err
	}
	ns := r.namespaceFor(a)
	c := r.client(res, ns)
	var objs []any
	single := a.name != ""
	if single {
		if a.selector != "" || a.fieldSelector != "" {
			return nil, errors.New("name= cannot be combined with selector= or field-selector=")
		}
		u, err := c.Get(ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", res.ref(a.name), err)
		}
		objs = []any{plain(u)}
		if a.lease {
			if objs, err = r.watchRenewal(ctx, c, a, objs, p); err != nil {
				return objs, err
			}
		}
	} else {
		l, err := list(ctx, c, metav1.ListOptions{LabelSelector: a.selector, FieldSelector: a.fieldSelector})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", res.plural(), err)
		}
		for i := range l.Items {
			objs = append(objs, plain(&l.Items[i]))
		}
	}
	switch {
	case a.jsonpath != "":
		text, err := project(objs, !single, a.jsonpath)
		if err != nil {
			return objs, err
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		p.printf("%s", text)
	case !single && len(objs) == 0:
		if res.namespaced {
			p.printf("No resources found in %s namespace.\n", ns)
		} else {
			p.printf("No resources found\n")
		}
	default:
		var v any = listOf(objs)
		if single {
			v = objs[0]
		}
		y, err := yaml.Marshal(v)
		if err != nil {
			return objs, fmt.Errorf("print as YAML: %w", err)
		}
		p.write(y)
	}
	return objs, nil
}

// watchRenewal reads a Lease again until its renewTime moves, for at most
// its leaseDurationSeconds (plus a second): a live holder renews well
// within that (client-go renews every retryPeriod, 2 s by default), a dead
// one never does. The first read goes to p.before; the last is returned.
func (r *Runner) watchRenewal(ctx context.Context, c dynamic.ResourceInterface, a *action, objs []any, p *printer) ([]any, error) {
	p.before = objs
	first, ok := executor.LeaseOf(objs[0])
	if !ok || first.Holder == "" {
		return objs, nil // the check says what is wrong
	}
	deadline := time.Now().Add(first.Duration + time.Second)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := objs
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-t.C:
		}
		u, err := c.Get(ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return last, fmt.Errorf("get lease %s again: %w", a.name, err)
		}
		last = []any{plain(u)}
		if l, ok := executor.LeaseOf(last[0]); ok && (l.Holder != first.Holder || l.Renew.After(first.Renew)) {
			p.printf("# lease %s: held by %s, renewed %s → %s\n", l.Name, l.Holder, first.Renew.UTC().Format(time.RFC3339Nano), l.Renew.UTC().Format(time.RFC3339Nano))
			return last, nil
		}
	}
	p.printf("# lease %s: renewTime stayed %s for %s\n", first.Name, first.Renew.UTC().Format(time.RFC3339Nano), first.Duration+time.Second)
	return last, nil
}

// listOf wraps objects the way kubectl prints several: a v1 List.
func listOf(objs []any) map[string]any {
	items := objs
	if items == nil {
		items = []any{}
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}}
}

// list reads every page of a list.
func list(ctx context.Context, c dynamic.ResourceInterface, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	opts.Limit = listChunk
	var all *unstructured.UnstructuredList
	for {
		l, err := c.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		if all == nil {
			all = l
		} else {
			all.Items = append(all.Items, l.Items...)
		}
		if l.GetContinue() == "" {
			all.SetContinue("")
			return all, nil
		}
		opts.Continue = l.GetContinue()
	}
}

// patch sends the block body as a patch. Strategic merge is the default;
// custom resources do not support it, so for them it falls back to a JSON
// merge patch and says so.
func (r *Runner) patch(ctx context.Context, a *action, p *printer) ([]any, error) {
	res, err := r.resolveKind(ctx, a.kind)
	if err != nil {
		return nil, err
	}
	if a.name == "" {
		return nil, errors.New("patch needs name=")
	}
	c := r.client(res, r.namespaceFor(a))
	data := bytes.TrimSpace(a.body)
	if a.manifest != nil && a.manifest.Docs() != 1 {
		return nil, fmt.Errorf("patch body: one document expected, found %d", a.manifest.Docs())
	}
	var pt types.PatchType
	switch a.patchType {
	case "", "strategic":
		pt = types.StrategicMergePatchType
	case "merge":
		pt = types.MergePatchType
	case "json":
		pt = types.JSONPatchType
		var ops []any
		if err := json.Unmarshal(data, &ops); err != nil {
			return nil, fmt.Errorf("patch-type=json needs a JSON Patch: a list of operations such as [{\"op\": \"add\", \"path\": \"/rules/-\", \"value\": {...}}]")
		}
	default:
		return nil, fmt.Errorf("patch-type=%q: use strategic, merge or json", a.patchType)
	}
	before, err := c.Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", res.ref(a.name), err)
	}
	opts := metav1.PatchOptions{FieldManager: r.cfg.FieldManager}
	u, err := c.Patch(ctx, a.name, pt, data, opts)
	if err != nil && pt == types.StrategicMergePatchType && apierrors.IsUnsupportedMediaType(err) {
		p.printf("%s does not support strategic merge patch (a custom resource); sending it as a JSON merge patch, which replaces lists instead of merging them\n", res.plural())
		u, err = c.Patch(ctx, a.name, types.MergePatchType, data, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("patch %s: %w", res.ref(a.name), err)
	}
	if u.GetResourceVersion() == before.GetResourceVersion() {
		p.printf("%s patched (no change)\n", res.ref(a.name))
	} else {
		p.printf("%s patched\n", res.ref(a.name))
	}
	return []any{plain(u)}, nil
}

// delete removes one named object or every object matching the selectors,
// with background propagation, and does not wait for them to go.
func (r *Runner) delete(ctx context.Context, a *action, p *printer) ([]any, error) {
	res, err := r.resolveKind(ctx, a.kind)
	if err != nil {
		return nil, err
	}
	ns := r.namespaceFor(a)
	c := r.client(res, ns)
	bg := metav1.DeletePropagationBackground
	del := func(u *unstructured.Unstructured) error {
		uid := u.GetUID()
		err := c.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil {
			return fmt.Errorf("delete %s: %w", res.ref(u.GetName()), err)
		}
		p.printf("%s %q deleted\n", kindGroup(res), u.GetName())
		return nil
	}
	if a.name != "" {
		if a.selector != "" || a.fieldSelector != "" {
			return nil, errors.New("name= cannot be combined with selector= or field-selector=")
		}
		u, err := c.Get(ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("delete %s: %w", res.ref(a.name), err)
		}
		if err := del(u); err != nil {
			return nil, err
		}
		return []any{plain(u)}, nil
	}
	if a.selector == "" && a.fieldSelector == "" {
		return nil, fmt.Errorf("refusing to delete every %s: give name=, selector= or field-selector=", res.plural())
	}
	l, err := list(ctx, c, metav1.ListOptions{LabelSelector: a.selector, FieldSelector: a.fieldSelector})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", res.plural(), err)
	}
	var objs []any
	for i := range l.Items {
		err := del(&l.Items[i])
		if apierrors.IsNotFound(err) {
			continue // gone since the list
		}
		if err != nil {
			return objs, err
		}
		objs = append(objs, plain(&l.Items[i]))
	}
	if len(objs) == 0 {
		p.printf("No resources found\n")
	}
	return objs, nil
}

// kindGroup is kubectl's deletion label: deployment.apps, configmap.
func kindGroup(res resource) string {
	ref := res.ref("")
	return strings.TrimSuffix(ref, "/")
}

// scale sets replicas through the scale subresource and returns the Scale.
func (r *Runner) scale(ctx context.Context, a *action, p *printer) ([]any, error) {
	n, err := strconv.Atoi(strings.TrimSpace(a.replicas))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("replicas=%q is not a count ≥ 0", a.replicas)
	}
	if a.name == "" {
		return nil, errors.New("scale needs name=")
	}
	res, err := r.resolveKind(ctx, a.kind)
	if err != nil {
		return nil, err
	}
	c := r.client(res, r.namespaceFor(a))
	data := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	u, err := c.Patch(ctx, a.name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: r.cfg.FieldManager}, "scale")
	if err != nil {
		if apierrors.IsNotFound(err) {
			if _, gerr := c.Get(ctx, a.name, metav1.GetOptions{}); gerr == nil {
				return nil, fmt.Errorf("scale %s: %s has no scale subresource", res.ref(a.name), res.plural())
			}
		}
		return nil, fmt.Errorf("scale %s: %w", res.ref(a.name), err)
	}
	p.printf("%s scaled\n", res.ref(a.name))
	return []any{plain(u)}, nil
}
