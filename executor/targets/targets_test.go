package targets

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }

// TestUsesSandbox: the sandbox supplies targets unless a flag or
// $KUBECONFIG names others, or --sandbox says.
func TestUsesSandbox(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	for _, tc := range []struct {
		cfg  Config
		want bool
	}{
		{Config{}, true},
		{Config{Sandbox: "auto"}, true},
		{Config{Sandbox: "no"}, false},
		{Config{Kubeconfig: "k"}, false},
		{Config{SSHConfig: "s"}, false},
		{Config{Kubeconfig: "k", Sandbox: "yes"}, true},
		{Config{SSHConfig: "s", Sandbox: "start"}, true},
	} {
		if got := tc.cfg.UsesSandbox(); got != tc.want {
			t.Errorf("%+v: UsesSandbox() = %v, want %v", tc.cfg, got, tc.want)
		}
	}
	t.Setenv("KUBECONFIG", "/elsewhere")
	if (Config{}).UsesSandbox() {
		t.Error("$KUBECONFIG set: the sandbox is still used")
	}
}

// TestNewWithoutSandbox: with no sandbox and no cluster, kube blocks are
// off and say why, ssh blocks use the reader's SSH configuration; --sandbox=yes refuses to start and names
// the command; an unknown --sandbox value is refused.
func TestNewWithoutSandbox(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "sandbox")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	set, err := New(ctx, Config{SandboxDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if _, err := set.runner(executor.RunnerKube); err == nil || !strings.Contains(err.Error(), "kube blocks are off") {
		t.Errorf("kube runner: %v", err)
	}
	// SSH blocks go over the reader's own SSH configuration.
	if _, err := set.runner(executor.RunnerSSH); err != nil {
		t.Errorf("ssh runner: %v", err)
	}
	v := set.View().(TargetsView)
	if v.Sandbox.State != "absent" || v.Kube != "" || v.KubeError == "" || v.SSH != "ssh blocks use your SSH configuration" {
		t.Errorf("view %+v", v)
	}
	if _, err := set.KubeWhere(&runbook.Runbook{}); err == nil {
		t.Error("KubeWhere with no cluster: no error")
	}
	if _, err := New(ctx, Config{SandboxDir: dir, Sandbox: "yes"}); err == nil || !strings.Contains(err.Error(), "cairn sandbox up") {
		t.Errorf("--sandbox=yes without one: %v", err)
	}
	if _, err := New(ctx, Config{Sandbox: "maybe"}); err == nil || !strings.Contains(err.Error(), "want auto, yes, no or start") {
		t.Errorf("--sandbox=maybe: %v", err)
	}
}

// TestValues: a sandbox fact fills a parameter only when it is valid for it.
func TestValues(t *testing.T) {
	rb := &runbook.Runbook{Params: []*runbook.Param{
		{Name: "LB", Type: runbook.TypeString, Sandbox: "lb-name"},
		{Name: "PORT", Type: runbook.TypeInt, Sandbox: "lb-port"},
		{Name: "OTHER", Type: runbook.TypeString},
	}}
	got := Values(map[string]string{"lb-name": "lb.cairn.internal", "lb-port": "not-a-port"}, rb)
	if len(got) != 1 || got["LB"] != "lb.cairn.internal" {
		t.Errorf("Values = %v", got)
	}
	if Values(nil, rb) != nil {
		t.Error("no facts: values")
	}
}

// TestNewFromSandbox: with a running sandbox (real etcd, kube-apiserver
// and controller manager), --sandbox=yes gives kube blocks its cluster.
func TestNewFromSandbox(t *testing.T) {
	k := testrig.Kube(t)
	set, err := New(context.Background(), Config{Sandbox: "yes", SandboxDir: k.Sandbox.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	v := set.View().(TargetsView)
	if v.Sandbox.State != "running" || v.Kube == "" || v.Sandbox.ID == "" {
		t.Fatalf("view %+v", v)
	}
	if _, err := set.runner(executor.RunnerKube); err != nil {
		t.Errorf("kube runner: %v", err)
	}
	where, err := set.KubeWhere(&runbook.Runbook{})
	if err != nil || where == "" {
		t.Errorf("KubeWhere: %q, %v", where, err)
	}
}

// TestNoteConcerns: a note about kube or ssh blocks concerns only runs that
// have such blocks; one about the sandbox concerns every run.
func TestNoteConcerns(t *testing.T) {
	local := []*runbook.Block{{Target: runbook.TargetLocal}}
	both := []*runbook.Block{{Target: runbook.TargetLocal}, {Target: runbook.TargetKube}}
	for _, tc := range []struct {
		n      Note
		blocks []*runbook.Block
		want   bool
	}{
		{Note{Target: runbook.TargetKube, Text: "kube blocks are off"}, local, false},
		{Note{Target: runbook.TargetKube, Text: "kube blocks are off"}, both, true},
		{Note{Target: runbook.TargetSSH, Text: "ssh blocks are off"}, both, false},
		{Note{Target: runbook.TargetKube, Text: "kube blocks are off"}, []*runbook.Block{{Target: runbook.TargetPod}}, true},
		{Note{Target: runbook.TargetKube, Text: "kube blocks are off"}, []*runbook.Block{{Target: runbook.TargetNode}}, true},
		{Note{Text: "using the running sandbox"}, local, true},
		{Note{Text: "using the running sandbox"}, nil, true},
	} {
		if got := tc.n.Concerns(tc.blocks); got != tc.want {
			t.Errorf("%q.Concerns = %v, want %v", tc.n, got, tc.want)
		}
	}
}
