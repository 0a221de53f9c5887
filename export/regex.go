package export

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// Exported scripts check RE2 expressions with GNU grep -P (PCRE2), which
// reads the RE2 syntax runbooks use ((?m), (?s), (?i), \d, \s, \S, \w,
// classes, counted repetition, non-greedy operators, (?P<name>…)). The
// script runs grep with -z so the whole output is one subject, as Go
// matches the whole output, and in the C locale (bytes), so a pattern with
// non-ASCII literals still matches byte for byte.

// pcreMatch returns the expression grep -P gets for an expectation.
func pcreMatch(re *regexp.Regexp) string { return re.String() }

// shownRegexp is the expression as the runbook wrote it.
func shownRegexp(re *regexp.Regexp) string { return strings.TrimPrefix(re.String(), "(?m)") }

// pcreCapture rewrites a capture expression so that grep -o prints what the
// executor captures: the first group, or the whole match without groups.
// PREFIX(GROUP)SUFFIX becomes PREFIX\K(?:GROUP)(?=SUFFIX). That is exact
// when the group stands at the top level (not inside another group, not
// repeated) and the expression has no top-level alternation; any other
// shape is refused, so that an exported script never captures something
// else than `cairn run` would.
func pcreCapture(re *regexp.Regexp) (string, error) {
	src := re.String()
	if re.NumSubexp() == 0 {
		return src, nil
	}
	open, close := -1, -1
	depth := 0
	inClass := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			// A ] right after [ or [^ is a literal.
			if i+1 < len(src) && src[i+1] == '^' {
				i++
			}
			if i+1 < len(src) && src[i+1] == ']' {
				i++
			}
			if i+1 < len(src) && src[i+1] == '[' && strings.HasPrefix(src[i+1:], "[:") {
				// POSIX class inside a class: skip to its end.
				if end := strings.Index(src[i+1:], ":]"); end >= 0 {
					i += end + 2
				}
			}
		case c == '(':
			capturing := !strings.HasPrefix(src[i:], "(?") || strings.HasPrefix(src[i:], "(?P<") || strings.HasPrefix(src[i:], "(?<")
			if capturing && open < 0 {
				if depth != 0 {
					return "", fmt.Errorf("capture /%s/: the first group is nested inside another; exported scripts need it at the top level", shownRegexp(re))
				}
				open = i
			}
			depth++
		case c == ')':
			depth--
			if depth == 0 && open >= 0 && close < 0 {
				close = i
			}
		case c == '|' && depth == 0:
			return "", fmt.Errorf("capture /%s/: an alternation at the top level cannot be exported; wrap it in (?:…)", shownRegexp(re))
		}
	}
	if open < 0 || close < 0 {
		return "", fmt.Errorf("capture /%s/: cannot find its first group", shownRegexp(re))
	}
	if close+1 < len(src) && strings.ContainsRune("*+?{", rune(src[close+1])) {
		return "", fmt.Errorf("capture /%s/: a repeated group cannot be exported", shownRegexp(re))
	}
	inner := src[open+1 : close]
	switch {
	case strings.HasPrefix(inner, "?P<"):
		inner = inner[strings.IndexByte(inner, '>')+1:]
	case strings.HasPrefix(inner, "?<"):
		inner = inner[strings.IndexByte(inner, '>')+1:]
	}
	out := src[:open] + `\K(?:` + inner + `)`
	if rest := src[close+1:]; rest != "" {
		out += "(?=" + rest + ")"
	}
	// The rewritten expression must still be valid RE2 apart from \K and
	// the lookahead, which RE2 lacks: check the pieces.
	if _, err := syntax.Parse(src[:open]+"(?:"+inner+")"+src[close+1:], syntax.Perl); err != nil {
		return "", fmt.Errorf("capture /%s/: %v", shownRegexp(re), err)
	}
	return out, nil
}

// similarPatterns compiles a match=similar template's lines
// (runbook.ParseSimilar, as the executor reads them) for the script's awk:
// "A" for a "..." line, else "R" and a POSIX ERE.
func similarPatterns(tmpl string) (pats, texts []string) {
	for _, l := range runbook.ParseSimilar(tmpl) {
		// Tabs and newlines cannot travel in the newline-separated lists.
		text := strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, l.Text)
		texts = append(texts, text)
		if l.AnyLines {
			pats = append(pats, "A")
			continue
		}
		var b strings.Builder
		b.WriteString("R^[[:space:]]*")
		for _, tk := range l.Tokens {
			switch tk.Kind {
			case runbook.SimAny:
				b.WriteString(".*")
			case runbook.SimSpace:
				b.WriteString("[[:space:]]+")
			case runbook.SimWord:
				b.WriteString("[^[:space:]]+")
			default:
				b.WriteString(ereQuote(tk.Text))
			}
		}
		b.WriteString("[[:space:]]*$")
		pats = append(pats, b.String())
	}
	return pats, texts
}

// ereQuote quotes s as literal text of an awk ERE: metacharacters in
// brackets, backslash and caret escaped (they are special in brackets).
func ereQuote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			b.WriteString(`\\`)
		case '^':
			b.WriteString(`\^`)
		case '.', '[', ']', '(', ')', '*', '+', '?', '{', '}', '|', '$', '/':
			b.WriteByte('[')
			b.WriteByte(c)
			b.WriteByte(']')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
