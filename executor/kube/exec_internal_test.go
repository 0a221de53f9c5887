package kube

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/nodepod"
)

func TestNewSelection(t *testing.T) {
	b := &runbook.Block{ID: "b", Target: runbook.TargetPod, Namespace: "$NS", Workload: "ds/$NAME", Container: "$C", Nodes: "$NODES", Image: "$IMG", Selector: "app=$APP", From: "$FROM"}
	good := map[string]string{"NS": "kube-system", "NAME": "cilium", "C": "agent", "NODES": "cp1, cp2 w1", "IMG": "reg.example:5000/x/node-shell:v1@sha256:ab", "APP": "web", "FROM": "cp0"}
	s, err := newSelection(b, good)
	if err != nil {
		t.Fatal(err)
	}
	if s.namespace != "kube-system" || s.workload != "ds/cilium" || s.container != "agent" || s.image != good["IMG"] || s.selector != "app=web" {
		t.Errorf("selection = %+v", s)
	}
	if got := runbook.SplitHosts(s.nodes); strings.Join(got, "|") != "cp1|cp2|w1" {
		t.Errorf("nodes = %q", got)
	}
	// A value is data for the field it lands in: it cannot widen a
	// selector, reach another namespace or become an option.
	for _, tc := range []struct{ name, value, want string }{
		{"APP", "web,tier!=x", "selector=app=$APP"},
		{"APP", "web tier", "selector=app=$APP"},
		{"NS", "kube-system/../x", "namespace=$NS"},
		{"NAME", "cilium/../../x", "workload=ds/$NAME"},
		{"NODES", "cp1;reboot", "nodes=$NODES"},
		{"IMG", "--privileged", "image=$IMG"},
		{"IMG", "busybox\nx", "image=$IMG"},
		{"C", "a b", "container=$C"},
		{"FROM", "cp0 cp1", "from=$FROM"},
		{"FROM", "", "from=$FROM is empty"},
	} {
		env := map[string]string{}
		for k, v := range good {
			env[k] = v
		}
		env[tc.name] = tc.value
		_, err := newSelection(b, env)
		if !errors.Is(err, executor.ErrBadParam) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: got %v, want ErrBadParam naming %s", tc.name, tc.value, err, tc.want)
		}
	}
}

func TestNodePod(t *testing.T) {
	r := &Runner{}
	job := &executor.Job{RunID: "run1", Block: &runbook.Block{ID: "edit-manifest", Timeout: 5 * time.Minute}}
	p := r.NodePod(job, "kube-system", "cp1", "img:v1")
	sp := p.Spec
	if sp.NodeName != "cp1" || !sp.HostPID || !sp.HostNetwork || !sp.HostIPC {
		t.Errorf("not pinned to the node's namespaces: %+v", sp)
	}
	if sp.ActiveDeadlineSeconds == nil || *sp.ActiveDeadlineSeconds != 360 {
		t.Errorf("activeDeadlineSeconds = %v, want the timeout plus a minute (360)", sp.ActiveDeadlineSeconds)
	}
	c := sp.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged || c.Image != "img:v1" {
		t.Errorf("container = %+v", c)
	}
	if strings.Join(c.Command, " ") != "sleep 360" {
		t.Errorf("command = %q", c.Command)
	}
	if len(sp.Tolerations) != 1 || sp.Tolerations[0].Operator != "Exists" || sp.Tolerations[0].Key != "" {
		t.Errorf("tolerations = %+v, want one that tolerates every taint", sp.Tolerations)
	}
	if sp.AutomountServiceAccountToken == nil || *sp.AutomountServiceAccountToken {
		t.Error("the node pod must not mount a service account token")
	}
	l := p.Labels
	if l[nodepod.LabelManagedBy] != "cairn" || l[nodepod.LabelRole] != nodepod.Role || l[nodepod.LabelRun] != "run1" || l[nodepod.LabelOwner] != Owner() {
		t.Errorf("labels = %v", l)
	}
	if p.Annotations[nodepod.AnnotationPID] == "" || !strings.HasPrefix(p.GenerateName, "cairn-node-cp1-") {
		t.Errorf("meta = %+v", p.ObjectMeta)
	}
	long := r.NodePod(job, "x", strings.Repeat("n", 80)+".example", "i")
	if len(long.GenerateName) > 58 {
		t.Errorf("generateName %q leaves no room for the suffix", long.GenerateName)
	}
}

func TestOwner(t *testing.T) {
	o := Owner()
	if o == "" || len(o) > 63 || !isSelectorValue(o) {
		t.Errorf("Owner() = %q is no label value", o)
	}
}

func TestProcessAlive(t *testing.T) {
	if !processAlive(strconv.Itoa(os.Getpid())) {
		t.Error("this process is not alive")
	}
	for _, v := range []string{"", "x", "-1", "0", "999999999"} {
		if processAlive(v) {
			t.Errorf("processAlive(%q) = true", v)
		}
	}
}

// TestNodeCopySources: a copy from this machine reads each source's mode
// and size before any node is touched; a directory, a device or a missing
// file fails the whole block at once, naming it.
func TestNodeCopySources(t *testing.T) {
	dir := t.TempDir()
	f := dir + "/key.pem"
	if err := os.WriteFile(f, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	copyJob := func(lines ...runbook.Copy) *executor.Job {
		return &executor.Job{RunID: "r", Env: map[string]string{"DIR": dir}, Block: &runbook.Block{ID: "c", Target: runbook.TargetNode, Action: "copy", Copies: lines}}
	}
	r := &Runner{}
	nc, err := r.newNodeCopy(t.Context(), copyJob(runbook.Copy{Src: "$DIR/key.pem", Dst: "/etc/x/$CAIRN_HOST.pem"}), quiet{}, "kube-system", "img", "")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.close()
	if got := nc.files[0]; got.path != f || got.mode != 0o600 || got.size != 7 || got.dst != "/etc/x/$CAIRN_HOST.pem" {
		t.Errorf("source read as %+v", got)
	}
	for src, want := range map[string]string{
		dir:                "the source is a directory",
		"/dev/null":        "the source is not a regular file",
		dir + "/no-such":   "no such file",
		"$DIR/also-absent": dir + "/also-absent",
	} {
		_, err := r.newNodeCopy(t.Context(), copyJob(runbook.Copy{Src: "$DIR/key.pem", Dst: "/a"}, runbook.Copy{Src: src, Dst: "/b"}), quiet{}, "kube-system", "img", "")
		if !errors.Is(err, executor.ErrPermanent) || !strings.Contains(err.Error(), want) {
			t.Errorf("source %s: %v, want ErrPermanent with %q", src, err, want)
		}
	}
}
