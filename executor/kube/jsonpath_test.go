package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/runbook"
)

// objs decodes JSON objects with encoding/json (float64 numbers), as an
// engine reading a journal would have them.
func objs(t *testing.T, docs ...string) []any {
	t.Helper()
	var out []any
	for _, d := range docs {
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

const (
	web = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},
		"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"a","image":"x:1"},{"name":"b","image":"y:2"}]}}},
		"status":{"conditions":[{"type":"Available","status":"True"}]}}`
	api = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api"},"spec":{"replicas":3,"big":1000000}}`
)

func TestEvalJSONPath(t *testing.T) {
	o := objs(t, web, api)
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"{.metadata.name}", []string{"web", "api"}},
		{"{.spec.replicas}", []string{"2", "3"}},
		{"{.spec.big}", []string{"", "1000000"}}, // missing keys print nothing; no 1e+06
		{"{.spec.template.spec.containers[*].image}", []string{"x:1 y:2", ""}},
		{`{range .spec.template.spec.containers[*]}{.name}={.image};{end}`, []string{"a=x:1;b=y:2;", ""}},
		{`{.status.conditions[?(@.type=="Available")].status}`, []string{"True", ""}},
		{"{.metadata.labels}", []string{`{"app":"web"}`, ""}},
		{"{.spec.replicas}{.spec.replicas}", []string{"22", "33"}},
	} {
		got, err := kube.EvalJSONPath(o, tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s = %q, want %q", tc.path, got, tc.want)
		}
	}
	// The template is evaluated afresh per object (client-go's JSONPath
	// keeps state across range executions).
	got, err := kube.EvalJSONPath(objs(t, web, web, web), `{range .spec.template.spec.containers[*]}{.name}{end}`)
	if err != nil || strings.Join(got, "|") != "ab|ab|ab" {
		t.Errorf("range on three objects: %q %v", got, err)
	}
	if _, err := kube.EvalJSONPath(o, "{.spec.template.spec.containers[5].name}"); err == nil || !strings.Contains(err.Error(), "deployment/web") {
		t.Errorf("out of range: %v", err)
	}
	if _, err := kube.EvalJSONPath(o, "{.metadata.name"); err == nil {
		t.Error("an unclosed template was accepted")
	}
}

func TestCheckJSONPath(t *testing.T) {
	o := objs(t, web, api)
	check := func(s string) runbook.JSONPathCheck {
		c, err := runbook.ParseJSONPathCheck(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		check  string
		objs   []any
		ok     bool
		reason string
	}{
		{"{.spec.replicas}=3", o[1:], true, ""},
		{"{.spec.replicas}=3", o, false, "expected {.spec.replicas}=3 on every object; 1 of 2 do not: deployment/web has 2"},
		{"{.spec.replicas}=2", o[:1], true, ""},
		{"{.spec.replicas}=3", o[:1], false, "expected {.spec.replicas}=3 on every object; deployment/web has 2"},
		{"{.spec.replicas}!=0", o, true, ""},
		{"{.spec.replicas}!=2", o, false, "expected {.spec.replicas}!=2 on every object; 1 of 2 do not: deployment/web has 2"},
		{"{.metadata.name}", o, true, ""},
		{"{.spec.big}", o, false, `expected {.spec.big} (non-empty) on every object; 1 of 2 do not: deployment/web has ""`},
		{"{.spec.template.spec.containers[*].image}=x:1 y:2", o[:1], true, ""},
		{"{.spec.template.spec.containers[5].image}", o[:1], false, `expected {.spec.template.spec.containers[5].image} (non-empty) on every object; deployment/web has ""`},
		{"{.spec.template.spec.containers[*].image}=x:1", o[:1], false, `expected {.spec.template.spec.containers[*].image}=x:1 on every object; deployment/web has "x:1 y:2"`},
		{"{.spec.replicas}=3", nil, false, "expected {.spec.replicas}=3 on every object; there are none"},
		{`{.status.conditions[?(@.type=="Available")].status}=True`, o[:1], true, ""},
	} {
		ok, why := kube.CheckJSONPath(tc.objs, check(tc.check))
		if ok != tc.ok || why != tc.reason {
			t.Errorf("%s on %d objects = %v %q\nwant %v %q", tc.check, len(tc.objs), ok, why, tc.ok, tc.reason)
		}
	}
	// Empty lists and maps are empty.
	empty := objs(t, `{"kind":"CiliumNode","metadata":{"name":"kind-worker3"},"spec":{"ipam":{"pools":{"allocated":[]}}}}`)
	if ok, why := kube.CheckJSONPath(empty, check("{.spec.ipam.pools.allocated}")); ok || why != `expected {.spec.ipam.pools.allocated} (non-empty) on every object; ciliumnode/kind-worker3 has []` {
		t.Errorf("empty list: %v %q", ok, why)
	}
}

func TestCaptureJSONPath(t *testing.T) {
	o := objs(t, web, api)
	list := &runbook.Block{Action: "get", Kind: "deployments"}
	named := &runbook.Block{Action: "get", Kind: "deployments", Name: "web"}
	if got, err := kube.CaptureJSONPath(list, o, "{.items[*].metadata.name}"); err != nil || got != "web api" {
		t.Errorf("list capture %q %v", got, err)
	}
	if got, err := kube.CaptureJSONPath(list, o[:1], "{.items[*].metadata.name}"); err != nil || got != "web" {
		t.Errorf("list of one %q %v", got, err)
	}
	if got, err := kube.CaptureJSONPath(named, o[:1], "{.spec.replicas}"); err != nil || got != "2" {
		t.Errorf("named capture %q %v", got, err)
	}
}
