package runbook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	yaml2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"
)

const podTemplate = `apiVersion: v1
kind: Pod
metadata:
  name: nginx-other-pool
  namespace: ${NS}
  annotations:
    ipam.cilium.io/ip-pool: "${POOL}"
spec:
  containers:
    - name: nginx
      image: ${IMAGE}   # ${IN_COMMENT}
      args: ["--size=${SIZE}"]
  priority: ${SIZE}
`

// The review's payload: a multi-line value that closes the Pod and adds a
// ClusterRoleBinding, when substituted as text.
const escalate = "nginx\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwn\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: default}]"

func decodeDocs(t *testing.T, js []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	for d.More() {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			t.Fatalf("decode %s: %v", js, err)
		}
		out = append(out, m)
	}
	return out
}

func TestManifestFillKeepsValuesInTheirScalars(t *testing.T) {
	m, err := ParseManifest(podTemplate)
	if err != nil {
		t.Fatal(err)
	}
	hostile := []string{
		escalate,
		"x\"\n  hostNetwork: true\n  y: \"",
		"a: b",
		"{\"kind\": \"ClusterRoleBinding\"}",
		"[1, 2]",
		"null",
		"~",
		"!!binary aGk=",
		"&a x",
		"*a",
		"'quoted'",
		"\\u0000",
		"${NS}",
	}
	for _, v := range hostile {
		js, err := m.Fill(map[string]string{"NS": "ns1", "POOL": v, "IMAGE": v, "SIZE": v})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		docs := decodeDocs(t, js)
		if len(docs) != 1 || docs[0]["kind"] != "Pod" {
			t.Fatalf("%q: structure changed: %s", v, js)
		}
		spec := docs[0]["spec"].(map[string]any)
		if len(spec) != 2 {
			t.Fatalf("%q: spec keys changed: %v", v, spec)
		}
		c := spec["containers"].([]any)[0].(map[string]any)
		if c["image"] != v {
			t.Errorf("%q: image = %#v, want the value as one string", v, c["image"])
		}
		if got := c["args"].([]any)[0]; got != "--size="+v {
			t.Errorf("%q: args[0] = %#v", v, got)
		}
		ann := docs[0]["metadata"].(map[string]any)["annotations"].(map[string]any)
		if ann["ipam.cilium.io/ip-pool"] != v {
			t.Errorf("%q: quoted annotation = %#v", v, ann["ipam.cilium.io/ip-pool"])
		}
	}
}

func TestManifestTypedScalars(t *testing.T) {
	m, err := ParseManifest("spec:\n  ipv4:\n    maskSize: ${SIZE}\n    quoted: \"${SIZE}\"\n    mixed: ${SIZE}x\n  flag: ${FLAG}\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		size, flag string
		wantSize   any
		wantFlag   any
	}{
		{"24", "true", json.Number("24"), true},
		{"-3", "false", json.Number("-3"), false},
		{"2.5", "yes", json.Number("2.5"), "yes"},
		{"0777", "null", "0777", "null"},
		{"24\nkind: X", "True", "24\nkind: X", "True"},
		{"1e3", "", json.Number("1e3"), ""},
	} {
		js, err := m.Fill(map[string]string{"SIZE": tc.size, "FLAG": tc.flag})
		if err != nil {
			t.Fatal(err)
		}
		spec := decodeDocs(t, js)[0]["spec"].(map[string]any)
		ipv4 := spec["ipv4"].(map[string]any)
		if !reflect.DeepEqual(ipv4["maskSize"], tc.wantSize) || !reflect.DeepEqual(spec["flag"], tc.wantFlag) {
			t.Errorf("%q %q: maskSize %#v flag %#v, want %#v %#v", tc.size, tc.flag, ipv4["maskSize"], spec["flag"], tc.wantSize, tc.wantFlag)
		}
		if ipv4["quoted"] != tc.size || ipv4["mixed"] != tc.size+"x" {
			t.Errorf("%q: quoted %#v mixed %#v: always strings", tc.size, ipv4["quoted"], ipv4["mixed"])
		}
	}
}

