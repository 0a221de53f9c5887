package site

import (
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// Runbooks are mostly bash and YAML, and chroma's regexp-driven lexers spend
// most of a build's time on them (about 0.6 ms per block). These hand-written
// lexers emit the same token types, so chroma's CSS still applies, at a
// fraction of the cost; every other language goes through chroma.

// tokenize splits src into tokens whose values concatenate to src exactly.
func tokenize(lang, src string) ([]chroma.Token, error) {
	switch lang {
	case "bash", "sh", "shell", "zsh":
		return lexBash(src), nil
	case "yaml", "yml":
		return lexYAML(src), nil
	}
	lexer := lexers.Get(lang)
	if lang == "" || lexer == nil {
		lexer = lexers.Fallback
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, src)
	if err != nil {
		return nil, err
	}
	return it.Tokens(), nil
}

// tokens collects tokens, merging neighbours of the same type.
type tokens []chroma.Token

func (ts *tokens) add(t chroma.TokenType, s string) {
	if s == "" {
		return
	}
	if n := len(*ts); n > 0 && (*ts)[n-1].Type == t {
		(*ts)[n-1].Value += s
		return
	}
	*ts = append(*ts, chroma.Token{Type: t, Value: s})
}

var bashKeywords = setOf("if then else elif fi for while until do done case esac function in select return break continue local export declare readonly typeset unset shift trap exit source time coproc")

var bashBuiltins = setOf("echo printf cd pwd read test true false eval exec kill wait sleep set alias unalias type command hash getopts let mapfile readarray umask ulimit jobs bg fg disown pushd popd dirs shopt")

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == '@' || c == '%' || c == '+' || c == ',' || c == '~' || c >= 0x80
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// lexBash tokenizes a shell script: comments, quoted strings with the
// expansions inside them, $variables, keywords, builtins, numbers,
// operators and here-documents.
func lexBash(src string) []chroma.Token {
	var ts tokens
	var heredocs []string
	cmdStart := true // the next word is in command position
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '\n':
			ts.add(chroma.Text, "\n")
			i++
			cmdStart = true
			for _, delim := range heredocs {
				start := i
				for i < len(src) {
					end := strings.IndexByte(src[i:], '\n')
					line := src[i:]
					if end >= 0 {
						line = src[i : i+end]
					}
					if strings.TrimLeft(line, "\t") == delim {
						break
					}
					if end < 0 {
						i = len(src)
					} else {
						i += end + 1
					}
				}
				ts.add(chroma.LiteralStringHeredoc, src[start:i])
			}
			heredocs = nil
		case c == ' ' || c == '\t' || c == '\r':
			j := i
			for j < len(src) && (src[j] == ' ' || src[j] == '\t' || src[j] == '\r') {
				j++
			}
			ts.add(chroma.Text, src[i:j])
			i = j
		case c == '#' && (i == 0 || strings.IndexByte(" \t\n;|&(", src[i-1]) >= 0):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				j = len(src) - i
			}
			t := chroma.CommentSingle
			if i == 0 && strings.HasPrefix(src, "#!") {
				t = chroma.CommentHashbang
			}
			ts.add(t, src[i:i+j])
			i += j
		case c == '\\' && i+1 < len(src):
			ts.add(chroma.LiteralStringEscape, src[i:i+2])
			i += 2
		case c == '\'':
			j := strings.IndexByte(src[i+1:], '\'')
			end := len(src)
			if j >= 0 {
				end = i + 2 + j
			}
			ts.add(chroma.LiteralStringSingle, src[i:end])
			i = end
			cmdStart = false
		case c == '"':
			i = lexDouble(&ts, src, i)
			cmdStart = false
		case c == '$':
			i = lexDollar(&ts, src, i)
			cmdStart = false
		case c == '`':
			ts.add(chroma.Keyword, "`")
			i++
		case c == '<' && strings.HasPrefix(src[i:], "<<") && !strings.HasPrefix(src[i:], "<<<"):
			j := i + 2
			if j < len(src) && src[j] == '-' {
				j++
			}
			for j < len(src) && (src[j] == ' ' || src[j] == '\t') {
				j++
			}
			k := j
			delim := ""
			if k < len(src) && (src[k] == '\'' || src[k] == '"') {
				if e := strings.IndexByte(src[k+1:], src[k]); e >= 0 {
					delim = src[k+1 : k+1+e]
					k += e + 2
				}
			} else {
				for k < len(src) && (isWordByte(src[k]) && src[k] != '/') {
					k++
				}
				delim = src[j:k]
			}
			ts.add(chroma.Operator, src[i:j])
			ts.add(chroma.LiteralStringHeredoc, src[j:k])
			if delim != "" {
				heredocs = append(heredocs, delim)
			}
			i = k
		case strings.IndexByte("|&;()<>=!{}[]", c) >= 0:
			j := i + 1
			for j < len(src) && strings.IndexByte("|&;<>", src[j]) >= 0 && strings.IndexByte("|&;<>", c) >= 0 {
				j++
			}
			t := chroma.Operator
			if c == '(' || c == ')' || c == '{' || c == '}' || c == '[' || c == ']' {
				t = chroma.Punctuation
			}
			ts.add(t, src[i:j])
			if c != '=' && c != '!' && c != '>' && c != '<' {
				cmdStart = true
			}
			i = j
		case isWordByte(c):
			j := i
			for j < len(src) && isWordByte(src[j]) {
				j++
			}
			word := src[i:j]
			switch {
			case j < len(src) && src[j] == '=' && cmdStart && isName(word):
				ts.add(chroma.NameVariable, word) // NAME=value
			case cmdStart && bashKeywords[word]:
				ts.add(chroma.Keyword, word)
				// The word after a keyword is a command again (then, do, …),
				// except for for/case/function, whose next word is a name.
				cmdStart = word != "for" && word != "case" && word != "function" && word != "select" && word != "in" && word != "export" && word != "local" && word != "declare" && word != "readonly"
				i = j
				continue
			case cmdStart && bashBuiltins[word]:
				ts.add(chroma.NameBuiltin, word)
			case isDigits(word):
				ts.add(chroma.LiteralNumber, word)
			default:
				ts.add(chroma.Text, word)
			}
			cmdStart = false
			i = j
		default:
			ts.add(chroma.Text, src[i:i+1])
			i++
		}
	}
	return ts
}

