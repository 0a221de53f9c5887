package site

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// TestRenderGolden renders each testdata/golden/*.md body and compares it
// with the .golden file beside it.
func TestRenderGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/golden/*.md")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := runbook.Parse(f, src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := renderBody(rb, stringsFor(rb.Meta.Lang), nil, false)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".md") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./site -run TestRenderGolden -update)", err)
			}
			if string(got) != string(want) {
				gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
				for i := 0; i < len(gl) || i < len(wl); i++ {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					if g != w {
						t.Fatalf("%s differs at line %d (go test ./site -run TestRenderGolden -update to accept):\n got: %s\nwant: %s", golden, i+1, g, w)
					}
				}
			}
		})
	}
}

func TestStringsComplete(t *testing.T) {
	for key := range uiStrings["en"] {
		if _, ok := uiStrings["ko"][key]; !ok {
			t.Errorf("ko lacks %q", key)
		}
	}
	for key := range uiStrings["ko"] {
		if _, ok := uiStrings["en"][key]; !ok {
			t.Errorf("en lacks %q", key)
		}
	}
}

func TestRenderEscapesAndWraps(t *testing.T) {
	src := "---\ntitle: t\nparams:\n  - name: X\n    default: a\n---\n## s {#s}\n\n```bash {#b target=local}\necho \"$X\" '<b>' $UNDECLARED_BUT_ASSIGNED\nUNDECLARED_BUT_ASSIGNED=1\n```\n\n<img src=x onerror=alert(1)>\n"
	rb, err := runbook.Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderBody(rb, stringsFor("en"), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	if !strings.Contains(s, `<span class="prm" data-p="X">`) {
		t.Errorf("parameter not wrapped:\n%s", s)
	}
	if strings.Contains(s, `data-p="UNDECLARED_BUT_ASSIGNED"`) {
		t.Errorf("a script-local variable was wrapped as a parameter")
	}
	if strings.Contains(s, "<b>") || strings.Contains(s, "onerror") {
		t.Errorf("raw HTML leaked into the page:\n%s", s)
	}
}

// TestRenderCodeCacheKeepsRefs: highlighted code is kept by what it is
// made from, so the same code in a runbook that declares the parameter and
// in a runbook that does not (a plain code block there) renders with the
// reference wrapped only in the first,
// and line numbers only where asked, whichever comes first.
func TestRenderCodeCacheKeepsRefs(t *testing.T) {
	code := "```bash%s\necho \"$CACHE_REF\"\n```\n"
	with := "---\ntitle: t\nparams:\n  - name: CACHE_REF\n    default: a\n---\n## s {#s}\n\n"
	without := "---\ntitle: t\n---\n## s {#s}\n\n"
	var cache codeCache
	for _, c := range []struct {
		src          string
		wrapped, lns bool
	}{
		{without + fmt.Sprintf(code, ""), false, false},
		{with + fmt.Sprintf(code, " {#b target=local}"), true, false},
		{without + fmt.Sprintf(code, ""), false, false},
		{with + fmt.Sprintf(code, " {#b target=local linenos=true}"), true, true},
		{with + fmt.Sprintf(code, " {#b target=local}"), true, false},
	} {
		rb, err := runbook.Parse("t.md", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := renderBodyTo(&buf, rb, stringsFor("en"), nil, false, &cache); err != nil {
			t.Fatal(err)
		}
		s := buf.String()
		if got := strings.Contains(s, `data-p="CACHE_REF"`); got != c.wrapped {
			t.Errorf("wrapped = %v, want %v:\n%s", got, c.wrapped, s)
		}
		if got := strings.Contains(s, `class="ln"`); got != c.lns {
			t.Errorf("line numbers = %v, want %v:\n%s", got, c.lns, s)
		}
	}
}

// TestRenderMutesKnownLines: a recorded output and a baked result show the
// lines the block's mute= matches muted, with why, escaped like the rest.
func TestRenderMutesKnownLines(t *testing.T) {
	src := "---\ntitle: t\n---\n## s {#s}\n\n```bash {#b target=local mute='^W: <old>' mute.why=\"the tool's own <note>\"}\necho hi\n```\n\n" +
		"```text {output=b status=verified}\nhi\nW: <old> flag\nend\n```\n"
	rb, err := runbook.Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderBody(rb, stringsFor("en"), map[string]BlockResult{"b": {Status: "verified", Output: "W: <old> again\nok\n"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"<code>hi\n<span class=\"out-muted\" title=\"known and harmless: the tool&#39;s own &lt;note&gt;\">W: &lt;old&gt; flag\n</span>end\n</code>",
		"<code><span class=\"out-muted\" title=\"known and harmless: the tool&#39;s own &lt;note&gt;\">W: &lt;old&gt; again\n</span>ok\n</code>",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %q:\n%s", want, s)
		}
	}
}
