package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// crdPoll is how often apply looks again for a kind whose CRD it applied.
const crdPoll = 250 * time.Millisecond

var crdGK = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// apply server-side applies every object of the block's manifest, in order,
// and stops at the first failure.
func (r *Runner) apply(ctx context.Context, a *action, p *printer) ([]any, error) {
	if a.manifest != nil {
		for _, ref := range a.manifest.Refs() {
			if ref.Key {
				return nil, fmt.Errorf("manifest document %d: ${%s} in the key %s; a parameter may only be a value", ref.Doc, ref.Name, ref.Path)
			}
		}
	}
	docs, err := decodeManifest(string(a.body))
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("the manifest has no objects")
	}
	// Kinds defined by CRDs applied above: they may take a moment to be served.
	defined := map[schema.GroupKind]string{}
	var out []any
	for _, d := range docs {
		u := &unstructured.Unstructured{Object: d.obj}
		gvk := u.GroupVersionKind()
		name := u.GetName()
		what := fmt.Sprintf("manifest document %d", d.n)
		if gvk.Kind == "" || gvk.Version == "" {
			return out, fmt.Errorf("%s: needs apiVersion and kind", what)
		}
		if name == "" {
			return out, fmt.Errorf("%s (%s): needs metadata.name (server-side apply cannot use generateName)", what, gvk.Kind)
		}
		res, err := r.mapForApply(ctx, gvk, defined)
		if err != nil {
			return out, fmt.Errorf("%s (%s %s): %w", what, gvk.Kind, name, err)
		}
		ns := ""
		if res.namespaced {
			ns = u.GetNamespace()
			switch {
			case ns == "":
				ns = r.namespaceFor(a)
				u.SetNamespace(ns)
			case a.namespace != "" && ns != a.namespace:
				return out, fmt.Errorf("%s: %s is in namespace %q but the block says namespace=%q", what, res.ref(name), ns, a.namespace)
			}
		} else {
			u.SetNamespace("")
		}
		applied, err := r.client(res, ns).Apply(ctx, name, u, metav1.ApplyOptions{FieldManager: r.cfg.FieldManager, Force: true})
		if crd, ok := defined[gvk.GroupKind()]; ok && apierrors.IsNotFound(err) && !namespaceMissing(err) {
			// Discovery remembered the kind from before its CRD was
			// deleted and applied again above: wait until it is served.
			applied, err = r.applyWhenServed(ctx, gvk, crd, ns, u)
		}
		if err != nil {
			return out, fmt.Errorf("apply %s: %w", res.ref(name), err)
		}
		p.printf("%s serverside-applied\n", res.ref(name))
		if gvk.GroupKind() == crdGK {
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			defined[schema.GroupKind{Group: group, Kind: kind}] = name
		}
		out = append(out, plain(applied))
	}
	return out, nil
}

// mapForApply maps an object's kind. An unknown kind refreshes discovery
// once; one that a CRD above defines is looked for until it is served.
func (r *Runner) mapForApply(ctx context.Context, gvk schema.GroupVersionKind, defined map[schema.GroupKind]string) (resource, error) {
	res, err := r.mapGVK(gvk)
	if err == nil || !meta.IsNoMatchError(err) {
		return res, err
	}
	crd, pending := defined[gvk.GroupKind()]
	if !pending {
		r.resetDiscovery()
		res, err = r.mapGVK(gvk)
		if err != nil && meta.IsNoMatchError(err) {
			return res, fmt.Errorf("the cluster does not serve %s in %s (is its CRD installed?)", gvk.Kind, gvk.GroupVersion())
		}
		return res, err
	}
	deadline := time.Now().Add(r.cfg.CRDWait)
	for {
		r.resetDiscovery()
		res, err = r.mapGVK(gvk)
		if err == nil || !meta.IsNoMatchError(err) {
			return res, err
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s in %s is not served %s after its CRD %s was applied (see the CRD's status.conditions)", gvk.Kind, gvk.GroupVersion(), r.cfg.CRDWait, crd)
		}
		if err := sleep(ctx, crdPoll); err != nil {
			return res, err
		}
	}
}

// applyWhenServed retries the apply of a custom resource whose CRD was just
// (re)created, refreshing discovery, until it is served or CRDWait passes.
func (r *Runner) applyWhenServed(ctx context.Context, gvk schema.GroupVersionKind, crd, ns string, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	deadline := time.Now().Add(r.cfg.CRDWait)
	for {
		if err := sleep(ctx, crdPoll); err != nil {
			return nil, err
		}
		r.resetDiscovery()
		res, err := r.mapGVK(gvk)
		if err == nil {
			var applied *unstructured.Unstructured
			applied, err = r.client(res, ns).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: r.cfg.FieldManager, Force: true})
			if err == nil || !apierrors.IsNotFound(err) {
				return applied, err
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s in %s is not served %s after its CRD %s was applied: %w", gvk.Kind, gvk.GroupVersion(), r.cfg.CRDWait, crd, err)
		}
	}
}

// namespaceMissing tells a NotFound for the object's namespace from one for
// the resource's endpoint.
func namespaceMissing(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		if d := st.Status().Details; d != nil && d.Kind == "namespaces" {
			return true
		}
	}
	return false
}

// doc is one object of a manifest; n counts documents from 1.
type doc struct {
	n   int
	obj map[string]any
}

// decodeManifest splits a multi-document YAML (or JSON) manifest into
// objects, expanding kind: List, and skipping empty documents. Integers stay
// int64.
func decodeManifest(body string) ([]doc, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(body), 4096)
	var docs []doc
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("manifest document %d: %w", n, err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			return nil, fmt.Errorf("manifest document %d: not an object: %w", n, err)
		}
		if len(obj) == 0 {
			continue
		}
		if obj["kind"] == "List" {
			items, _ := obj["items"].([]any)
			for i, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("manifest document %d: items[%d] is not an object", n, i)
				}
				docs = append(docs, doc{n: n, obj: m})
			}
			continue
		}
		docs = append(docs, doc{n: n, obj: obj})
	}
}

// plain is the object as returned to the engine: its JSON map, without
// managedFields (kubectl hides them too).
func plain(u *unstructured.Unstructured) any {
	if u == nil {
		return nil
	}
	u = u.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	return u.Object
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
