package export_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/runbook"
)

// These tests hold the script's runtime against the executor itself (test
// code may import it; package export does not): the same templates, outputs
// and expressions must give the same verdicts and values.

// harness runs bash with an exported script's runtime loaded (everything
// before the runbook's own functions) and cmd after it.
func harness(t *testing.T, script []byte, out, cmd string, env ...string) (string, error) {
	t.Helper()
	s := string(script)
	cut := strings.Index(s, "\ncairn_main \"$@\"")
	if cut < 0 {
		t.Fatal("no cairn_main call in the script")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "out.0"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(dir, "lib.bash")
	if err := os.WriteFile(lib, []byte(s[:cut]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A guard against a script that hangs, not a timing assertion: generous,
	// because CI runs this beside the sandbox tests on two cores.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", `source "$1"; cairn_tmp=$2; cairn_hosts=(h); cairn_target=local; `+cmd, "_", lib, dir)
	c.Env = append(os.Environ(), env...)
	b, err := c.CombinedOutput()
	return string(b), err
}

var minimal = "---\ntitle: M\n---\n\n## S {#s}\n\n```bash {#b target=local expect.match='x'}\necho x\n```\n"

func TestSimilarMatchesExecutor(t *testing.T) {
	rb := parse(t, minimal)
	script := scriptFor(t, rb)
	var cases [][2]string // template, output
	// The expected-output blocks of the bundled runbooks, against themselves,
	// against each other's outputs and against edited copies.
	set, err := runbook.LoadDir(contentDir)
	if err != nil {
		t.Fatal(err)
	}
	var tmpls []string
	for _, r := range set.Runbooks {
		for _, b := range r.Blocks {
			for _, s := range b.Expect.Similar {
				tmpls = append(tmpls, s.Content)
			}
		}
	}
	if len(tmpls) == 0 {
		t.Fatal("no match=similar blocks in the bundled runbooks")
	}
	for i, tm := range tmpls {
		filled := strings.NewReplacer("<", "", ">", "", "...", "anything at all").Replace(tm)
		cases = append(cases,
			[2]string{tm, tm},
			[2]string{tm, "progress first\n" + filled + "\ntrailer\n"},
			[2]string{tm, strings.Replace(filled, "\n", "\n\n  ", 1)},
			[2]string{tm, tmpls[(i+1)%len(tmpls)]},
			[2]string{tm, strings.ToUpper(filled)},
		)
	}
	cases = append(cases,
		[2]string{"a\n...\nb\n", "a\nx\ny\nb\n"},
		[2]string{"a\nb\n", "a\nx\nb\n"},
		[2]string{"key: <v> [x] (y) a.b*c+d?e{1}|$^\\\n", "key: 12 [x] (y) a.b*c+d?e{1}|$^\\\n"},
		[2]string{"key: <v> [x]\n", "key: 12 [y]\n"},
		[2]string{"one ... three\n", "one two three\n"},
		[2]string{"b\na\n", "a\nb\n"},
		[2]string{"<a b> c\n", "<a b> c\n"},
		[2]string{"\t spaced   out \n", "spaced out"},
		// White space is ASCII on both sides (runbook.SimilarSpace): a
		// no-break space is text, a vertical tab is space.
		[2]string{"a\u00a0b\n", "a\u00a0b\n"},
		[2]string{"a b\n", "a\u00a0b\n"},
		[2]string{"\u2001 0\n", "0\n"},
		[2]string{"x\n", "\u00a0\nx\n"},
		[2]string{"<\v>\n", "<\v>\n"},
		[2]string{"a <v> b\n", "a \vq b\n"},
		[2]string{"caf\xe8 <v>\n", "caf\xe8 1\n"},
	)
	for i, c := range cases {
		want, _ := executor.Similar(c[0], c[1])
		pats, texts := similarArgs(c[0])
		out, err := harness(t, script, c[1], `cairn_reasons=(); cairn_expect_similar 0 1 "$P" "$T"; printf '%s' "${cairn_reasons[*]}"`, "P="+pats, "T="+texts)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, out)
		}
		got := out == ""
		if got != want {
			t.Errorf("case %d: script says similar=%v, executor %v\ntemplate:\n%s\noutput:\n%s\nscript: %s", i, got, want, c[0], c[1], out)
		}
	}
}

// similarArgs extracts the arguments the generator passes for a template by
// exporting a runbook with it.
func similarArgs(tmpl string) (string, string) {
	return export.SimilarPatternsForTest(tmpl)
}

func TestCaptureMatchesExecutor(t *testing.T) {
	rb := parse(t, minimal)
	script := scriptFor(t, rb)
	cases := []struct{ re, out string }{
		{`stamp=([0-9a-f]{12})`, "x\nstamp=0123456789ab\n"},
		{`--token\s+(\S+)`, "kubeadm join lb:6443 --token abcdef.0123456789abcdef \\\n  --discovery-token-ca-cert-hash sha256:ff\n"},
		{`--discovery-token-ca-cert-hash\s+(sha256:[0-9a-f]{2,64})`, "join --discovery-token-ca-cert-hash sha256:0fab\n"},
		{`(?m)^(v\d+\.\d+\.\d+\S*)$`, "kubeadm\nv1.31.2\nKubernetes v1.31.2\n"},
		{`(?s)(\S.*\S)`, "\n  10.0.0.0/24\n  10.0.1.0/24  \n"},
		{`owner: (\S+)`, "owner: kube-controller-manager\nowner: other\n"},
		{`no group \d+`, "has no group 42 here"},
		{`(?P<name>[a-z]+)=1`, "k=1"},
		{`a(b)?c`, "ac"},
	}
	for _, c := range cases {
		re := regexp.MustCompile("(?m)" + c.re)
		b := &runbook.Block{Captures: []*runbook.Capture{{Name: "X", Regexp: re}}}
		vals, missing := executor.Capture(b, c.out, nil, nil)
		pcre, err := export.PCRECaptureForTest(re)
		if err != nil {
			if strings.Contains(c.re, ")?") {
				continue // refused at export, as it should be
			}
			t.Errorf("/%s/: %v", c.re, err)
			continue
		}
		out, err := harness(t, script, c.out, `cairn_reasons=(); cairn_capture_regex X 0 "$R" shown; printf '%s|%s' "${cairn_cap[X]:-<unset>}" "${cairn_reasons[*]}"`, "R="+pcre)
		if err != nil {
			t.Fatalf("/%s/: %v\n%s", c.re, err, out)
		}
		want := vals["X"] + "|"
		if len(missing) > 0 {
			want = "<unset>|capture X: /shown/ did not match the output"
		}
		if out != want {
			t.Errorf("/%s/ on %q: script captured %q, executor %q", c.re, c.out, out, want)
		}
	}
}

// TestManifestFillMatchesExecutor: the script fills a kube body exactly as
// the kube runner does (runbook.Manifest.Fill), hostile values included.
func TestManifestFillMatchesExecutor(t *testing.T) {
	rb := parse(t, minimal)
	script := scriptFor(t, rb)
	body := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {a: \"${A}\"}\ndata:\n  n: ${A}\n  q: \"${A}\"\n  mix: ${A}-${B}\n  lit: |\n    x ${B} y\n---\napiVersion: v1\nkind: List\nitems: [{kind: Secret, apiVersion: v1, metadata: {name: \"s\"}, stringData: {k: \"${MISSING}\"}}]\n"
	m, err := runbook.ParseManifest(body)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := m.Template(func(_ int, r runbook.ManifestRef) string {
		if r.Plain {
			return "\x01" + r.Name + "\x02"
		}
		return "\x01" + r.Name + "\x03"
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"plain", "24", "-3", "2.5e3", "true", "false", "0777", "null", "x\ny\n---\nkind: ClusterRoleBinding",
		`q"uo\te\\ $(touch PWN) ` + "\t\x01\x1f", "한국어 값", "\\u0001A\\u0002", "\x01A\x02"} {
		want, err := m.Fill(map[string]string{"A": v, "B": "b"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := harness(t, script, "", `declare -A cairn_val=([A]="$VA" [B]=b) cairn_psecret=() cairn_cap=(); cairn_json_fill "A B MISSING" "$TMPL"`,
			"VA="+v, "TMPL="+string(tmpl))
		if err != nil {
			t.Fatalf("%q: %v\n%s", v, err, got)
		}
		if !sameJSONDocs(t, want, []byte(got)) {
			t.Errorf("%q:\nscript:   %s\nexecutor: %s", v, got, want)
		}
	}
}

func sameJSONDocs(t *testing.T, a, b []byte) bool {
	t.Helper()
	dec := func(x []byte) []any {
		var out []any
		d := json.NewDecoder(bytes.NewReader(x))
		for d.More() {
			var v any
			if err := d.Decode(&v); err != nil {
				t.Fatalf("decode %q: %v", x, err)
			}
			out = append(out, v)
		}
		return out
	}
	return reflect.DeepEqual(dec(a), dec(b))
}
