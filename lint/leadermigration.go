package lint

import (
	"regexp"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

func init() { runbook.RegisterLint("leader-migration", LeaderMigration) }

// Controller names a Leader Migration configuration may list. The
// controller managers match them verbatim (aliases apply to --controllers
// only): a name neither side uses leaves that controller under each side's
// own lock, where both run it.
var (
	// KCM v1.28+ and k8s.io/cloud-provider v0.28+ (k8s.io/cloud-provider/names).
	migrationNamesCurrent = []string{"node-route-controller", "service-lb-controller", "cloud-node-lifecycle-controller", "cloud-node-controller", "node-ipam-controller"}
	// v1.27 and older.
	migrationNamesLegacy = []string{"route", "service", "cloud-node-lifecycle", "cloud-node", "nodeipam"}
	// The built-in default configuration's names (k8s.io/controller-manager
	// through v0.37), which match no current controller but one.
	migrationNamesDefault = []string{"route-controller", "service-controller"}
)

var (
	leaderMigrationKind = regexp.MustCompile(`(?m)^\s*kind:\s*["']?LeaderMigrationConfiguration`)
	leaderMigrationName = regexp.MustCompile(`(?m)^\s*-\s*name:\s*["']?([^"'\s#]+)`)
)

// LeaderMigration reports controller names in a Leader Migration
// configuration (in any code block: a file written by a command, or one
// shown) that no controller manager uses, and files that mix the names of
// two generations. Names taken from shell variables ($route) are not
// checked here.
func LeaderMigration(b *runbook.Block, report func(pos runbook.Pos, format string, args ...any)) {
	if !leaderMigrationKind.MatchString(b.Content) {
		return
	}
	gens := map[string]bool{}
	for _, m := range leaderMigrationName.FindAllStringSubmatchIndex(b.Content, -1) {
		name := b.Content[m[2]:m[3]]
		at := runbook.Pos{Line: b.BodyPos.Line + strings.Count(b.Content[:m[2]], "\n")}
		switch {
		case strings.ContainsAny(name, "${"):
		case slices.Contains(migrationNamesCurrent, name):
			gens["current (v1.28+)"] = true
		case slices.Contains(migrationNamesLegacy, name):
			gens["legacy (v1.27 and older)"] = true
		case slices.Contains(migrationNamesDefault, name):
			report(at, "Leader Migration configuration: %q is the built-in default's name and matches no controller; use %q (v1.28+) or %q (v1.27 and older)",
				name, migrationNamesCurrent[slices.Index(migrationNamesDefault, name)], migrationNamesLegacy[slices.Index(migrationNamesDefault, name)])
		default:
			report(at, "Leader Migration configuration: no controller manager has a controller %q (v1.28+: %s; v1.27 and older: %s); an unknown name leaves that controller running on both sides",
				name, strings.Join(migrationNamesCurrent, ", "), strings.Join(migrationNamesLegacy, ", "))
		}
	}
	if len(gens) > 1 {
		report(b.BodyPos, "Leader Migration configuration mixes current (v1.28+) and legacy (v1.27 and older) controller names; one controller manager will not recognise some of them")
	}
}
