package runbook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: no input may panic the parser, and every diagnostic must carry
// a position inside the file.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.md")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\ntitle: x\n---\n::::tabs\n:::tab\n```bash {target=local}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		rb, err := Parse("f.md", src)
		if rb == nil {
			t.Fatal("nil runbook")
		}
		lines := 1
		for _, c := range src {
			if c == '\n' {
				lines++
			}
		}
		for _, d := range append(AllDiagnostics(err), rb.Warnings...) {
			if d.Pos.Line < 0 || d.Pos.Line > lines {
				t.Fatalf("diagnostic outside the file (%d lines): %s", lines, d)
			}
		}
	})
}

func FuzzParseAttrs(f *testing.F) {
	for _, s := range []string{`{#a target=local}`, `{x="a\"b"}`, `{re='\d'}`, `{for=jsonpath={.a}=b}`, `{a b c}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 || s[0] != '{' {
			return
		}
		attrs, n, err := ParseAttrs(s)
		if err == nil && (n < 2 || n > len(s) || s[n-1] != '}') {
			t.Fatalf("bad end offset %d for %q", n, s)
		}
		for _, a := range attrs {
			if a.Off < 0 || a.Off >= len(s) {
				t.Fatalf("bad offset %d", a.Off)
			}
		}
	})
}

func FuzzParseCond(f *testing.F) {
	for _, s := range []string{`A == "x"`, `!(B) || C != 'y' && D`, `((A))`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCond(s)
		if err == nil {
			c.Eval(map[string]string{"A": "x"})
			_ = c.Shell()
		} else if ce, ok := err.(*CondError); !ok || ce.Off < 0 || ce.Off > len(s) {
			t.Fatalf("bad error %v", err)
		}
	})
}

func FuzzShellRefs(f *testing.F) {
	f.Add("echo $A ${B:-x} '$C' <<'E'\n$D\nE\n")
	f.Add("cat <<E\n$A ${B}\nE\necho \"$A\" <<< $B")
	f.Fuzz(func(t *testing.T, s string) {
		refs, _ := shellRefs(s)
		for _, r := range refs {
			if r.Off < 0 || r.Off >= len(s) || s[r.Off] != '$' {
				t.Fatalf("bad ref %+v", r)
			}
		}
		// Filling in values never loses the text around the references.
		got := ShowShell(s, map[string]string{"A": "x y", "B": ""})
		if refs == nil && got != s {
			t.Fatalf("ShowShell changed a script without references: %q -> %q", s, got)
		}
	})
}

// FuzzParseSimilar: a template's lines come back trimmed and whole; a
// line is "..." or has tokens, and its literal pieces are its own text.
func FuzzParseSimilar(f *testing.F) {
	f.Add("Initialized <thing> in <n> ms\n...\ndone\n")
	f.Add("a ... b <x y> <>\n\t…\n")
	f.Fuzz(func(t *testing.T, tmpl string) {
		for _, l := range ParseSimilar(tmpl) {
			if l.Text == "" || l.Text != strings.TrimSpace(l.Text) {
				t.Fatalf("line %q not trimmed or empty", l.Text)
			}
			if !l.AnyLines && len(l.Tokens) == 0 {
				t.Fatalf("line %q has no tokens", l.Text)
			}
			for _, tk := range l.Tokens {
				if tk.Kind == SimLiteral && !strings.Contains(l.Text, tk.Text) {
					t.Fatalf("literal %q is not in line %q", tk.Text, l.Text)
				}
			}
		}
	})
}
