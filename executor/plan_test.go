package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// planRunbook has every kind of block a plan treats differently.
const planRunbook = "---\ntitle: p\nparams:\n  - name: MODE\n    type: enum\n    values: [a, b]\n    default: a\n---\n" +
	"## One {#one}\n\n" +
	"```bash {#first target=local expect.contains=ok}\necho ok\n```\n\n" +
	"```bash {#only-b target=local when='MODE == \"b\"'}\necho b\n```\n\n" +
	"## Two {#two}\n\n" +
	"```bash {#change target=local confirm=\"this restarts the thing\"}\necho changed\n```\n\n" +
	"```text {#by-hand target=manual}\nedit the file by hand\n```\n\n" +
	"```bash {#breaks target=local}\nexit 3\n```\n\n" +
	"```bash {#after target=local}\necho never\n```\n\n" +
	"## Three {#three}\n\n" +
	"```bash {#cleanup target=local always=true confirm=true}\necho cleaned\n```\n\n" +
	"```bash {#last target=local}\necho last\n```\n"

// answers is a Prompter with its answers given up front.
type answers struct {
	confirm map[string]bool  // block id -> answer; missing: no answer (error)
	manual  map[string]error // block id -> what the manual step returns
	asked   []string
}

func (a *answers) Confirm(_ context.Context, p *executor.Prompt) (bool, error) {
	a.asked = append(a.asked, "confirm "+p.Block.ID+": "+p.Message+" | "+p.Where+" | "+strings.TrimSpace(p.What))
	ok, given := a.confirm[p.Block.ID]
	if !given {
		return false, fmt.Errorf("no answer for %s", p.Block.ID)
	}
	return ok, nil
}

func (a *answers) Manual(_ context.Context, p *executor.Prompt) error {
	a.asked = append(a.asked, "manual "+p.Block.ID+": "+strings.TrimSpace(p.What))
	return a.manual[p.Block.ID]
}

// trace writes down what a plan did, one line per block.
type trace struct {
	sink
	lines []string
}

func (t *trace) Next(b *runbook.Block, n, total int) {}
func (t *trace) Start(r *executor.Run) executor.Sink { return &t.sink }
func (t *trace) Done(o executor.Outcome) {
	if o.Skip != "" {
		t.lines = append(t.lines, fmt.Sprintf("%s: %s (%s)", o.Block.ID, o.Skip, o.Why))
		return
	}
	t.lines = append(t.lines, fmt.Sprintf("%s: %s", o.Block.ID, o.Record.Status))
}