func isName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// lexDouble tokenizes a "double-quoted" string starting at i, with the
// expansions inside it, and returns the offset after it.
func lexDouble(ts *tokens, src string, i int) int {
	ts.add(chroma.LiteralStringDouble, `"`)
	i++
	for i < len(src) {
		c := src[i]
		switch {
		case c == '"':
			ts.add(chroma.LiteralStringDouble, `"`)
			return i + 1
		case c == '\\' && i+1 < len(src):
			ts.add(chroma.LiteralStringEscape, src[i:i+2])
			i += 2
		case c == '$':
			i = lexDollar(ts, src, i)
		case c == '`':
			ts.add(chroma.Keyword, "`")
			i++
		default:
			j := i
			for j < len(src) && src[j] != '"' && src[j] != '\\' && src[j] != '$' && src[j] != '`' {
				j++
			}
			if j == i {
				j++ // a lone backslash at the very end
			}
			ts.add(chroma.LiteralStringDouble, src[i:j])
			i = j
		}
	}
	return i
}

// lexDollar tokenizes $NAME, ${…}, $1, $?, $( and $(( at i.
func lexDollar(ts *tokens, src string, i int) int {
	if i+1 >= len(src) {
		ts.add(chroma.Text, "$")
		return i + 1
	}
	n := src[i+1]
	switch {
	case n == '{':
		depth, j := 0, i+1
		for ; j < len(src); j++ {
			if src[j] == '{' {
				depth++
			} else if src[j] == '}' {
				depth--
				if depth == 0 {
					j++
					break
				}
			} else if src[j] == '\n' {
				break
			}
		}
		ts.add(chroma.NameVariable, src[i:j])
		return j
	case n == '(':
		if strings.HasPrefix(src[i:], "$((") {
			ts.add(chroma.Keyword, "$((")
			return i + 3
		}
		ts.add(chroma.Keyword, "$(")
		return i + 2
	case n == '_' || n >= 'a' && n <= 'z' || n >= 'A' && n <= 'Z':
		j := i + 1
		for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
			j++
		}
		ts.add(chroma.NameVariable, src[i:j])
		return j
	case n >= '0' && n <= '9' || strings.IndexByte("?@*#$!-", n) >= 0:
		ts.add(chroma.NameVariable, src[i:i+2])
		return i + 2
	}
	ts.add(chroma.Text, "$")
	return i + 1
}

