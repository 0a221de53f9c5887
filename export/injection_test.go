package export_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/export"
)

// hostileRunbook has a title, step titles, a default, a manifest and a
// manual block that try to break out of quoting: command substitutions,
// backticks, quotes, semicolons, and lines equal to the heredoc delimiters
// the exporter would pick first.
const hostileRunbook = "---\n" +
	"title: 'T $(touch PWN1) `touch PWN2` ''q'' \"dq\"; touch PWN3 \\'\n" +
	"summary: 'CAIRN_EOF_USAGE'\n" +
	"params:\n" +
	"  - name: VAL\n" +
	"    default: 'd $(touch PWN4); `touch PWN5` ''x'' \"y\" \\'\n" +
	"  - name: TOKEN\n" +
	"    secret: true\n" +
	"    required: false\n" +
	"---\n\n" +
	"## Step $(touch PWN6) 'a' \"b\"; touch PWN7 {#s1}\n\n" +
	"```bash {#echo target=local expect.contains=\"ok\" capture.GOT='val=\\[(.*)\\]'}\n" +
	"printf 'val=[%s]\\n' \"$VAL\"\n" +
	"printf 'token=[%s]\\n' \"${TOKEN:-}\"\n" +
	"echo ok\n" +
	"```\n\n" +
	"```bash {#again target=local expect.contains=\"same\"}\n" +
	"[ \"$GOT\" = \"$VAL\" ] && echo same\n" +
	"```\n\n" +
	"```text {#by-hand target=manual}\n" +
	"Check $(touch PWN8) and `touch PWN9`; then ${VAL}\n" +
	"CAIRN_EOF_BY_HAND\n" +
	"```\n\n" +
	"## Kube $(touch PWN10) {#s2}\n\n" +
	"```yaml {#apply target=kube action=apply}\n" +
	"kind: ConfigMap\n" +
	"metadata:\n" +
	"  name: x\n" +
	"data:\n" +
	"  v: \"${VAL}\"\n" +
	"  w: ${VAL}\n" +
	"  script: |\n" +
	"    CAIRN_EOF_APPLY\n" +
	"    '$(touch PWN11)'\n" +
	"# CAIRN_EOF_APPLY_JSON\n" +
	"```\n"

var hostileValue = `v'a"l $(touch PWN20) ` + "`touch PWN21`" + ` ; touch PWN22 \ ${VAL} $VAL && echo HACKED`

func noPwn(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "PWN*"))
	if len(matches) > 0 {
		t.Fatalf("quoting broke: %v exist", matches)
	}
}

// TestInjection: hostile parameter values, titles and bodies stay literal.
func TestInjection(t *testing.T) {
	rb := parse(t, hostileRunbook)
	script, err := export.Script(rb, export.Options{Version: "test $(touch PWN30)", Source: "x'$(touch PWN31).md"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := writeScript(t, dir, "hostile.sh", script)
	log := filepath.Join(dir, "run.log")

	code, out := runScript(t, dir, path, nil, "", "--list")
	if code != 0 || !strings.Contains(out, "T $(touch PWN1) `touch PWN2` 'q' \"dq\"; touch PWN3 \\") {
		t.Fatalf("--list: exit %d\n%s", code, out)
	}
	code, out = runScript(t, dir, path, nil, "", "--help")
	if code != 0 || !strings.Contains(out, "CAIRN_EOF_USAGE") {
		t.Fatalf("--help: exit %d\n%s", code, out)
	}
	noPwn(t, dir)

	// The default, then a hostile --param value, then the same value from the
	// environment: each arrives as the literal string.
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"default", nil, nil, rb.ParamByName("VAL").Default},
		{"param", nil, []string{"--param", "VAL=" + hostileValue}, hostileValue},
		{"env", []string{"VAL=" + hostileValue}, nil, hostileValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--step", "s1", "--yes", "--log", log, "--param", "TOKEN=s3cr3t $(touch PWN40)"}, tc.args...)
			code, out := runScript(t, dir, path, tc.env, "", args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			if !strings.Contains(out, "val=["+tc.want+"]") {
				t.Errorf("value did not arrive literally; want val=[%s] in\n%s", tc.want, out)
			}
			if !strings.Contains(out, "same") {
				t.Errorf("the captured value differs from the parameter:\n%s", out)
			}
			if strings.Contains(out, "s3cr3t") || !strings.Contains(out, "token=[••••]") {
				t.Errorf("secret parameter not masked:\n%s", out)
			}
			// The text is shown as written; a value in it is shown quoted for
			// the shell, so that pasting it runs nothing.
			quoted, err := exec.Command("bash", "-c", `printf %q "$1"`, "_", tc.want).Output()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "Check $(touch PWN8) and `touch PWN9`; then "+string(quoted)) || !strings.Contains(out, "CAIRN_EOF_BY_HAND") {
				t.Errorf("manual text not shown with the value quoted (%s):\n%s", quoted, out)
			}
			for _, f := range []string{log, log + ".captures"} {
				if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v, want mode 0600", f, err)
				}
			}
			logText, _ := os.ReadFile(log)
			if strings.Contains(string(logText), "s3cr3t") {
				t.Errorf("secret in the log:\n%s", logText)
			}
			noPwn(t, dir)
		})
	}

	// The manifest, delimiter-like lines included, with the value filled in.
	code, out = runScript(t, dir, path, nil, "", "--dry-run", "--step", "s2", "--param", "VAL="+hostileValue)
	if code != 0 {
		t.Fatalf("--dry-run: exit %d\n%s", code, out)
	}
	var hvb strings.Builder
	enc := json.NewEncoder(&hvb)
	enc.SetEscapeHTML(false)
	enc.Encode(hostileValue)
	hv := strings.TrimSpace(hvb.String())
	for _, want := range []string{`"v":` + hv, `"w":` + hv, `CAIRN_EOF_APPLY\n'$(touch PWN11)'\n`} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	noPwn(t, dir)

	// A bad value is refused before anything runs, with every problem listed.
	code, out = runScript(t, dir, path, nil, "", "--param", "NOPE=1", "--param", "ALSO=2", "--yes")
	if code != 2 || !strings.Contains(out, "unknown parameter ALSO") || !strings.Contains(out, "unknown parameter NOPE") {
		t.Errorf("unknown parameters: exit %d\n%s", code, out)
	}
}

