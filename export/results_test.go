package export_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/results"
)

// resultsRunbook's blocks print what is hard to carry in JSON from bash:
// quotes, backslashes, control characters, a NUL, CR LF, bytes that are not
// UTF-8, Korean, and a secret parameter's value.
const resultsRunbook = "---\ntitle: Results\nparams:\n  - name: MODE\n    default: \"on\"\n  - name: TOKEN\n    secret: true\n---\n\n" +
	"## One {#one}\n\n" +
	"```bash {#hostile target=local expect.contains='end'}\n" +
	`printf 'q "x" \\ b\tt\r\n'` + "\n" +
	`printf 'c\001\002\033[31m red\033[0m\177\n'` + "\n" +
	`printf 'nul:\000:after\n'` + "\n" +
	`printf 'bad \xff\xfe utf8, 한국어\n'` + "\n" +
	`echo "token=$TOKEN"` + "\n" +
	"echo end\n```\n\n" +
	"```bash {#skipped target=local when='MODE == \"off\"'}\necho never\n```\n\n" +
	"## Two {#two}\n\n" +
	"```bash {#fails target=local expect.exit=0 expect.contains='nope'}\necho 'not it'\nexit 4\n```\n"

// TestResultsMatchExecutor runs the exported script with bash and the
// executor on the same blocks: the results file must parse (results.Read,
// what cairn journal import uses) and say what the journal says: status,
// reasons, output (masked), exit codes and parameters.
func TestResultsMatchExecutor(t *testing.T) {
	rb := parse(t, resultsRunbook)
	script := scriptFor(t, rb)
	dir := t.TempDir()
	path := filepath.Join(dir, "results.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	const token = "tok-3e9f-secret-value"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path, "--yes")
	cmd.Env = append(os.Environ(), "TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d (want 1: block fails fails): %v\n%s", code, err, out)
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*.results.jsonl"))
	if len(found) != 1 {
		t.Fatalf("results files: %q\n%s", found, out)
	}
	data, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), token) {
		t.Fatalf("the secret is in the results file:\n%s", data)
	}
	f, err := results.Read("results.results.jsonl", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if len(f.Skipped) != 1 || len(f.Records) != 2 {
		t.Fatalf("records: %d, skipped %d\n%s", len(f.Records), len(f.Skipped), data)
	}
	got := map[string]executor.Record{}
	for _, r := range f.Records {
		got[r.Block] = r
	}

	e := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{ExtraEnv: []string{"CAIRN_TMP=" + t.TempDir()}}}}
	for _, id := range []string{"hostile", "fails"} {
		b := rb.BlockByID(id)
		r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: id, Hash: b.Hash, Params: map[string]string{"TOKEN": token}})
		if err != nil {
			t.Fatal(err)
		}
		want := roundTrip(t, r.Execute(ctx, &discard{}))
		g := got[id]
		if g.Status != want.Status || strings.Join(g.Reasons, ";") != strings.Join(want.Reasons, ";") {
			t.Errorf("%s: script says %s %q, executor %s %q", id, g.Status, g.Reasons, want.Status, want.Reasons)
		}
		// The script's output loses the NUL (bash cannot hold one); so does
		// nothing else.
		if w := strings.ReplaceAll(want.Output, "\x00", ""); g.Output != w {
			t.Errorf("%s: output\nscript:   %q\nexecutor: %q", id, g.Output, w)
		}
		if len(g.Hosts) != 1 || g.Hosts[0].Exit != want.Hosts[0].Exit {
			t.Errorf("%s: hosts %+v, executor %+v", id, g.Hosts, want.Hosts)
		}
		if g.Hash != b.Hash || g.Params["TOKEN"] != executor.Mask || g.Params["MODE"] != "on" || g.Step == "" || g.Site.Run == "" || g.Site.Source != rb.Hash {
			t.Errorf("%s: record %+v site %+v", id, g, g.Site)
		}
	}
}

