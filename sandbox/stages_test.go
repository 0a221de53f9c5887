package sandbox

import (
	"slices"
	"strings"
	"testing"
)

// TestStagesInOrder: for every shape Up accepts, each stage's needs are
// given by an earlier stage, and the shape runs the stages it always ran.
func TestStagesInOrder(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "ssh hosts, control plane, load balancer, first control plane, external etcd"},
		{Options{NoSSH: true}, "control plane, load balancer, first control plane"},
		{Options{NoKube: true}, "ssh hosts"},
		{Options{Nodes: true}, "node images, ssh hosts, container runtimes, kubelets, load balancer, cilium values, external etcd"},
		{Options{Nodes: true, NoKube: true}, "node images, ssh hosts, container runtimes, kubelets"},
	} {
		list, err := stagesFor(&tc.opts)
		if err != nil {
			t.Errorf("%+v: %v", tc.opts, err)
			continue
		}
		var names []string
		for _, st := range list {
			names = append(names, st.name)
		}
		if got := strings.Join(names, ", "); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", shape(!tc.opts.NoKube, !tc.opts.NoSSH, tc.opts.Nodes), got, tc.want)
		}
	}
	// A stage whose need nothing earlier gives is refused by name.
	saved := stages
	defer func() { stages = saved }()
	stages = slices.Clone(saved)
	slices.Reverse(stages)
	if _, err := stagesFor(&Options{Nodes: true}); err == nil || !strings.Contains(err.Error(), "which no earlier stage gives") {
		t.Errorf("stages out of order: %v", err)
	}
}

// TestCleanupsNamed: down undoes processes first, then what they held.
func TestCleanupsNamed(t *testing.T) {
	var names []string
	for _, c := range cleanups {
		names = append(names, c.name)
	}
	if got, want := strings.Join(names, ", "), "processes, marked processes, network devices, kubelet cgroups, hosts line"; got != want {
		t.Errorf("cleanups %s, want %s", got, want)
	}
}
