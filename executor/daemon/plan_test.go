package daemon_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
)

// planMD: each block leaves a file named after it in $CAIRN_DIR when it
// runs, so a test sees exactly which ran.
const planMD = "---\ntitle: p\nslug: plan\n---\n" +
	"## Prepare {#prepare}\n\n" +
	"```bash {#a target=local expect.contains=a}\ntouch \"$CAIRN_DIR/a\"; echo a\n```\n\n" +
	"```bash {#b target=local confirm=\"this changes b\"}\ntouch \"$CAIRN_DIR/b\"\n```\n\n" +
	"## Change {#change}\n\n" +
	"```text {#by-hand target=manual}\nedit it by hand\n```\n\n" +
	"```bash {#c target=local}\ntouch \"$CAIRN_DIR/c\"; sleep \"${CAIRN_SLEEP:-0}\"\n```\n\n" +
	"```bash {#d target=local}\ntouch \"$CAIRN_DIR/d\"; exit 1\n```\n\n" +
	"```bash {#e target=local}\ntouch \"$CAIRN_DIR/e\"\n```\n\n" +
	"## Clean up {#cleanup}\n\n" +
	"```bash {#f target=local always=true}\ntouch \"$CAIRN_DIR/f\"\n```\n"

type planFixture struct {
	*fixture
	dir string
}

func newPlanFixture(t *testing.T, env ...string) *planFixture {
	t.Helper()
	return newPlanFixtureOf(t, planMD, env...)
}

// newPlanFixtureOf serves md (slug plan) instead of planMD.
func newPlanFixtureOf(t *testing.T, md string, env ...string) *planFixture {
	t.Helper()
	rb, err := runbook.Parse("plan.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j, err := executor.OpenJournal(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	eng := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{ExtraEnv: append(env, "CAIRN_DIR="+dir)}}, Journal: j}
	d := &daemon.Server{Engine: eng, Content: content{rb}, Token: token}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() { srv.Close(); d.Close(); j.Close() })
	return &planFixture{fixture: &fixture{srv: srv, rb: rb, d: d}, dir: dir}
}

// body is a plan request with every block's hash, as the page sends it.
func (f *planFixture) body(sel string, extra string) string {
	h := map[string]string{}
	for _, b := range f.rb.Blocks {
		if b.Executable() {
			h[b.ID] = b.Hash
		}
	}
	hj, _ := json.Marshal(h)
	return `{"runbook":"plan",` + sel + `,"hashes":` + string(hj) + extra + `}`
}

// ran is the blocks that left their file.
func (f *planFixture) ran() string {
	var out []string
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		if _, err := os.Stat(filepath.Join(f.dir, id)); err == nil {
			out = append(out, id)
		}
	}
	return strings.Join(out, ",")
}

func (f *planFixture) start(t *testing.T, body string) string {
	t.Helper()
	code, resp, _ := f.do(t, req{method: "POST", path: "/api/plans", body: body, header: auth(nil)})
	if code != 202 {
		t.Fatalf("start: %d %s", code, resp)
	}
	var started struct{ ID string }
	json.Unmarshal([]byte(resp), &started)
	return started.ID
}

// TestPlanRuns: a plan run through the API goes as cairn run goes, each
// block a run of its own in the journal.
func TestPlanRuns(t *testing.T) {
	for _, tc := range []struct {
		name, sel, extra string
		ran              string
		status, reason   string
	}{
		{"a step, confirmed", `"step":"prepare"`, `,"confirm":["b"]`, "a,b", "verified", ""},
		{"not confirmed on the page", `"step":"prepare"`, ``, "a", "error", `block \"b\" (this changes b) was not confirmed on the page`},
		{"stops at a manual step not done", `"from":"change"`, ``, "", "error", `stopped at manual step \"by-hand\"`},
		{"from a step, manual done, clean-up after the failure", `"from":"change"`, `,"done":["by-hand"]`, "c,d,f", "failed", `block \"d\" failed; resume from step \"change\"`},
		{"one block", `"block":"e"`, ``, "e", "verified", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPlanFixture(t)
			id := f.start(t, f.body(tc.sel, tc.extra))
			events := f.stream(t, id)
			if got := f.ran(); got != tc.ran {
				t.Errorf("ran %q, want %q\n%s", got, tc.ran, events)
			}
			if !strings.Contains(events, `"status":"`+tc.status+`"`) || !strings.Contains(events, tc.reason) {
				t.Errorf("want %s with %q:\n%s", tc.status, tc.reason, events)
			}
			// Each block that ran is a run of its own, journaled, with
			// its output.
			code, body, _ := f.do(t, req{method: "GET", path: "/api/runs?runbook=plan", header: auth(nil)})
			var recs []executor.Record
			json.Unmarshal([]byte(body), &recs)
			if n := len(strings.Split(tc.ran, ",")); code != 200 || tc.ran != "" && len(recs) != n {
				t.Errorf("journal: %d, %d records, want %d", code, len(recs), n)
			}
		})
	}
}

