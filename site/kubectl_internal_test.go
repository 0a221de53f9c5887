package site

import "testing"

// TestKubectlWord: a word that is only references, or references in plain
// text, is left bare for the page to fill with quoted values; anything else
// is quoted as written.
func TestKubectlWord(t *testing.T) {
	for in, want := range map[string]string{
		"pods":          "pods",
		"$NAMESPACE":    "$NAMESPACE",
		"${NS}":         "${NS}",
		"app=${APP}":    "app=${APP}",
		"a b":           "'a b'",
		"${A} ${B}":     "'${A} ${B}'",
		"jsonpath={.x}": "'jsonpath={.x}'",
	} {
		if got := word(in); got != want {
			t.Errorf("word(%q) = %q, want %q", in, got, want)
		}
	}
}
