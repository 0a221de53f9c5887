package export_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/export"
)

// TestGroupParallelNoFalseFailure runs the runtime's host-group loop with
// parallel hosts that all succeed, many times over. A host must never be
// "skipped: an earlier host failed" when none failed: the parent once read
// a sibling's exit file between its creation and its write, saw an empty
// status and stopped the group (CI, stop 25).
func TestGroupParallelNoFalseFailure(t *testing.T) {
	dir := t.TempDir()
	rt := filepath.Join(dir, "runtime.bash")
	if err := os.WriteFile(rt, []byte(export.RuntimeForTest()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Bounded: 150 groups of 6 hosts, 3 at a time; the hosts do nothing, so
	// the parent scans exit files while siblings are writing theirs.
	script := `set -u
source "$1"
cairn_tmp=$(mktemp -d)
trap 'rm -rf -- "$cairn_tmp"' EXIT
cairn_val[H]='h0,h1,h2,h3,h4,h5'
host() { :; }
for ((round = 0; round < 150; round++)); do
	cairn_exit=() cairn_err=() cairn_reasons=()
	cairn_group H 3 0 host >/dev/null
	for i in "${!cairn_hosts[@]}"; do
		if [[ ${cairn_exit[i]} != 0 || -n ${cairn_err[i]:-} ]]; then
			echo "round $round: host ${cairn_hosts[i]}: exit '${cairn_exit[i]}' ${cairn_err[i]:-}"
			exit 1
		fi
	done
done
echo ok
`
	cmd := exec.Command("bash", "-c", script, "bash", rt)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("group of parallel hosts that all succeed: %v\n%s", err, out)
	}
}