func TestManifestRefsAndErrors(t *testing.T) {
	m, err := ParseManifest("apiVersion: v1\nkind: ${KIND}\nmetadata:\n  name: ${NAME}\n  labels:\n    ${KEY}: x\n# ${GONE}\n---\n{\"kind\": \"ConfigMap\", \"apiVersion\": \"v1\", \"data\": {\"n\": ${N}}}\n")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ManifestRef{}
	for _, r := range m.Refs() {
		got[r.Name] = r
	}
	if r := got["KIND"]; r.Path != "kind" || r.Line != 2 || r.Doc != 1 || !r.Plain {
		t.Errorf("KIND: %+v", r)
	}
	if r := got["KEY"]; !r.Key || r.Path != "metadata.labels.${KEY}" {
		t.Errorf("KEY: %+v", r)
	}
	if r := got["GONE"]; r.Path != "" {
		t.Errorf("GONE: %+v", r)
	}
	if r := got["N"]; r.Doc != 2 || r.Path != "data.n" || !r.Plain {
		t.Errorf("N (JSON document): %+v", r)
	}
	if m.Docs() != 2 {
		t.Errorf("docs = %d", m.Docs())
	}
	if _, err := m.Fill(map[string]string{"KEY": "app", "NAME": "a", "KIND": "ConfigMap", "N": "1"}); err != nil {
		t.Fatal(err)
	}

	dup, err := ParseManifest("data:\n  ${A}: 1\n  b: 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dup.Fill(map[string]string{"A": "b"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("colliding keys: %v", err)
	}

	if _, err := ParseManifest("a: [1,\nb: ${X}\n"); err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Errorf("bad YAML: %v", err)
	}
}

func TestCheckFlagsManifestSplices(t *testing.T) {
	src := "---\ntitle: t\nparams:\n  - name: FREE\n  - name: SAFE\n    pattern: '^[a-z]+$'\n---\n## s\n\n" +
		"```yaml {#a target=kube action=apply}\napiVersion: v1\nkind: ${SAFE}\nmetadata:\n  name: ${FREE}\n  namespace: ${SAFE}\n  labels:\n    ${SAFE}: x\ndata:\n  image: ${FREE}\n```\n"
	_, err := Parse("t.md", []byte(src))
	ds := AllDiagnostics(err)
	var msgs []string
	for _, d := range ds {
		msgs = append(msgs, d.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		"t.md:14:1: block \"a\": parameter FREE sets metadata.name but accepts any text",
		"t.md:17:1: block \"a\": ${SAFE} is part of the key",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in\n%s", want, all)
		}
	}
	if len(ds) != 2 {
		t.Errorf("want 2 problems (kind: ${SAFE}, image: ${FREE} and namespace: ${SAFE} are fine), got\n%s", all)
	}
}

func FuzzManifest(f *testing.F) {
	f.Add(podTemplate, escalate)
	f.Add("a: ${X}\n---\nb: [\"${X}\"]\n", "1")
	f.Add("{\"a\": ${X}}", "true")
	f.Fuzz(func(t *testing.T, body, value string) {
		m, err := ParseManifest(body)
		if err != nil {
			return
		}
		vals := map[string]string{}
		empty := map[string]string{}
		for _, r := range m.Refs() {
			vals[r.Name] = value
			empty[r.Name] = "v"
		}
		a, err1 := m.Fill(vals)
		b, err2 := m.Fill(empty)
		if err1 != nil || err2 != nil {
			return // colliding keys
		}
		// Whatever the value, the documents keep their count and shape.
		if bytes.Count(a, []byte("\n")) != bytes.Count(b, []byte("\n")) {
			t.Fatalf("value %q changed the number of documents:\n%s\n%s", value, a, b)
		}
		if shape(t, a) != shape(t, b) {
			t.Fatalf("value %q changed the structure:\n%s\n%s", value, a, b)
		}
	})
}

// shape is the documents with every scalar blanked.
func shape(t *testing.T, js []byte) string {
	var sb strings.Builder
	d := json.NewDecoder(bytes.NewReader(js))
	for d.More() {
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatal(err)
		}
		sb.WriteString(shapeOf(v))
		sb.WriteByte('\n')
	}
	return sb.String()
}