// lexYAML tokenizes YAML line by line: comments, document markers, keys,
// list markers, quoted and plain scalars, numbers and constants, and block
// scalars (| and >) whose indented lines are strings.
func lexYAML(src string) []chroma.Token {
	var ts tokens
	blockIndent := -1 // inside a | or > block scalar: lines indented more than this
	for len(src) > 0 {
		line, rest, found := strings.Cut(src, "\n")
		src = rest
		indent := len(line) - len(strings.TrimLeft(line, " "))
		trimmed := strings.TrimSpace(line)
		if blockIndent >= 0 {
			if trimmed == "" || indent > blockIndent {
				ts.add(chroma.LiteralString, line)
				if found {
					ts.add(chroma.Text, "\n")
				}
				continue
			}
			blockIndent = -1
		}
		lexYAMLLine(&ts, line, indent, &blockIndent)
		if found {
			ts.add(chroma.Text, "\n")
		}
	}
	return ts
}

func lexYAMLLine(ts *tokens, line string, indent int, blockIndent *int) {
	ts.add(chroma.Text, line[:indent])
	s := line[indent:]
	if s == "---" || s == "..." {
		ts.add(chroma.NameNamespace, s)
		return
	}
	for strings.HasPrefix(s, "- ") || s == "-" {
		ts.add(chroma.Punctuation, "-")
		s = s[1:]
		sp := len(s) - len(strings.TrimLeft(s, " "))
		ts.add(chroma.Text, s[:sp])
		s = s[sp:]
		indent += 1 + sp
	}
	if strings.HasPrefix(s, "#") {
		ts.add(chroma.CommentSingle, s)
		return
	}
	// key: value (the key may be quoted)
	if k := yamlKeyEnd(s); k > 0 {
		ts.add(chroma.NameTag, s[:k])
		ts.add(chroma.Punctuation, ":")
		s = s[k+1:]
		sp := len(s) - len(strings.TrimLeft(s, " "))
		ts.add(chroma.Text, s[:sp])
		s = s[sp:]
	}
	yamlValue(ts, s, indent, blockIndent)
}

// yamlKeyEnd returns the offset of the ':' ending a mapping key, or -1.
func yamlKeyEnd(s string) int {
	if s == "" || strings.IndexByte("[{&*!|>%@`", s[0]) >= 0 {
		return -1
	}
	if s[0] == '"' || s[0] == '\'' {
		e := strings.IndexByte(s[1:], s[0])
		if e >= 0 && strings.HasPrefix(s[e+2:], ":") && (len(s) == e+3 || s[e+3] == ' ') {
			return e + 2
		}
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ':' && (i+1 == len(s) || s[i+1] == ' ') {
			return i
		}
		if s[i] == ' ' && i+1 < len(s) && s[i+1] == '#' {
			return -1
		}
	}
	return -1
}

func yamlValue(ts *tokens, s string, indent int, blockIndent *int) {
	// A trailing comment.
	comment := ""
	if i := strings.Index(s, " #"); i >= 0 && !strings.ContainsAny(s[:i], `"'`) {
		s, comment = s[:i], s[i:]
	}
	switch {
	case s == "":
	case s[0] == '|' || s[0] == '>':
		ts.add(chroma.Punctuation, s)
		*blockIndent = indent
	case s[0] == '"' || s[0] == '\'':
		t := chroma.LiteralStringDouble
		if s[0] == '\'' {
			t = chroma.LiteralStringSingle
		}
		ts.add(t, s)
	case s[0] == '[' || s[0] == '{':
		ts.add(chroma.Punctuation, s[:1])
		ts.add(chroma.Text, s[1:])
	default:
		v := strings.TrimRight(s, " ")
		switch {
		case v == "true" || v == "false" || v == "null" || v == "~" || v == "yes" || v == "no":
			ts.add(chroma.KeywordConstant, s)
		case isYAMLNumber(v):
			ts.add(chroma.LiteralNumber, s)
		default:
			ts.add(chroma.Text, s)
		}
	}
	if comment != "" {
		sp := len(comment) - len(strings.TrimLeft(comment, " "))
		ts.add(chroma.Text, comment[:sp])
		ts.add(chroma.CommentSingle, comment[sp:])
	}
}

func isYAMLNumber(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	dot := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] >= '0' && s[i] <= '9':
		case s[i] == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return true
}
