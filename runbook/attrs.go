package runbook

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Attr is one item of an attribute block: {#id key=value key="v" key='v' flag}.
type Attr struct {
	Key   string // "id" for #name
	Value string
	Off   int // byte offset of the item within the parsed text
}

// AttrError is a syntax error at a byte offset of the attribute text.
type AttrError struct {
	Off int
	Msg string
}

func (e *AttrError) Error() string { return e.Msg }

// ParseAttrs parses a brace-delimited attribute block. s must start with '{'.
// It returns the attributes and the offset just past the closing brace.
//
// goldmark's parser.ParseAttributes is not used: it reports no position on
// failure, has no raw single-quoted strings (wanted for regular expressions)
// and reads `5m` as a broken number.
func ParseAttrs(s string) ([]Attr, int, error) {
	if !strings.HasPrefix(s, "{") {
		return nil, 0, &AttrError{0, "attributes must start with '{'"}
	}
	var attrs []Attr
	i := 1
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == ',') {
			i++
		}
		if i >= len(s) {
			return nil, 0, &AttrError{i, "attributes: missing closing '}'"}
		}
		if s[i] == '}' {
			return attrs, i + 1, nil
		}
		start := i
		if s[i] == '#' {
			i++
			j := i
			for i < len(s) && isNameByte(s[i]) {
				i++
			}
			if i == j {
				return nil, 0, &AttrError{start, "attributes: '#' must be followed by an id"}
			}
			attrs = append(attrs, Attr{Key: "id", Value: s[j:i], Off: start})
			continue
		}
		if !isNameStart(s[i]) {
			r, _ := utf8.DecodeRuneInString(s[i:])
			return nil, 0, &AttrError{i, fmt.Sprintf("attributes: unexpected %q; expected key=value, #id or '}'", r)}
		}
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		key := s[start:i]
		if i >= len(s) || s[i] != '=' {
			attrs = append(attrs, Attr{Key: key, Value: "true", Off: start})
			continue
		}
		i++
		if i >= len(s) {
			return nil, 0, &AttrError{i, fmt.Sprintf("attributes: %s: missing value after '='", key)}
		}
		var val string
		switch s[i] {
		case '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					switch s[j+1] {
					case '"', '\\':
						b.WriteByte(s[j+1])
					case 'n':
						b.WriteByte('\n')
					case 't':
						b.WriteByte('\t')
					default:
						// Unknown escapes stay as written, so "\s+" means \s+.
						b.WriteByte('\\')
						b.WriteByte(s[j+1])
					}
					j++
					continue
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, 0, &AttrError{i, fmt.Sprintf("attributes: %s: unterminated \"string\"", key)}
			}
			val, i = b.String(), j+1
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, 0, &AttrError{i, fmt.Sprintf("attributes: %s: unterminated 'string'", key)}
			}
			val, i = s[i+1:i+1+j], i+2+j
		default:
			// Bare values may hold balanced braces, so that
			// for=jsonpath={.status.phase}=Running needs no quotes.
			j, depth := i, 0
			for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '"' && s[i] != '\'' {
				if s[i] == '{' {
					depth++
				} else if s[i] == '}' {
					if depth == 0 {
						break
					}
					depth--
				}
				i++
			}
			if i == j {
				return nil, 0, &AttrError{j, fmt.Sprintf("attributes: %s: missing value after '='", key)}
			}
			val = s[j:i]
		}
		attrs = append(attrs, Attr{Key: key, Value: val, Off: start})
		if i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '}' && s[i] != ',' {
			return nil, 0, &AttrError{i, fmt.Sprintf("attributes: %s: expected a space or '}' after the value", key)}
		}
	}
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func isNameByte(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':'
}

// splitTrailingAttrs splits "text {attrs}" at the last '{' that starts a
// well-formed attribute block ending the text. It returns the text before the
// block, the block (or ""), and the block's offset.
func splitTrailingAttrs(s string) (string, string, int) {
	t := strings.TrimRight(s, " \t")
	if !strings.HasSuffix(t, "}") {
		return s, "", -1
	}
	for i := strings.LastIndexByte(t, '{'); i >= 0; i = strings.LastIndexByte(t[:i], '{') {
		if _, n, err := ParseAttrs(t[i:]); err == nil && n == len(t)-i {
			return strings.TrimRight(t[:i], " \t"), t[i:], i
		}
		if i == 0 {
			break
		}
	}
	// Unparseable: hand the whole trailing brace part back so the caller
	// reports the syntax error at the first '{'.
	if i := strings.IndexByte(t, '{'); i >= 0 {
		return strings.TrimRight(t[:i], " \t"), t[i:], i
	}
	return s, "", -1
}
