package executor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/executor"
)

// TestSessionKeepsDirAndExports: blocks of one session share the working
// directory and exported variables, as consecutive commands in one shell
// (also after a block failed); a block outside it starts fresh; the state
// never shows in the output or the expectations' view, and a secret value
// kept in it is masked in the record. A value is data: one that looks like
// a command is kept and given back as it was.
func TestSessionKeepsDirAndExports(t *testing.T) {
	dir := t.TempDir()
	src := "---\ntitle: s\nsession: work\nparams:\n  - name: DIR\n  - name: PW\n    secret: true\n---\n## s {#s}\n\n" +
		"```bash {#go-there target=local}\nmkdir -p \"$DIR/sub\" && cd \"$DIR/sub\"\nexport GREETING='hello $(touch pwned) world' COUNT=1\nPLAIN=not-exported\nexport PASS=\"$PW\"\necho there\n```\n\n" +
		"```bash {#fail-after-cd target=local expect.exit=3}\ncd ..\nexport COUNT=$((COUNT+1))\nexit 3\n```\n\n" +
		"```bash {#still-there target=local expect.contains=\"count 2\"}\npwd\necho \"$GREETING\"\necho \"count $COUNT plain ${PLAIN:-unset}\"\n```\n\n" +
		"```bash {#fresh target=local session=none}\npwd\nenv | grep -q '^GREETING=' && echo has-greeting || echo greeting unset\n```\n"
	e, rb, _ := setupWith(t, src)
	params := map[string]string{"DIR": dir, "PW": "hunter2-secret"}
	rec, out, err := run(t, e, rb, "go-there", params, false)
	if err != nil || rec.Status != executor.StatusVerified {
		t.Fatalf("go-there: %v %+v", err, rec)
	}
	if strings.Contains(out, "cairn-session") || strings.Contains(rec.Output, "\x1e") || rec.Output != "there\n" {
		t.Errorf("the session's state shows in the output: %q / %q", out, rec.Output)
	}
	st := rec.Session.Hosts[""]
	if rec.Session.Name != "work" || st.Dir != filepath.Join(dir, "sub") || st.Vars["GREETING"] != "hello $(touch pwned) world" || st.Vars["PASS"] != executor.Mask || st.Vars["PLAIN"] != "" {
		t.Errorf("the record's session: %+v", rec.Session)
	}
	rec, _, _ = run(t, e, rb, "fail-after-cd", params, false)
	if rec.Status != executor.StatusVerified {
		t.Fatalf("fail-after-cd: %+v", rec)
	}
	rec, out, _ = run(t, e, rb, "still-there", params, false)
	if rec.Status != executor.StatusVerified || !strings.Contains(out, dir+"\n") || !strings.Contains(out, "hello $(touch pwned) world") || !strings.Contains(out, "plain unset") {
		t.Errorf("still-there: %+v\n%s", rec, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("a kept value ran as a command")
	}
	rec, out, _ = run(t, e, rb, "fresh", params, false)
	if rec.Status != executor.StatusVerified || strings.Contains(out, dir) || !strings.Contains(out, "greeting unset") || rec.Session != nil {
		t.Errorf("a block outside the session: %+v\n%s", rec, out)
	}
}
