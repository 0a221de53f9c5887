package sandbox

import (
	"maps"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

// TestFacts: a sandbox reports only what it has, under the names runbook
// parameters use.
func TestFacts(t *testing.T) {
	lb := &LBInfo{Name: LBName, Port: 41234}
	hosts := &Inventory{User: "cairn", IdentityFile: "/s/id_ed25519", Hosts: []Host{{Name: "cp0"}}}
	nodes := *hosts
	nodes.ImagesDir = "/bin/images"
	nodes.Groups = map[string][]string{GroupWorkers: {"w0"}}
	preflight := map[bool]string{false: "SystemVerification", true: ""}[cgroupV2()]
	for _, tc := range []struct {
		name string
		st   Status
		want map[string]string
	}{
		{"cluster only (loopback, --no-ssh)", Status{}, map[string]string{}},
		{"loopback hosts", Status{Inventory: hosts}, map[string]string{FactSSHUser: "cairn", FactSSHKey: "/s/id_ed25519"}},
		{"netns hosts and load balancer", Status{LB: lb, Inventory: hosts}, map[string]string{
			FactLBName: LBName, FactLBPort: "41234", FactSSHUser: "cairn", FactSSHKey: "/s/id_ed25519"}},
		{"nodes", Status{LB: lb, Inventory: &nodes, Nodes: true}, map[string]string{
			FactLBName: LBName, FactLBPort: "41234", FactSSHUser: "cairn", FactSSHKey: "/s/id_ed25519",
			FactNodeImages: "/bin/images", FactImageSource: "archive", FactCNI: "bridge",
			FactPodNetworkCIDR: NodePodNetworkCIDR, FactPreflightIgnore: preflight,
			FactWorkerNode: "w0", FactNodeInterface: "eth0", FactCiliumChart: "/bin/charts/cilium",
			FactCiliumVersion: CiliumVersion, FactTestImage: ImageWeb, FactNodeImage: ImageNodeShell}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := maps.Clone(tc.want)
			if v, ok := want[FactPreflightIgnore]; ok && v == "" {
				delete(want, FactPreflightIgnore) // a cgroup v2 machine passes SystemVerification
			}
			if got := tc.st.Facts(); !maps.Equal(got, want) {
				t.Errorf("Facts() = %v, want %v", got, want)
			}
		})
	}
}

// TestFactNamesMatchRunbook: the names a runbook may ask for are the ones a
// sandbox reports (runbook validates `sandbox:` against its own list).
func TestFactNamesMatchRunbook(t *testing.T) {
	a, b := slices.Sorted(slices.Values(FactNames)), slices.Sorted(slices.Values(runbook.SandboxFacts))
	if !slices.Equal(a, b) {
		t.Errorf("sandbox.FactNames %v, runbook.SandboxFacts %v", a, b)
	}
}