func shapeOf(v any) string {
	switch x := v.(type) {
	case map[string]any:
		// Keys may hold values, so children are compared as a sorted multiset.
		var kids []string
		for _, c := range x {
			kids = append(kids, shapeOf(c))
		}
		sort.Strings(kids)
		return "{" + strings.Join(kids, ",") + "}"
	case []any:
		s := "["
		for _, c := range x {
			s += shapeOf(c) + ","
		}
		return s + "]"
	}
	return "s"
}

// TestCheckLiteralParamNamesAndLaterCaptures: namespace=NAMESPACE is the
// literal text (hosts=NAME is the only attribute that names a parameter
// bare), so check says how to write the reference; a capture used before
// the block that takes it is worded plainly.
func TestCheckLiteralParamNamesAndLaterCaptures(t *testing.T) {
	src := "---\ntitle: t\nparams:\n  - name: NAMESPACE\n    pattern: '^[a-z]+$'\n---\n## s\n\n" +
		"```text {#a target=kube action=get kind=pods namespace=NAMESPACE}\n```\n\n" +
		"```bash {#b target=local}\necho \"$TOKEN\"\n```\n\n" +
		"```bash {#c target=local capture.TOKEN='t=(.*)'}\necho t=1\n```\n"
	_, err := Parse("t.md", []byte(src))
	var msgs []string
	for _, d := range AllDiagnostics(err) {
		msgs = append(msgs, d.String())
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{
		`namespace=NAMESPACE is the literal text "NAMESPACE"; write namespace=$NAMESPACE to use the parameter`,
		`block "b": $TOKEN is captured by a block that comes after this one`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("missing %q in\n%s", want, all)
		}
	}
}

// TestCheckEmptyGreen: a block that loops over a command substitution and
// expects nothing positive would verify on a cluster without the objects.
func TestCheckEmptyGreen(t *testing.T) {
	for _, tc := range []struct {
		attrs, body string
		bad         bool
	}{
		{"", "for n in $(kubectl get nodes -o name); do echo $n; done", true},
		{"expect.not-contains=FAIL", "for n in $(kubectl get nodes -o name); do echo $n; done", true},
		{"expect.contains=ok", "for n in $(kubectl get nodes -o name); do echo ok $n; done", false},
		{"", "for i in $(seq 1 5); do echo $i; done", false},
		{"", "nodes=$(kubectl get nodes -o name)\nfor n in $nodes; do echo $n; done", false},
	} {
		src := "---\ntitle: t\n---\n## s\n\n```bash {#a target=local " + tc.attrs + "}\n" + tc.body + "\n```\n"
		_, err := Parse("t.md", []byte(src))
		got := err != nil && strings.Contains(err.Error(), "would verify having done nothing")
		if got != tc.bad {
			t.Errorf("%q %q: flagged %v, want %v (%v)", tc.attrs, tc.body, got, tc.bad, err)
		}
	}
}

