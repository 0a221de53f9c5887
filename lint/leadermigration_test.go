package lint

import (
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

// TestRegistered: importing the package registers its lints with the model.
func TestRegistered(t *testing.T) {
	if !slices.Contains(runbook.Lints(), "leader-migration") {
		t.Fatalf("runbook.Lints() = %v, want leader-migration among them", runbook.Lints())
	}
}

// TestLeaderMigrationNamesChecked: a Leader Migration configuration in any
// code block lists only names a controller manager uses, of one generation;
// the built-in default's names and typos are errors that say what to use.
func TestLeaderMigrationNamesChecked(t *testing.T) {
	doc := func(names ...string) string {
		var b strings.Builder
		b.WriteString("---\ntitle: t\n---\n## a {#a}\n\n```yaml\nkind: LeaderMigrationConfiguration\ncontrollerLeaders:\n")
		for _, n := range names {
			b.WriteString("  - name: " + n + "\n    component: \"*\"\n")
		}
		b.WriteString("```\n")
		return b.String()
	}
	for _, tc := range []struct {
		names []string
		want  string // "" = no problem
	}{
		{[]string{"node-route-controller", "service-lb-controller", "cloud-node-lifecycle-controller"}, ""},
		{[]string{"route", "service", "cloud-node-lifecycle", "nodeipam"}, ""},
		{[]string{"$route", "$service"}, ""},
		{[]string{"route", "service-lb-controller"}, "mixes current"},
		{[]string{"route-controller"}, `use "node-route-controller" (v1.28+) or "route"`},
		{[]string{"servce"}, `no controller manager has a controller "servce"`},
	} {
		_, err := runbook.Parse("lm.md", []byte(doc(tc.names...)))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%v: %q, want %q", tc.names, got, tc.want)
		}
	}
}
