package export_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/export"
)

// needsMD is a join in miniature: an init step captures a secret token
// and a hash (one of two blocks, by MODE), a refresh step (when REFRESH)
// captures a new token, the join reads both.
const needsMD = "---\ntitle: n\nparams:\n  - name: D\n  - name: MODE\n    type: enum\n    values: [a, b]\n    default: a\n" +
	"  - name: REFRESH\n    type: bool\n    default: false\n---\n" +
	"## Init {#init}\n\n" +
	"```bash {#init-a target=local when='MODE == \"a\"' capture.TOKEN='token (\\S+)' capture.HASH='hash (\\S+)' secret=TOKEN}\necho \"token abcdefgh12345678 hash sha256:aa\"\n```\n\n" +
	"```bash {#init-b target=local when='MODE == \"b\"' capture.TOKEN='token (\\S+)' capture.HASH='hash (\\S+)' secret=TOKEN}\necho \"token bcdefghi23456789 hash sha256:bb\"\n```\n\n" +
	"## Refresh {#refresh when=REFRESH}\n\n" +
	"```bash {#refresh-token target=local capture.TOKEN='token (\\S+)' secret=TOKEN}\necho \"token zyxwvuts87654321\"\n```\n\n" +
	"## Join {#join}\n\n" +
	"```bash {#join target=local}\nprintf '%s %s\\n' \"$TOKEN\" \"$HASH\" > \"$D/join\"\n```\n"

// TestUnmetMatchesPlan: a run started where a captured value it reads
// cannot be had (a secret one is never kept; a first run keeps nothing) is
// refused by the exported script before anything runs, with the words of
// cairn run's check (executor.Plan.Unmet, UnmetError), naming the steps to
// start at instead; with the value at hand, both run.
func TestUnmetMatchesPlan(t *testing.T) {
	rb := parse(t, needsMD)
	script, err := export.Script(rb, export.Options{Version: "test", Source: "content/n.md"})
	if err != nil {
		t.Fatal(err)
	}
	rb.Path = "content/n.md"
	sdir := t.TempDir()
	path := writeScript(t, sdir, "n.sh", script)
	for _, tc := range []struct {
		name     string
		sel      executor.Selection
		params   map[string]string
		kept     bool   // an earlier whole run kept the non-secret HASH
		captures string // --capture given
		want     string // in the message; "" when the run may start
	}{
		{"first run from the join", executor.Selection{From: "join"}, nil, false, "",
			`block "join" (content/n.md:31) needs $HASH`},
		{"resumed from the join: the secret is not kept", executor.Selection{From: "join"}, nil, true, "",
			`--from init, --from refresh (block "refresh-token" runs when REFRESH)`},
		{"the other init block captures it", executor.Selection{From: "join"}, map[string]string{"MODE": "b"}, true, "",
			`(a secret capture: it is not kept between runs); start at a step that captures it: --from init, --from refresh (block`},
		{"refresh on: no condition to name", executor.Selection{From: "join"}, map[string]string{"REFRESH": "true"}, true, "",
			`--from init, --from refresh; or give it: --capture TOKEN=VALUE`},
		{"one step alone", executor.Selection{Step: "join"}, nil, true, "", `cannot run step "join" alone`},
		{"given with --capture", executor.Selection{From: "join"}, nil, true, "TOKEN=abcdefgh12345678", ""},
		{"from the refresh", executor.Selection{From: "refresh"}, map[string]string{"REFRESH": "true"}, true, "", ""},
		{"whole run", executor.Selection{}, nil, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := t.TempDir()
			log := filepath.Join(sd, "log")
			base := []string{"--param", "D=" + sd, "--log", log}
			for k, v := range tc.params {
				base = append(base, "--param", k+"="+v)
			}
			if tc.kept {
				if code, out := runScript(t, sdir, path, nil, "", "--param", "D="+sd, "--log", log); code != 0 {
					t.Fatalf("the earlier run: exit %d\n%s", code, out)
				}
				os.Remove(filepath.Join(sd, "join"))
			}
			args := append([]string(nil), base...)
			if tc.sel.From != "" {
				args = append(args, "--from", tc.sel.From)
			}
			if tc.sel.Step != "" {
				args = append(args, "--step", tc.sel.Step)
			}
			if tc.captures != "" {
				args = append(args, "--capture", tc.captures)
			}
			code, out := runScript(t, sdir, path, nil, "", args...)

			// cairn run's check, with what it would know.
			values, err := executor.ResolveParams(rb, map[string]string{"D": sd, "MODE": tc.params["MODE"], "REFRESH": tc.params["REFRESH"]})
			if err != nil {
				t.Fatal(err)
			}
			p, err := executor.NewPlan(rb, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			known := func(n string) bool {
				return (tc.kept && n == "HASH") || (tc.captures != "" && strings.HasPrefix(tc.captures, n+"="))
			}
			perr := executor.UnmetError(rb, tc.sel, values, p.Unmet(values, known))

			if tc.want == "" {
				if perr != nil || code != 0 {
					t.Fatalf("cairn run's check: %v; the script: exit %d\n%s", perr, code, out)
				}
				if _, err := os.Stat(filepath.Join(sd, "join")); err != nil {
					t.Errorf("the join did not run:\n%s", out)
				}
				return
			}
			if perr == nil {
				t.Fatal("cairn run's check let the run start")
			}
			msg := strings.TrimPrefix(perr.Error(), executor.ErrUnmet.Error()+": ")
			if !strings.Contains(msg, tc.want) {
				t.Errorf("cairn run's check says %q, want it to contain %q", msg, tc.want)
			}
			if code != 2 || !strings.Contains(out, ": "+msg+"\n") {
				t.Errorf("the script (exit %d) does not say what cairn run says:\n%s\nwant: %s", code, out, msg)
			}
			if _, err := os.Stat(filepath.Join(sd, "join")); err == nil {
				t.Errorf("the join ran")
			}
			t.Logf("both say: %s", msg)
		})
	}
}