// BenchmarkParseManifest: a kube block's manifest with and without
// references (without, there is one YAML decode, not two).
func BenchmarkParseManifest(b *testing.B) {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: %s\ndata:\n  a: \"1\"\n  b: two\n  list: |\n    one\n    two\n"
	for _, tc := range []struct{ name, body string }{
		{"plain", fmt.Sprintf(doc, "default")},
		{"refs", fmt.Sprintf(doc, "${NS}")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := ParseManifest(tc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestManifestPlainByText: a reference is plain (a number or a boolean may
// fill it) exactly when YAML reads it as a whole unquoted scalar, wherever
// it stands, also when the text alone shows it cannot be (no node decode).
func TestManifestPlainByText(t *testing.T) {
	for body, want := range map[string]bool{
		"a: ${X}\n":       true,
		"a: ${X} # why\n": true,
		"a:\n  ${X}\n":    true,
		"a: [${X}, 2]\n":  true,
		"a: [1,${X}]\n":   true,
		"a: {b: ${X}}\n":  true,
		`{"a":${X}}`:      true,
		"- ${X}\n":        true,
		"a: ${X}\r\n":     true,
		"a: !!str ${X}\n": false, // tagged: a string
		"a: \"${X}\"\n":   false,
		"a: '${X}'\n":     false,
		"a: r/${X}\n":     false,
		"a: ${X}-b\n":     false,
		"a: b${X}\n":      false,
		"a: |\n  ${X}\n":  false,
		"a: ${X}:1\n":     false,
		"a: [\"${X}\"]\n": false,
		"a: x ${X}\n":     false,
		"a: ${X} y\n":     false,
	} {
		m, err := ParseManifest(body)
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		if refs := m.Refs(); len(refs) != 1 || refs[0].Plain != want {
			t.Errorf("%q: refs %+v, want plain %v", body, refs, want)
		}
	}
}

// FuzzPlainByText: where the text decides a reference's plain-ness, it
// decides what the YAML node tree says (whenever that tree reads).
func FuzzPlainByText(f *testing.F) {
	for _, s := range []string{
		"a: ${X}\n", "a:\n  ${X}\n", "a: [${X}, 2]\n", `{"a":${X}}`, "- ${X}\n", "a: !!str ${X}\n",
		"a: \"${X}\"\n", "a: |-\n  ${X}\n", "a: \"\\\n  ${X}\"\n", "? ${X}\n: 1\n", "a: &x ${X}\nb: *x\n",
		"--- ${X}\n", "a: [\"${X}\", '${X}']\n", "a:\n- ${X}\n-  ${Y}\n", "a: >-\n  ${X}\n", podTemplate,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		byText, _, err := parseManifest(body, false)
		if err != nil {
			return
		}
		byNodes, ok, err := parseManifest(body, true)
		if err != nil || !ok {
			return
		}
		a, b := byText.Refs(), byNodes.Refs()
		for i := range a {
			// Only Plain: an aliased scalar's Path depends on map order.
			if a[i].Plain != b[i].Plain {
				t.Fatalf("%q: by text %+v, by nodes %+v", body, a[i], b[i])
			}
		}
	})
}

// FuzzYAMLToJSONValue: reading a document straight into JSON values gives
// what the Kubernetes decoder's YAMLToJSON and a JSON decode (UseNumber)
// give, or fails where it fails.
func FuzzYAMLToJSONValue(f *testing.F) {
	for _, s := range []string{
		podTemplate, "a: yes\nb: 0777\nc: 1e3\nd: .inf\n", "1: a\n2.5: b\ntrue: c\n", "a: \"\\xff\"\n",
		"a: 12345678901234567890\nb: -9223372036854775808\nc: 0x1F\nd: 1_000\n", "- [a, {b: c}]\n- ~\n",
		"a: 2001-12-14t21:59:43.10-05:00\nb: !!binary aGVsbG8=\n", "a: 1.0\nb: 0.000001\nc: 1e21\nd: -0.0\n",
		"? [a, b]\n: c\n", "a: &x {b: 1}\nc: *x\n", "a: .nan\n", "{a: 1, a: 2}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		got, err := yamlToJSONValue([]byte(doc))
		js, werr := yaml.YAMLToJSON([]byte(doc))
		var want any
		if werr == nil {
			d := json.NewDecoder(bytes.NewReader(js))
			d.UseNumber()
			werr = d.Decode(&want)
		}
		if (err != nil) != (werr != nil) {
			t.Fatalf("%q: error %v, YAMLToJSON's %v", doc, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) && !keysCollide(doc) {
			t.Fatalf("%q:\n got %#v\nwant %#v", doc, got, want)
		}
	})
}

// keysCollide reports whether two keys of one mapping of doc become the
// same string (0 and .0): which value wins is random in YAMLToJSON too.
func keysCollide(doc string) bool {
	var y any
	if yaml2.Unmarshal([]byte(doc), &y) != nil {
		return false
	}
	var walk func(any) bool
	walk = func(y any) bool {
		switch x := y.(type) {
		case []any:
			for _, c := range x {
				if walk(c) {
					return true
				}
			}
		case map[any]any:
			seen := map[string]bool{}
			for k, c := range x {
				v, err := jsonValue(map[any]any{k: nil})
				if err != nil {
					return false
				}
				for ks := range v.(map[string]any) {
					if seen[ks] {
						return true
					}
					seen[ks] = true
				}
				if walk(c) {
					return true
				}
			}
		}
		return false
	}
	return walk(y)
}
