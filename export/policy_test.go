package export_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/runbook"
)

// policyMD has every kind of block a run treats differently; each block
// that runs leaves a file named after it in $D.
const policyMD = "---\ntitle: p\nparams:\n  - name: D\n  - name: MODE\n    type: enum\n    values: [a, b]\n    default: a\n---\n" +
	"## One {#one}\n\n" +
	"```bash {#first target=local}\ntouch \"$D/first\"\n```\n\n" +
	"```bash {#only-b target=local when='MODE == \"b\"'}\ntouch \"$D/only-b\"\n```\n\n" +
	"## Two {#two}\n\n" +
	"```bash {#change target=local confirm=\"this changes it\"}\ntouch \"$D/change\"\n```\n\n" +
	"```text {#by-hand target=manual}\nedit the file by hand\n```\n\n" +
	"```bash {#breaks target=local}\ntouch \"$D/breaks\"; exit 3\n```\n\n" +
	"```bash {#after target=local}\ntouch \"$D/after\"\n```\n\n" +
	"## Three {#three}\n\n" +
	"```bash {#cleanup target=local always=true confirm=true}\ntouch \"$D/cleanup\"\n```\n\n" +
	"```bash {#last target=local}\ntouch \"$D/last\"\n```\n"

// lines answers prompts from standard input as cairn run does: a line per
// question, end of input an error.
type lines struct{ in *bufio.Reader }

func (l lines) Confirm(_ context.Context, p *executor.Prompt) (bool, error) {
	ans, err := l.in.ReadString('\n')
	if err != nil && ans == "" {
		return false, errors.New("no answer")
	}
	a := strings.ToLower(strings.TrimSpace(ans))
	return a == "y" || a == "yes", nil
}

func (l lines) Manual(_ context.Context, p *executor.Prompt) error {
	if _, err := l.in.ReadString('\n'); err != nil {
		return errors.New("no answer")
	}
	return nil
}

type quiet struct{}

func (quiet) Next(*runbook.Block, int, int)     {}
func (quiet) Start(*executor.Run) executor.Sink { return quiet{} }
func (quiet) Done(executor.Outcome)             {}
func (quiet) Output(string, []byte)             {}
func (quiet) Event(executor.Event)              {}

// TestRunPolicyMatchesPlan: the exported script goes through a runbook as
// executor.RunPlan does (cairn run, the page's plans): the same blocks
// run, skip and stop for the same selections, parameters and answers.
func TestRunPolicyMatchesPlan(t *testing.T) {
	rb := parse(t, policyMD)
	script, err := export.Script(rb, export.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sdir := t.TempDir()
	path := writeScript(t, sdir, "p.sh", script)
	ran := func(d string) string {
		var out []string
		for _, b := range rb.Blocks {
			if _, err := os.Stat(filepath.Join(d, b.ID)); err == nil {
				out = append(out, b.ID)
			}
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name  string
		sel   executor.Selection
		mode  string
		yes   bool
		stdin string
	}{
		{"yes to everything", executor.Selection{}, "a", true, ""},
		{"answered", executor.Selection{}, "b", false, "y\n\ny\n"},
		{"no to a confirmation", executor.Selection{}, "a", false, "n\n"},
		{"no input for a confirmation", executor.Selection{}, "a", false, ""},
		{"from a step, no answer for the clean-up", executor.Selection{From: "two"}, "a", false, "y\n\n"},
		{"one step, no answer at the manual step", executor.Selection{Step: "two"}, "a", false, "y\n"},
		{"from the last step", executor.Selection{From: "three"}, "b", false, "yes\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The script.
			sd := t.TempDir()
			args := []string{"--param", "D=" + sd, "--param", "MODE=" + tc.mode, "--log", filepath.Join(sd, "log")}
			if tc.sel.Step != "" {
				args = append(args, "--step", tc.sel.Step)
			}
			if tc.sel.From != "" {
				args = append(args, "--from", tc.sel.From)
			}
			if tc.yes {
				args = append(args, "--yes")
			}
			code, out := runScript(t, sdir, path, nil, tc.stdin, args...)
			os.Remove(filepath.Join(sd, "log"))
			os.Remove(filepath.Join(sd, "log.captures"))

			// The plan.
			gd := t.TempDir()
			e := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{}}}
			p, err := executor.NewPlan(rb, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			res, perr := e.RunPlan(context.Background(), p, executor.PlanOptions{
				Params: map[string]string{"D": gd, "MODE": tc.mode}, Yes: tc.yes,
				Prompter: lines{bufio.NewReader(strings.NewReader(tc.stdin))}}, quiet{})

			if g, s := ran(gd), ran(sd); g != s {
				t.Errorf("the plan ran %q, the script %q\n%s", g, s, out)
			}
			planOK := perr == nil && res.Failed == nil
			if planOK != (code == 0) {
				t.Errorf("the plan ended %v (failed %v), the script with exit %d\n%s", perr, res.Failed != nil, code, out)
			}
			t.Logf("ran %s; exit %d", ran(gd), code)
		})
	}
}
