package paste

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// Fill returns the command with values filled in (cmd/cairn's confirmation;
// cairn.js's fillTemplate follows the same rules, held to this by the
// paste tests). values holds what is known: parameter values and captured
// values. A secret is never filled in.
func (t *Template) Fill(values map[string]string) string {
	var b strings.Builder
	for _, s := range t.Segs {
		if s.Name == "" {
			b.WriteString(s.Text)
			continue
		}
		v, ok := values[s.Name]
		info := t.Vars[s.Name]
		if info.Secret {
			ok = false
		}
		switch s.Kind {
		case KindShell:
			if ok {
				b.WriteString(ShellValue(v))
			} else {
				b.WriteString(`"${` + s.Name + `:?` + dqEscape(t.unknown(s.Name)) + `}"`)
			}
		case KindHosts:
			if ok && len(runbook.SplitHosts(v)) > 0 {
				var ws []string
				for _, h := range runbook.SplitHosts(v) {
					ws = append(ws, runbook.ShellWord(Destination(h)))
				}
				b.WriteString(strings.Join(ws, " "))
			} else {
				b.WriteString(`${` + s.Name + `:?` + dqEscape(t.unknown(s.Name)) + `}`)
			}
		case KindJSONStr, KindJSON:
			if !ok {
				return t.notCopied(s.Name)
			}
			if s.Kind == KindJSON && jsonScalar.MatchString(v) {
				b.WriteString(v)
			} else if s.Kind == KindJSON {
				b.WriteString(`"` + JSONEscape(v) + `"`)
			} else {
				b.WriteString(JSONEscape(v))
			}
		}
	}
	return b.String()
}

// unknown says why a value is not in the command and how to give it.
func (t *Template) unknown(name string) string {
	info := t.Vars[name]
	if info.Secret {
		return fmt.Sprintf("%s is secret (%s) and not copied: set it in this shell first (read -rs %s)", name, info.From, name)
	}
	if strings.HasPrefix(info.From, "parameter ") {
		return fmt.Sprintf("%s has no value: give it in the parameters and copy again, or set it in this shell", name)
	}
	return fmt.Sprintf("%s is not known yet: it is %s; run that first, or set %s in this shell", name, info.From, name)
}

// notCopied is what a kube body with an unknown value copies: comments
// only, which do nothing when pasted.
func (t *Template) notCopied(name string) string {
	return "# Not copied: this block's manifest needs " + strings.ReplaceAll(t.unknown(name), "\n", " ") +
		".\n# A manifest takes its values when it is copied: run that block first (or fill in the value), then copy again.\n"
}

var jsonScalar = regexp.MustCompile(`^(true|false|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)$`)

// JSONEscape escapes v for the inside of a JSON string as the exported
// script does: backslash, quote and control characters.
func JSONEscape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '"':
			b.WriteString(`\"`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ShellValue is v as one shell word: single-quoted, or $'...' when it holds
// control characters (a newline), so that no value puts a line of its own
// into a here-document.
func ShellValue(v string) string {
	if !strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return runbook.ShellQuote(v)
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\'':
			b.WriteString(`\'`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("'")
	return b.String()
}

// Destination is a host value as ssh takes it: as written, or
// ssh://[user@]host:port when it names a port (ssh takes no host:port).
func Destination(v string) string {
	if m := bracketPort.FindStringSubmatch(v); m != nil {
		return "ssh://" + m[1] + "[" + m[2] + "]:" + m[3]
	}
	if m := namePort.FindStringSubmatch(v); m != nil {
		return "ssh://" + m[1] + m[2] + ":" + m[3]
	}
	return v
}

var (
	bracketPort = regexp.MustCompile(`^(.+@)?\[([^\]]+)\]:([0-9]+)$`)
	namePort    = regexp.MustCompile(`^(.+@)?([^:\[\]@]+):([0-9]+)$`)
)
