package export_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/results"
)

// sessionRunbook keeps a directory and variables between blocks (session
// in the front matter), also after a failure, and leaves them for a block
// outside the session.
const sessionRunbook = "---\ntitle: Session\nsession: work\nparams:\n  - name: DIR\n  - name: PW\n    secret: true\n---\n\n## s {#s}\n\n" +
	"```bash {#go-there target=local}\nmkdir -p \"$DIR/sub\" && cd \"$DIR/sub\"\nexport GREETING='hello $(touch pwned) world' COUNT=1\nexport PASS=\"$PW\"\necho there\n```\n\n" +
	"```bash {#fail-after-cd target=local expect.exit=3}\ncd ..\nexport COUNT=$((COUNT+1))\nexit 3\n```\n\n" +
	"```bash {#still-there target=local expect.contains=\"count 2\"}\npwd\necho \"$GREETING\"\necho \"count $COUNT\"\n```\n\n" +
	"```bash {#fresh target=local session=none}\npwd\nenv | grep -q '^GREETING=' && echo has-greeting || echo greeting unset\n```\n"

// TestSessionMatchesExecutor: the exported script keeps a session's
// directory and exported variables between blocks as the executor does:
// the same verdicts and the same output, block by block, and the state
// line shows in neither.
func TestSessionMatchesExecutor(t *testing.T) {
	rb := parse(t, sessionRunbook)
	script := scriptFor(t, rb)
	work := t.TempDir()
	scriptDir := t.TempDir()
	path := filepath.Join(scriptDir, "session.sh")
	if err := os.WriteFile(path, script, 0o755); err != nil {
		t.Fatal(err)
	}
	const pw = "pw-7c1d-secret-value"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", path, "--yes", "--param", "DIR="+filepath.Join(work, "script"))
	cmd.Dir = scriptDir
	cmd.Env = append(os.Environ(), "PW="+pw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the script: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "cairn-session") || strings.Contains(string(out), "\x1e") {
		t.Errorf("the state line shows:\n%s", out)
	}
	found, _ := filepath.Glob(filepath.Join(scriptDir, "*.results.jsonl"))
	if len(found) != 1 {
		t.Fatalf("results files: %q\n%s", found, out)
	}
	data, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	f, err := results.Read("session.results.jsonl", data)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]executor.Record{}
	for _, r := range f.Records {
		got[r.Block] = r
	}

	e := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{Dir: scriptDir}}}
	for _, id := range []string{"go-there", "fail-after-cd", "still-there", "fresh"} {
		b := rb.BlockByID(id)
		r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: id, Hash: b.Hash, Params: map[string]string{"DIR": filepath.Join(work, "engine"), "PW": pw}})
		if err != nil {
			t.Fatal(err)
		}
		want := r.Execute(ctx, &discard{})
		g := got[id]
		// Each ran in its own folder: the same output once that is said.
		w := strings.ReplaceAll(want.Output, filepath.Join(work, "engine"), filepath.Join(work, "script"))
		if g.Status != want.Status || g.Output != w {
			t.Errorf("%s: script %s %q, executor %s %q", id, g.Status, g.Output, want.Status, w)
		}
	}
	if g := got["still-there"].Output; !strings.Contains(g, filepath.Join(work, "script")+"\n") || !strings.Contains(g, "hello $(touch pwned) world") {
		t.Errorf("the script's session did not keep its place: %q", g)
	}
	for _, d := range []string{"script", "engine"} {
		if _, err := os.Stat(filepath.Join(work, d, "pwned")); err == nil {
			t.Errorf("%s: a kept value ran as a command", d)
		}
	}
}