func TestRunPlan(t *testing.T) {
	noManual := map[string]error{"by-hand": errors.New("no answer")}
	for _, tc := range []struct {
		name    string
		sel     executor.Selection
		params  map[string]string
		yes     bool
		confirm map[string]bool
		manual  map[string]error
		want    []string
		asked   int
		err     string
		res     string // verified/skipped/total failed
	}{
		{
			name: "whole runbook, yes to everything",
			yes:  true,
			want: []string{"first: verified", "only-b: condition (MODE == \"b\" is false)", "change: verified", "by-hand: manual (done by hand)",
				"breaks: failed", `after: after-failure (block "breaks" failed (only always=true blocks run after a failure))`,
				"cleanup: verified", `last: after-failure (block "breaks" failed (only always=true blocks run after a failure))`},
			res: "3/1/8 breaks",
		},
		{
			name:    "asks and is answered",
			params:  map[string]string{"MODE": "b"},
			confirm: map[string]bool{"change": true, "cleanup": true},
			want:    []string{"first: verified", "only-b: verified", "change: verified", "by-hand: manual (done by hand)", "breaks: failed", `after: after-failure (block "breaks" failed (only always=true blocks run after a failure))`, "cleanup: verified", `last: after-failure (block "breaks" failed (only always=true blocks run after a failure))`},
			asked:   3,
			res:     "4/0/8 breaks",
		},
		{
			name:    "no to a confirmation stops the plan",
			confirm: map[string]bool{"change": false},
			want:    []string{"first: verified", "only-b: condition (MODE == \"b\" is false)"},
			asked:   1,
			err:     `block "change" not confirmed; stopped`,
			res:     "1/1/8 -",
		},
		{
			name:    "no answer to a clean-up after a failure skips only it",
			sel:     executor.Selection{From: "two"},
			confirm: map[string]bool{"change": true},
			want:    []string{"change: verified", "by-hand: manual (done by hand)", "breaks: failed", `after: after-failure (block "breaks" failed (only always=true blocks run after a failure))`, "cleanup: unconfirmed (no answer for cleanup)", `last: after-failure (block "breaks" failed (only always=true blocks run after a failure))`},
			asked:   3,
			res:     "1/0/6 breaks",
		},
		{
			name:    "a manual step not done stops the plan",
			sel:     executor.Selection{Step: "two"},
			confirm: map[string]bool{"change": true},
			manual:  noManual,
			want:    []string{"change: verified"},
			asked:   2,
			err:     "no answer",
			res:     "1/0/4 -",
		},
		{
			name: "one block",
			sel:  executor.Selection{Block: "last"},
			want: []string{"last: verified"},
			res:  "1/0/1 -",
		},
		{
			name:    "the rest of a step, from the manual step it stopped at",
			sel:     executor.Selection{Step: "two", FromBlock: "by-hand"},
			confirm: map[string]bool{"change": true},
			want:    []string{"by-hand: manual (done by hand)", "breaks: failed", `after: after-failure (block "breaks" failed (only always=true blocks run after a failure))`},
			asked:   1,
			res:     "0/0/3 breaks",
		},
		{
			name:    "from a block to the end",
			sel:     executor.Selection{FromBlock: "after"},
			confirm: map[string]bool{"cleanup": true},
			want:    []string{"after: verified", "cleanup: verified", "last: verified"},
			asked:   1,
			res:     "3/0/3 -",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, rb, _ := setupWith(t, planRunbook)
			p, err := executor.NewPlan(rb, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			a := &answers{confirm: tc.confirm, manual: tc.manual}
			tr := &trace{}
			res, err := e.RunPlan(context.Background(), p, executor.PlanOptions{Params: tc.params, Prompter: a, Yes: tc.yes}, tr)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if got, want := strings.Join(tr.lines, "\n"), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("plan went\n%s\nwant\n%s", got, want)
			}
			if len(a.asked) != tc.asked {
				t.Errorf("asked %d times, want %d: %q", len(a.asked), tc.asked, a.asked)
			}
			failed := "-"
			if res.Failed != nil {
				failed = res.Failed.ID
			}
			if got := fmt.Sprintf("%d/%d/%d %s", res.Verified, res.Skipped, res.Total, failed); got != tc.res {
				t.Errorf("result %s, want %s", got, tc.res)
			}
		})
	}
}

// TestPlanPromptSaysWhat: the confirmation names the block's message,
// where it runs and the command, as the page's confirmation does.
func TestPlanPromptSaysWhat(t *testing.T) {
	e, rb, _ := setupWith(t, planRunbook)
	p, _ := executor.NewPlan(rb, executor.Selection{Block: "change"})
	a := &answers{confirm: map[string]bool{"change": true}}
	if _, err := e.RunPlan(context.Background(), p, executor.PlanOptions{Prompter: a}, &trace{}); err != nil {
		t.Fatal(err)
	}
	// What is the command a reader would paste (runbook/paste).
	if want := "confirm change: this restarts the thing | this machine | # change: on this machine"; len(a.asked) != 1 ||
		!strings.HasPrefix(a.asked[0], want) || !strings.Contains(a.asked[0], "\necho changed\n") {
		t.Errorf("asked %q, want %q… with the body", a.asked, want)
	}
}

