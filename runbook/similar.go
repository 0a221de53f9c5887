package runbook

import (
	"regexp"
	"strings"
)

// A match=similar template ("output is similar to", as the Kubernetes
// docs print it) is read here once; the executor compiles it to RE2 and
// the exported script to awk EREs, each from these tokens, so the two
// cannot read a template differently.

// SimilarKind is what a piece of a template line matches.
type SimilarKind int

const (
	SimLiteral SimilarKind = iota // Text, as it is
	SimSpace                      // a run of white space
	SimWord                       // a <placeholder>: a run of non-space characters
	SimAny                        // "..." inside a line: any text
)

// SimilarToken is one piece of a template line.
type SimilarToken struct {
	Kind SimilarKind
	Text string // for SimLiteral
}

// SimilarLine is one non-blank line of a template: a "..." line stands for
// any number of lines (AnyLines); any other line is matched whole, with
// white space around it ignored.
type SimilarLine struct {
	AnyLines bool
	Text     string // the line, trimmed
	Tokens   []SimilarToken
}

var spaceRun = regexp.MustCompile(`[ \t]+`)

// SimilarSpace is the white space of templates and output lines: ASCII
// only, as awk's [[:space:]] is in the C locale the script runs in (a
// no-break space copied from a web page is text on both sides).
const SimilarSpace = " \t\n\v\f\r"

// SimilarBlank reports whether an output or template line is blank.
func SimilarBlank(line string) bool { return strings.Trim(line, SimilarSpace) == "" }

// ParseSimilar splits a template into its lines and their tokens.
func ParseSimilar(tmpl string) []SimilarLine {
	var out []SimilarLine
	for _, line := range strings.Split(strings.TrimRight(tmpl, "\n"), "\n") {
		t := strings.Trim(line, SimilarSpace)
		if t == "" {
			continue
		}
		if t == "..." || t == "…" {
			out = append(out, SimilarLine{AnyLines: true, Text: t})
			continue
		}
		sl := SimilarLine{Text: t}
		add := func(k SimilarKind, text string) {
			// Adjacent literals join, so each side quotes one run of text.
			if n := len(sl.Tokens); k == SimLiteral && n > 0 && sl.Tokens[n-1].Kind == SimLiteral {
				sl.Tokens[n-1].Text += text
				return
			}
			sl.Tokens = append(sl.Tokens, SimilarToken{Kind: k, Text: text})
		}
		rest := spaceRun.ReplaceAllString(t, " ")
		for len(rest) > 0 {
			switch {
			case strings.HasPrefix(rest, "..."):
				add(SimAny, "")
				rest = rest[3:]
			case rest[0] == ' ':
				add(SimSpace, "")
				rest = rest[1:]
			case rest[0] == '<':
				end := strings.IndexByte(rest, '>')
				if end > 1 && !strings.ContainsAny(rest[:end], SimilarSpace) {
					add(SimWord, "")
					rest = rest[end+1:]
					continue
				}
				add(SimLiteral, "<")
				rest = rest[1:]
			default:
				n := strings.IndexAny(rest, " <")
				if d := strings.Index(rest, "..."); d >= 0 && (n < 0 || d < n) {
					n = d
				}
				if n <= 0 {
					n = len(rest)
				}
				add(SimLiteral, rest[:n])
				rest = rest[n:]
			}
		}
		out = append(out, sl)
	}
	return out
}