// roundTrip gives a record as the journal export and an import see it
// (bytes that are not UTF-8 become U+FFFD).
func roundTrip(t *testing.T, r *executor.Record) executor.Record {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var out executor.Record
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type discard struct{ sync.Mutex }

func (*discard) Output(string, []byte) {}
func (*discard) Event(executor.Event)  {}

// TestScriptRefusesContext: a script run against a cluster whose context
// the runbook does not list stops before the block with a message naming
// the context and the allowed ones, and its results say the block could
// not run. (kubectl is a stub here: the refusal is the script's own logic.)
func TestScriptRefusesContext(t *testing.T) {
	rb := parse(t, "---\ntitle: K\nkube:\n  contexts: [cairn-sandbox, \"kind-*\"]\n---\n\n## S {#s}\n\n```bash {#k target=kube}\nkubectl get ns\n```\n")
	dir := t.TempDir()
	script := filepath.Join(dir, "k.sh")
	if err := os.WriteFile(script, scriptFor(t, rb), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	stub := "#!/bin/sh\ncase \"$*\" in *current-context*) echo prod-cluster ;; *) echo unexpected kubectl \"$@\" >&2; exit 3 ;; esac\n"
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script, "--yes")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), `kube context "prod-cluster" is not one of the runbook's kube.contexts [cairn-sandbox kind-*]`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	found, _ := filepath.Glob(filepath.Join(dir, "*.results.jsonl"))
	if len(found) != 1 {
		t.Fatalf("results files %q", found)
	}
	data, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := results.Read(found[0], data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 1 || f.Records[0].Status != executor.StatusError || !strings.Contains(strings.Join(f.Records[0].Reasons, ";"), "prod-cluster") {
		t.Errorf("results: %+v", f.Records)
	}
}

// TestResultManyHosts: a block on several hosts is one record with each
// host's output under its name, in the journal's own form.
func TestResultManyHosts(t *testing.T) {
	rb := parse(t, minimal)
	dir := t.TempDir()
	res := filepath.Join(dir, "r.jsonl")
	out, err := harness(t, scriptFor(t, rb), "from a\n", `printf 'from b\n' >"$cairn_tmp/out.1"; cairn_hosts=(a b); cairn_exit=(0 3); cairn_err=('' 'timed out after 5s'); cairn_target=ssh
cairn_results=$R; cairn_hash=h; cairn_id=b; cairn_t0="$(date -u '+%s.%N %Y-%m-%dT%H:%M:%S.%NZ')"; cairn_result failed 'b: expected exit status 0, got 3'`, "R="+res)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	data, _ := os.ReadFile(res)
	var r executor.Record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if r.Output != "── a ──\nfrom a\n── b ──\nfrom b\n" || len(r.Hosts) != 2 || r.Hosts[1].Output != "from b\n" || r.Hosts[1].Exit != 3 ||
		r.Hosts[1].Error != "timed out after 5s" || r.Where != "a b" || r.Status != executor.StatusFailed {
		t.Errorf("record %+v", r)
	}
}

// TestResultsCutShort: a run killed while it wrote a record leaves a line
// cut short; the next run drops it, says so, and the file reads whole.
func TestResultsCutShort(t *testing.T) {
	rb := parse(t, "---\ntitle: C\n---\n\n## S {#s}\n\n```bash {#a target=local}\necho a\n```\n")
	dir := t.TempDir()
	script := filepath.Join(dir, "c.sh")
	if err := os.WriteFile(script, scriptFor(t, rb), 0o755); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "c.results.jsonl")
	run := func() string {
		code, out := runScript(t, dir, script, nil, "", "--results", res)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, out)
		}
		return out
	}
	run()
	whole, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	// The second record, cut short as a kill -9 mid-write leaves it.
	if err := os.WriteFile(res, append(append([]byte(nil), whole...), whole[:len(whole)/2]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(); !strings.Contains(out, "dropped the last line of "+res) {
		t.Errorf("the script did not say it dropped the cut line:\n%s", out)
	}
	data, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	f, err := results.Read(res, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 2 {
		t.Errorf("%d records, want the first run's and the second's", len(f.Records))
	}
}