// TestPlanStreamNamesEachBlock: the plan's stream says which block comes
// up, which run it is, and how it ended; the block's own stream has its
// output.
func TestPlanStreamNamesEachBlock(t *testing.T) {
	f := newPlanFixture(t)
	id := f.start(t, f.body(`"step":"prepare"`, `,"confirm":["b"]`))
	events := f.stream(t, id)
	var runA string
	for _, line := range strings.Split(events, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"block":"a","run"`) {
			var pb struct{ Run string }
			json.Unmarshal([]byte(d), &pb)
			runA = pb.Run
			break
		}
	}
	for _, want := range []string{"event: next", `"block":"a","n":1,"total":2`, "event: block", "event: outcome", `"status":"verified"`, "2 verified, 0 skipped of 2 blocks"} {
		if !strings.Contains(events, want) {
			t.Errorf("plan stream lacks %q:\n%s", want, events)
		}
	}
	if runA == "" {
		t.Fatalf("no run id for block a:\n%s", events)
	}
	if out := f.stream(t, runA); !strings.Contains(out, `"data":"a\n"`) || !strings.Contains(out, "event: done") {
		t.Errorf("block a's stream:\n%s", out)
	}
}

// TestPlanRefused: a plan that would run a block the page did not show,
// or names what does not exist, is refused before anything runs.
func TestPlanRefused(t *testing.T) {
	f := newPlanFixture(t)
	stale := strings.Replace(f.body(`"step":"prepare"`, ""), f.rb.BlockByID("b").Hash, strings.Repeat("0", 64), 1)
	noHashes := `{"runbook":"plan","step":"prepare"}`
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"stale hash", stale, 409, "hash_mismatch"},
		{"no hashes", noHashes, 409, "hash_mismatch"},
		{"unknown step", f.body(`"step":"nope"`, ""), 404, `has no step \"nope\"`},
		{"two selections", f.body(`"step":"prepare","block":"a"`, ""), 404, "only one of"},
		{"no selection", `{"runbook":"plan"}`, 400, "one of step, from, block and from_block"},
		{"unknown runbook", `{"runbook":"../x","step":"prepare"}`, 404, "unknown_runbook"},
		{"undeclared param", f.body(`"step":"prepare"`, `,"params":{"X":"1"}`), 400, "bad_param"},
		{"a script field", f.body(`"step":"prepare"`, `,"script":"rm -rf /"`), 400, "unknown field"},
		{"no token", "", 401, "bad_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := auth(nil)
			if tc.code == 401 {
				h = map[string]string{"Content-Type": "application/json"}
				tc.body = f.body(`"step":"prepare"`, `,"confirm":["b"]`)
			}
			code, body, _ := f.do(t, req{method: "POST", path: "/api/plans", body: tc.body, header: h})
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s; want %d with %q", code, body, tc.code, tc.want)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if got := f.ran(); got != "" {
		t.Fatalf("a refused plan ran %s", got)
	}
}

// TestPlanCancel: cancelling a plan ends the running block and runs
// nothing after it, clean-up included (the reader stopped it).
func TestPlanCancel(t *testing.T) {
	f := newPlanFixture(t, "CAIRN_SLEEP=20")
	id := f.start(t, f.body(`"from":"change"`, `,"done":["by-hand"]`))
	deadline := time.Now().Add(10 * time.Second)
	for f.ran() != "c" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	code, body, _ := f.do(t, req{method: "POST", path: "/api/runs/" + id + "/cancel", header: auth(nil)})
	if code != 200 || !strings.Contains(body, `"cancelled"`) {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("cancel took %s", d)
	}
	if got := f.ran(); got != "c" {
		t.Errorf("ran %q after the cancel, want only c", got)
	}
}

func FuzzDecodePlanRequest(f *testing.F) {
	f.Add(`{"runbook":"plan","step":"prepare","hashes":{"a":"x"},"params":{"V":"x"},"confirm":["b"],"done":["by-hand"]}`)
	f.Add(`{"runbook":"plan"}`)
	f.Add(`{"runbook":"a","from":"b"}{}`)
	f.Fuzz(func(t *testing.T, s string) {
		req, err := daemon.DecodePlanRequest(strings.NewReader(s))
		if err == nil && (req.Runbook == "" || req.Step == "" && req.From == "" && req.Block == "") {
			t.Fatalf("accepted an incomplete request: %+v", req)
		}
	})
}

// TestPlanRefusesUnmetCaptures: a plan from a step whose block reads a
// value no block before it captures (and the session does not have) is
// refused before anything runs, naming the step to start at; once the
// step that captures it ran, the same plan runs.
func TestPlanRefusesUnmetCaptures(t *testing.T) {
	md := "---\ntitle: p\nslug: plan\n---\n" +
		"## Prepare {#prepare}\n\n" +
		"```bash {#a target=local capture.TOKEN='token (\\S+)' secret=TOKEN}\ntouch \"$CAIRN_DIR/a\"; echo token abcdefgh12345678\n```\n\n" +
		"## Use {#use}\n\n" +
		"```bash {#b target=local}\ntouch \"$CAIRN_DIR/b\"; test -n \"$TOKEN\"\n```\n"
	f := newPlanFixtureOf(t, md)
	code, body, _ := f.do(t, req{method: "POST", path: "/api/plans", body: f.body(`"from":"use"`, ""), header: auth(nil)})
	if code != 409 || !strings.Contains(body, "missing_capture") || !strings.Contains(body, `needs $TOKEN`) || !strings.Contains(body, "--from prepare") ||
		!strings.Contains(body, `"missing":{"block":"b","line":13,"name":"TOKEN","secret":true,"steps":[{"step":"prepare"}]}`) {
		t.Fatalf("%d %s; want 409 missing_capture naming the step prepare, in words and in parts", code, body)
	}
	if got := f.ran(); got != "" {
		t.Fatalf("a refused plan ran %s", got)
	}
	if events := f.stream(t, f.start(t, f.body(`"step":"prepare"`, ""))); !strings.Contains(events, "1 verified") {
		t.Fatalf("step prepare:\n%s", events)
	}
	if events := f.stream(t, f.start(t, f.body(`"from":"use"`, ""))); !strings.Contains(events, "1 verified") {
		t.Fatalf("from use, after prepare ran:\n%s", events)
	}
	if got := f.ran(); got != "a,b" {
		t.Fatalf("ran %s, want a,b", got)
	}
}

// TestPlanPreview: the preview says how a plan would go before anything
// runs (what the page's one confirmation for a step lists): each block,
// where it runs, the confirmation it asks, manual steps and skips; it runs
// nothing. from_block goes on from a block (after a manual step).
func TestPlanPreview(t *testing.T) {
	f := newPlanFixture(t)
	code, body, _ := f.do(t, req{method: "POST", path: "/api/plans/preview", body: f.body(`"from":"prepare"`, ""), header: auth(nil)})
	var got struct{ Blocks []daemon.PlannedBlock }
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("%d %s", code, body)
	}
	var lines []string
	for _, b := range got.Blocks {
		lines = append(lines, b.Block+" "+b.Step+" "+b.Skip+" "+b.Confirm+" "+b.Where)
	}
	want := []string{"a prepare   this machine", "b prepare  this changes b this machine", "by-hand change manual  ", "c change   this machine",
		"d change   this machine", "e change   this machine", "f cleanup   this machine"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("preview:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if strings.TrimSpace(got.Blocks[2].What) != "edit it by hand" || !strings.Contains(got.Blocks[0].What, `touch "$CAIRN_DIR/a"`) {
		t.Errorf("what: %+v", got.Blocks)
	}
	time.Sleep(100 * time.Millisecond)
	if f.ran() != "" {
		t.Fatalf("a preview ran %s", f.ran())
	}
	// The plan stopped at the manual step; done by hand, it goes on there.
	if events := f.stream(t, f.start(t, f.body(`"from_block":"by-hand"`, `,"done":["by-hand"]`))); !strings.Contains(events, `"status":"failed"`) {
		t.Errorf("from_block by-hand:\n%s", events)
	}
	if got := f.ran(); got != "c,d,f" {
		t.Errorf("from_block by-hand ran %s, want c,d,f", got)
	}
}
