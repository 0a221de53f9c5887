package site

import (
	"strings"
	"testing"

	"github.com/alecthomas/chroma/v2"
)

func classes(toks []chroma.Token) string {
	var b strings.Builder
	for _, t := range toks {
		if c := chroma.StandardTypes[t.Type]; c != "" && strings.TrimSpace(t.Value) != "" {
			b.WriteString(c + "(" + t.Value + ") ")
		}
	}
	return strings.TrimSpace(b.String())
}

func TestLexBash(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`echo "host=$(hostname) $X"`, `nb(echo) s2("host=) k($() s2(hostname) ) nv($X) s2(")`},
		{"# comment\nfor h in $HOSTS; do ssh \"$h\"; done", `c1(# comment) k(for) nv($HOSTS) o(;) k(do) s2(") nv($h) s2(") o(;) k(done)`},
		{"X=1 cat <<'EOF' | tee f\n$notvar\nEOF\necho 2", `nv(X) o(=) m(1) o(<<) sh('EOF') o(|) sh($notvar
) nb(echo) m(2)`},
		{`kubectl get -o jsonpath='{.a}' ${NS:-x} 2>&1`, `o(=) s1('{.a}') nv(${NS:-x}) m(2) o(>&) m(1)`},
	} {
		toks := lexBash(tc.src)
		if got := classes(toks); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.src, got, tc.want)
		}
	}
}

func TestLexYAML(t *testing.T) {
	src := "---\napiVersion: v1 # c\nkind: Pod\nspec:\n  replicas: 3\n  ok: true\n  - name: \"x\"\n  script: |\n    echo: not a key\n  next: 'y'\n"
	want := `nn(---) nt(apiVersion) p(:) c1(# c) nt(kind) p(:) nt(spec) p(:) nt(replicas) p(:) m(3) nt(ok) p(:) kc(true) p(-) nt(name) p(:) s2("x") nt(script) p(:) p(|) s(    echo: not a key) nt(next) p(:) s1('y')`
	if got := classes(lexYAML(src)); got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// FuzzLexers: every lexer's tokens concatenate to its input exactly.
func FuzzLexers(f *testing.F) {
	for _, s := range []string{"echo \"$X ${Y:-a}\" '$z' # c\ncat <<EOF\nx\nEOF\n", "a: b\n- c: 'd'\n  e: |\n    f\n", "$((1+2)) `x` \\\"", "\"unterminated", "${", "<<"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, lex := range map[string]func(string) []chroma.Token{"bash": lexBash, "yaml": lexYAML} {
			var b strings.Builder
			for _, tok := range lex(s) {
				b.WriteString(tok.Value)
			}
			if b.String() != s {
				t.Fatalf("%s: tokens give %q, input %q", name, b.String(), s)
			}
		}
	})
}
