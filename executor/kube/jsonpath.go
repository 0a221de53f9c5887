package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/util/jsonpath"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Checker is the engine's JSONPath support for kube expectations and
// captures (executor.Engine.Objects): EvalJSONPath and CheckJSONPath as
// methods.
type Checker struct{}

var _ executor.ObjectChecker = Checker{}

// CheckJSONPath implements executor.ObjectChecker.
func (Checker) CheckJSONPath(objects []any, c runbook.JSONPathCheck) (bool, string) {
	return CheckJSONPath(objects, c)
}

// EvalJSONPath implements executor.ObjectChecker.
func (Checker) EvalJSONPath(objects []any, path string) ([]string, error) {
	return EvalJSONPath(objects, path)
}

// maxShown bounds how many failing objects a reason names.
const maxShown = 10

// compile parses a kubectl JSONPath template with missing keys allowed, as
// kubectl -o jsonpath does. Each evaluation needs its own parse: client-go's
// JSONPath rewrites its parsed tree while executing range templates and
// negative indices.
func compile(tmpl string) (*jsonpath.JSONPath, error) {
	j := jsonpath.New("cairn").AllowMissingKeys(true)
	if err := j.Parse(tmpl); err != nil {
		return nil, fmt.Errorf("JSONPath %s: %w", tmpl, err)
	}
	return j, nil
}

// evalText runs tmpl on data and returns what kubectl would print, and
// whether it found nothing but empty values (missing, null, "", [] or {}).
func evalText(tmpl string, data any) (text string, empty bool, err error) {
	j, err := compile(tmpl)
	if err != nil {
		return "", true, err
	}
	results, err := j.FindResults(data)
	if err != nil {
		return "", true, fmt.Errorf("JSONPath %s: %w", tmpl, err)
	}
	var buf bytes.Buffer
	empty = true
	for _, rs := range results {
		if err := j.PrintResults(&buf, rs); err != nil {
			return "", true, fmt.Errorf("JSONPath %s: %w", tmpl, err)
		}
		for _, v := range rs {
			if !emptyValue(v) {
				empty = false
			}
		}
	}
	return buf.String(), empty, nil
}

// evalCheck is evalText for conditions: an index past the end of a list is
// "not there (yet)", not an error.
func evalCheck(tmpl string, data any) (string, bool, error) {
	text, empty, err := evalText(tmpl, data)
	if err != nil && strings.Contains(err.Error(), "array index out of bounds") {
		return "", true, nil
	}
	return text, empty, err
}

func emptyValue(v reflect.Value) bool {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	}
	return false
}

// normalize gives an object the shape the API client produces (maps, slices,
// int64 for whole numbers), whatever it was decoded with, so that JSONPath
// prints 3 rather than 3e+00 and filters compare numbers as numbers.
func normalize(obj any) any {
	data, err := json.Marshal(obj)
	if err != nil {
		return obj
	}
	var v any
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return obj
	}
	return v
}

// EvalJSONPath evaluates a kubectl JSONPath template ({.status.phase},
// {.items[*].metadata.name}, {range ...}{end}) on each object and returns
// what kubectl -o jsonpath would print for it, one string per object.
// Missing keys print as nothing; an invalid template or an execution error
// (an index out of range) is an error naming the object.
func EvalJSONPath(objects []any, path string) ([]string, error) {
	if _, err := compile(path); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(objects))
	for i, obj := range objects {
		text, _, err := evalText(path, normalize(obj))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", objRef(obj, i), err)
		}
		out = append(out, text)
	}
	return out, nil
}

// CaptureJSONPath evaluates a capture.NAME='jsonpath={...}' on what block b
// returned, as b's own jsonpath= would print it: on the object when the
// block names one object, else on a v1 List of them ({.items[*]...}).
func CaptureJSONPath(b *runbook.Block, objects []any, path string) (string, error) {
	asList := len(objects) != 1
	if b != nil && b.Name == "" && (b.Action == "get" || b.Action == "wait" || b.Action == "delete") {
		asList = true
	}
	return project(objects, asList, path)
}

// project prints path on objs the way kubectl get -o jsonpath does.
func project(objs []any, asList bool, path string) (string, error) {
	var data any
	if asList {
		norm := make([]any, len(objs))
		for i, o := range objs {
			norm[i] = normalize(o)
		}
		data = listOf(norm)
	} else if len(objs) == 1 {
		data = normalize(objs[0])
	} else {
		return "", fmt.Errorf("JSONPath %s: want one object, have %d", path, len(objs))
	}
	text, _, err := evalText(path, data)
	return text, err
}

// CheckJSONPath evaluates an expect.jsonpath on every object: {.path} must be
// non-empty, {.path}=v must print v, {.path}!=v must not. The reason names
// the objects that fail and what they have:
//
//	expected {.spec.replicas}=3 on every object; deployment/web has 2
func CheckJSONPath(objects []any, c runbook.JSONPathCheck) (ok bool, reason string) {
	want := describeCheck(c)
	if _, err := compile(c.Path); err != nil {
		return false, fmt.Sprintf("expected %s: %v", want, err)
	}
	if len(objects) == 0 {
		return false, fmt.Sprintf("expected %s on every object; there are none", want)
	}
	var bad []string
	for i, obj := range objects {
		ref := objRef(obj, i)
		text, empty, err := evalCheck(c.Path, normalize(obj))
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", ref, err))
		case !holds(c, text, empty):
			bad = append(bad, fmt.Sprintf("%s has %s", ref, show(text)))
		}
	}
	if len(bad) == 0 {
		return true, ""
	}
	if len(objects) == 1 {
		return false, fmt.Sprintf("expected %s on every object; %s", want, bad[0])
	}
	return false, fmt.Sprintf("expected %s on every object; %d of %d do not: %s", want, len(bad), len(objects), joinShown(bad))
}

// holds reports whether one object's evaluation satisfies c.
func holds(c runbook.JSONPathCheck, text string, empty bool) bool {
	switch c.Op {
	case "=", "==":
		return text == c.Value
	case "!=":
		return text != c.Value
	}
	return !empty
}

// describeCheck spells a check as written: {.a}=b, {.a}!=b, {.a} (non-empty).
func describeCheck(c runbook.JSONPathCheck) string {
	switch c.Op {
	case "":
		return c.Path + " (non-empty)"
	case "==":
		return c.Path + "=" + c.Value
	}
	return c.Path + c.Op + c.Value
}

// show quotes a value for a reason when it needs it: 2, "", "a b".
func show(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	if s == "" || strings.ContainsAny(s, " \t\n\"'\\,;") {
		return strconv.Quote(s)
	}
	return s
}

func joinShown(items []string) string {
	if len(items) <= maxShown {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:maxShown], ", ") + fmt.Sprintf(", and %d more", len(items)-maxShown)
}

// objRef names an object for a reason: deployment/web (kind lower-cased),
// or "object 2" when it has no name.
func objRef(obj any, i int) string {
	m, _ := obj.(map[string]any)
	kind, _ := m["kind"].(string)
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	switch {
	case name == "":
		return fmt.Sprintf("object %d", i+1)
	case kind == "":
		return name
	}
	return strings.ToLower(kind) + "/" + name
}

// CaptureJSONPath lets the engine evaluate captures with the block's own
// semantics (on the object, or on the list a list-get returned).
func (Checker) CaptureJSONPath(b *runbook.Block, objects []any, path string) (string, error) {
	return CaptureJSONPath(b, objects, path)
}
