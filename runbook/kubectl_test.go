package runbook

import (
	"strings"
	"testing"
)

// TestKubectlArgs: each action's kubectl arguments, as the copied command
// and the exported script both write them (attribute values in {}, words
// that are quoted but not expanded in ”).
func TestKubectlArgs(t *testing.T) {
	for _, tc := range []struct{ attrs, want string }{
		{`action=get kind=Pod name=web namespace="${NS}"`, "get {Pod} {web} -n {${NS}} -o yaml"},
		{`action=get kind=Pod selector=app=web field-selector="spec.nodeName=${NODE}" jsonpath='{.items[*].metadata.name}'`,
			"get {Pod} -l {app=web} --field-selector {spec.nodeName=${NODE}} -o 'jsonpath={.items[*].metadata.name}'"},
		{`action=apply namespace=x`, "apply --server-side --field-manager=cairn --force-conflicts -n {x} -f -"},
		{`action=delete kind=Lease name=l namespace=kube-system`, "delete {Lease} {l} -n {kube-system} --wait=false"},
		{`action=patch kind=Role name=r`, "patch {Role} {r} --type strategic"},
		{`action=patch kind=Role name=r patch-type=json`, "patch {Role} {r} --type json"},
		{`action=scale kind=Deployment name=nginx replicas="${N}"`, "scale {Deployment} {nginx} {--replicas=${N}}"},
		{`action=wait kind=Deployment name=nginx for=condition=Available`, "wait {Deployment} {nginx} {--for=condition=Available}"},
		{`action=wait kind=ciliumnodes.cilium.io all=true for='jsonpath={.x}'`, "wait {ciliumnodes.cilium.io} --all {--for=jsonpath={.x}}"},
		{`action=wait kind=Pod all=true selector=a=b for=condition=Ready`, "wait {Pod} -l {a=b} {--for=condition=Ready}"},
	} {
		body := "\n"
		if strings.Contains(tc.attrs, "apply") || strings.Contains(tc.attrs, "patch") {
			body = "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: c\n"
			if strings.Contains(tc.attrs, "json") {
				body = "- op: add\n  path: /x\n  value: 1\n"
			}
		}
		src := "---\ntitle: t\nparams:\n  - name: NS\n    default: d\n  - name: NODE\n    default: n\n  - name: N\n    type: int\n    default: \"1\"\n---\n## s {#s}\n\n```yaml {#k target=kube " + tc.attrs + "}\n" + body + "```\n"
		rb, err := Parse("t.md", []byte(src))
		if err != nil {
			t.Errorf("%s: %v", tc.attrs, err)
			continue
		}
		var got []string
		for _, a := range KubectlArgs(rb.BlockByID("k")) {
			switch a.Kind {
			case ArgAttr:
				got = append(got, "{"+a.Text+"}")
			case ArgQuoted:
				got = append(got, "'"+a.Text+"'")
			default:
				got = append(got, a.Text)
			}
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.attrs, g, tc.want)
		}
	}
}