const typedRunbook = `---
title: Typed
params:
  - name: N
    type: int
  - name: B
    type: bool
  - name: E
    type: enum
    values: [a, b]
  - name: H
    type: host
  - name: HS
    type: hosts
    pattern: '^[a-z0-9.@:-]+$'
  - name: C
    type: cidr
  - name: D
    type: duration
  - name: P
    pattern: '^[a-z]+$'
---

## One {#one}

` + "```bash {#x target=local}\necho \"$N $B $E $H $HS $C $D $P\"\n```\n"

// TestParamValidation mirrors Param.Validate: the script accepts what the
// model accepts and refuses the rest, all problems at once.
func TestParamValidation(t *testing.T) {
	rb := parse(t, typedRunbook)
	script, err := export.Script(rb, export.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := writeScript(t, dir, "typed.sh", script)
	good := map[string][]string{
		"N":  {"0", "-12", "+7"},
		"B":  {"true", "false"},
		"E":  {"a", "b"},
		"H":  {"cp0", "root@cp0:2222", "10.0.0.1", "[::1]:22", "fe80::1", "a.example.org", "[::ffff:10.0.0.1]:22"},
		"HS": {"cp0 cp1", "cp0,cp1", "u@cp0:22 cp1"},
		"C":  {"10.0.0.0/16", "fd00::/64"},
		"D":  {"90s", "1h30m", "0", "1.5h"},
		"P":  {"abc"},
	}
	bad := map[string][]string{
		"N":  {"x", "1.5", ""},
		"B":  {"yes"},
		"E":  {"c"},
		"H":  {"bad host", "u;x@h", "h:0", "h:99999", "-x", "h:022", "h:+22", "[::1]:022", "a.example.org.", "127.1", "0x7f000001", "[:]"},
		"HS": {"cp0 BAD!"},
		"C":  {"10.0.0.0", "10.0.0.0/33", "x/8"},
		"D":  {"5", "m", "1x"},
		"P":  {"ABC", "a b"},
	}
	base := map[string]string{"N": "1", "B": "true", "E": "a", "H": "h", "HS": "h", "C": "10.0.0.0/8", "D": "1s", "P": "x"}
	args := func(k, v string) []string {
		a := []string{"--dry-run"}
		for name, bv := range base {
			if name == k {
				bv = v
			}
			a = append(a, "--param", name+"="+bv)
		}
		return a
	}
	for k, vs := range good {
		for _, v := range vs {
			if err := rb.ParamByName(k).Validate(v); err != nil {
				t.Fatalf("test table: model refuses %s=%q: %v", k, v, err)
			}
			if code, out := runScript(t, dir, path, nil, "", args(k, v)...); code != 0 {
				t.Errorf("%s=%q refused:\n%s", k, v, out)
			}
		}
	}
	for k, vs := range bad {
		for _, v := range vs {
			if v != "" && rb.ParamByName(k).Validate(v) == nil {
				t.Fatalf("test table: model accepts %s=%q", k, v)
			}
			code, out := runScript(t, dir, path, nil, "", args(k, v)...)
			if code != 2 || !strings.Contains(out, "parameter "+k) && !strings.Contains(out, "missing required parameters: "+k) {
				t.Errorf("%s=%q: exit %d, want a refusal naming it:\n%s", k, v, code, out)
			}
		}
	}
	// Missing ones are listed together.
	code, out := runScript(t, dir, path, nil, "", "--dry-run")
	if code != 2 || !strings.Contains(out, "missing required parameters: N, B, E, H, HS, C, D, P") {
		t.Errorf("missing: exit %d\n%s", code, out)
	}
}

// TestOptionalParamSetEmpty (review 8): an optional parameter with no value
// is set and empty in the exported script, so a set -u block runs.
func TestOptionalParamSetEmpty(t *testing.T) {
	rb := parse(t, "---\ntitle: O\nparams:\n  - name: OPT\n    required: false\n---\n\n## One {#one}\n\n```bash {#x target=local expect.contains=\"opt=[]\"}\necho \"opt=[$OPT]\"\n```\n")
	script, err := export.Script(rb, export.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := writeScript(t, dir, "opt.sh", script)
	if code, out := runScript(t, dir, path, []string{"OPT_UNRELATED=1"}, "", "--yes", "--log", filepath.Join(dir, "log")); code != 0 || !strings.Contains(out, "opt=[]") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestNoRetryForWhatCannotHeal: the script, like the executor, does not
// retry a command that is not there.
func TestScriptNoRetryForWhatCannotHeal(t *testing.T) {
	rb := parse(t, "---\ntitle: R\n---\n\n## One {#one}\n\n```bash {#missing target=local retries=5 interval=1h}\ncairn-no-such-command-xyz --version\n```\n")
	script, err := export.Script(rb, export.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := writeScript(t, dir, "r.sh", script)
	code, out := runScript(t, dir, path, nil, "", "--yes", "--log", filepath.Join(dir, "log"))
	if code != 1 || !strings.Contains(out, "not retried: a command was not found (exit 127)") || strings.Contains(out, "retrying in") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}
