package kube

import (
	"regexp"
	"strings"
	"testing"
)

// The written-out value grammars accept exactly what the regular
// expressions they replace accept (see isKindArg and the rest).
func TestGrammarsMatchTheirExpressions(t *testing.T) {
	grammars := []struct {
		name string
		fn   func(string) bool
		re   *regexp.Regexp
	}{
		{"kind", isKindArg, regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.-]{0,252}$`)},
		{"namespace", isNamespace, regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)},
		{"selector", isSelectorValue, regexp.MustCompile(`^[A-Za-z0-9._/-]{0,316}$`)},
		{"count", isCount, regexp.MustCompile(`^[0-9]{1,9}$`)},
		{"node", isNodeName, regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)},
	}
	values := []string{"", "a", "A", "0", "-", ".", "a-", "-a", "a.b", "A.b-C", "kube-system", "app/x", "x_y", "a b",
		"a\n", "é", "a\x00", "123456789", "1234567890", "0x1", "$(id)", "a;b", "ñode", "cp0", "node.example.org", "a..b",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254),
		strings.Repeat("A", 253), strings.Repeat("x", 316), strings.Repeat("x", 317), "a" + strings.Repeat("-", 61) + "a",
		"a" + strings.Repeat(".", 251) + "a", "a" + strings.Repeat(".", 252) + "a"}
	for _, g := range grammars {
		for _, v := range values {
			if got, want := g.fn(v), g.re.MatchString(v); got != want {
				t.Errorf("%s %q: %v, the expression says %v", g.name, v, got, want)
			}
		}
	}
}

func FuzzGrammarsMatchTheirExpressions(f *testing.F) {
	for _, s := range []string{"kube-system", "a.b", "A-1", "123", "app/x"} {
		f.Add(s)
	}
	res := []*regexp.Regexp{
		regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.-]{0,252}$`),
		regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`),
		regexp.MustCompile(`^[A-Za-z0-9._/-]{0,316}$`),
		regexp.MustCompile(`^[0-9]{1,9}$`),
		regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`),
	}
	fns := []func(string) bool{isKindArg, isNamespace, isSelectorValue, isCount, isNodeName}
	f.Fuzz(func(t *testing.T, v string) {
		for i, fn := range fns {
			if fn(v) != res[i].MatchString(v) {
				t.Fatalf("grammar %d on %q: %v", i, v, fn(v))
			}
		}
	})
}