func TestNewPlanErrors(t *testing.T) {
	_, rb, _ := setupWith(t, planRunbook)
	for _, tc := range []struct {
		sel  executor.Selection
		want string
	}{
		{executor.Selection{Step: "four"}, `t.md has no step "four" (steps: one, two, three)`},
		{executor.Selection{From: "nope"}, `has no step "nope"`},
		{executor.Selection{Block: "nope"}, `t.md has no executable block "nope"`},
		{executor.Selection{Step: "one", Block: "first"}, "only one of"},
		{executor.Selection{From: "one", FromBlock: "first"}, "only one of"},
		{executor.Selection{FromBlock: "nope"}, `t.md has no executable block "nope"`},
	} {
		_, err := executor.NewPlan(rb, tc.sel)
		if !errors.Is(err, executor.ErrSelection) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPlan(%+v) = %v, want %q", tc.sel, err, tc.want)
		}
	}
}

// TestRunPlanHashes: a plan the page asked for stops at a block whose
// hash it did not see, before running it.
func TestRunPlanHashes(t *testing.T) {
	e, rb, _ := setupWith(t, planRunbook)
	p, _ := executor.NewPlan(rb, executor.Selection{Step: "one"})
	hashes := map[string]string{"first": rb.BlockByID("first").Hash, "only-b": "stale"}
	tr := &trace{}
	_, err := e.RunPlan(context.Background(), p, executor.PlanOptions{Hashes: hashes, Params: map[string]string{"MODE": "b"}}, tr)
	if !errors.Is(err, executor.ErrHashMismatch) {
		t.Fatalf("err = %v, want a hash mismatch", err)
	}
	if got := strings.Join(tr.lines, ","); got != "first: verified" {
		t.Errorf("ran %q, want only first", got)
	}
}

// FuzzSimilar: every template is similar to itself (a <placeholder> is a
// word, "..." is any text), and reading one never panics.
func FuzzSimilar(f *testing.F) {
	f.Add("Initialized <thing> in <n> ms\n...\ndone\n")
	f.Add("a ... b <x y> <>\n\t…\n[x](y)*+?{1}|^$\\")
	f.Fuzz(func(t *testing.T, tmpl string) {
		if strings.Contains(tmpl, "\r") {
			return // a CR ends a line on the page, not in a template
		}
		if ok, why := executor.Similar(tmpl, tmpl); !ok {
			t.Fatalf("%q is not similar to itself: %s", tmpl, why)
		}
	})
}

// resolver is a pod runner that only names pods (unit test of the prompt's
// words; the kube runner's Resolve is tested against a real apiserver in
// executor/kube, the page's in cmd/cairn).
type resolver struct {
	names []string
	err   error
}

func (r resolver) Run(context.Context, *executor.Job, executor.Sink) ([]executor.HostResult, error) {
	return nil, errors.New("not in this test")
}
func (r resolver) Resolve(context.Context, *executor.Job) ([]string, error) { return r.names, r.err }

// TestConfirmNamesPods: the confirmation of a pod block names the pods it
// would run in now, or says why they cannot be listed.
func TestConfirmNamesPods(t *testing.T) {
	src := "---\ntitle: p\n---\n## S {#s}\n\n```bash {#in-pods target=pod selector=app=web confirm=\"restart them\"}\ntrue\n```\n"
	for _, tc := range []struct {
		r    resolver
		want string
	}{
		{resolver{names: []string{"default/web-a", "default/web-b"}}, "— now: default/web-a, default/web-b"},
		{resolver{err: errors.New("no pods: pods of app=web in namespace default match none")}, "(cannot list them now: no pods: pods of app=web"},
	} {
		e, rb, _ := setupWith(t, src)
		e.Runners[executor.RunnerPod] = tc.r
		e.KubeWhere = func(*runbook.Runbook) (string, error) { return `context "x"`, nil }
		p, _ := executor.NewPlan(rb, executor.Selection{})
		a := &answers{confirm: map[string]bool{"in-pods": false}}
		_, _ = e.RunPlan(context.Background(), p, executor.PlanOptions{Prompter: a}, &trace{})
		if len(a.asked) != 1 || !strings.Contains(a.asked[0], tc.want) {
			t.Errorf("asked %q, want it to say %q", a.asked, tc.want)
		}
	}
	if got := executor.ShortList([]string{"a", "b", "c"}, 2); got != "a, b and 1 more" {
		t.Errorf("ShortList: %q", got)
	}
}
