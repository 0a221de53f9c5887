package runbook

import (
	"sort"
	"strings"
)

// reservedEnv are environment variables a shell block may read without
// declaring them. Parameters may not take these names.
var reservedEnv = map[string]bool{
	"HOME": true, "USER": true, "LOGNAME": true, "PATH": true, "PWD": true, "OLDPWD": true, "SHELL": true,
	"HOSTNAME": true, "UID": true, "EUID": true, "PPID": true, "RANDOM": true, "LINENO": true,
	"SECONDS": true, "IFS": true, "TERM": true, "LANG": true, "LC_ALL": true, "TMPDIR": true,
	"KUBECONFIG": true, "SUDO_USER": true, "SSH_AUTH_SOCK": true, "BASH_SOURCE": true,
	"BASH_VERSION": true, "BASHPID": true, "PIPESTATUS": true, "FUNCNAME": true, "OPTARG": true,
	"OPTIND": true, "REPLY": true, "BASH_REMATCH": true, "EDITOR": true, "HOSTTYPE": true,
	"OSTYPE": true, "MACHTYPE": true, "GROUPS": true,
}

// isReservedEnv also admits CAIRN_*, which the executor sets (CAIRN_HOST…).
func isReservedEnv(name string) bool {
	return reservedEnv[name] || strings.HasPrefix(name, "CAIRN_")
}

// shellRefs scans a bash script for $NAME / ${NAME...} references to upper-case
// names and for names the script assigns itself. It is a lexer, not a parser:
// it skips single-quoted text, comments and quoted heredocs, which is where
// `$X` is not an expansion, and reports byte offsets of each reference.
func shellRefs(src string) (refs []shellRef, assigned map[string]bool) {
	assigned = map[string]bool{}
	inDouble := false
	wordStart := true
	var heredocs []heredoc // pending heredocs, in order
	prevWord, prevPrevWord := "", ""
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\n':
			wordStart = true
			if len(heredocs) > 0 {
				end, docRefs := scanHeredocs(src, i+1, heredocs)
				refs = append(refs, docRefs...)
				i = end - 1
				heredocs = nil
			}
			continue
		case c == '\\':
			i++
			continue
		case c == '\'' && !inDouble:
			j := strings.IndexByte(src[i+1:], '\'')
			if j < 0 {
				return refs, assigned
			}
			i += j + 1
			wordStart = false
			continue
		case c == '"':
			inDouble = !inDouble
			wordStart = false
			continue
		case c == '#' && !inDouble && wordStart:
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return refs, assigned
			}
			i += j - 1
			continue
		case c == '<' && !inDouble && strings.HasPrefix(src[i:], "<<"):
			rest := strings.TrimLeft(src[i+2:], "-~ \t")
			switch {
			case strings.HasPrefix(src[i:], "<<<"):
				// a here-string, not a heredoc
			case len(rest) > 0 && (rest[0] == '\'' || rest[0] == '"'):
				q := rest[0]
				if k := strings.IndexByte(rest[1:], q); k > 0 {
					heredocs = append(heredocs, heredoc{delim: rest[1 : 1+k], quoted: true})
				}
			case len(rest) > 0 && (isNameStart(rest[0]) || rest[0] >= '0' && rest[0] <= '9'):
				k := 0
				for k < len(rest) && (isNameStart(rest[k]) || rest[k] >= '0' && rest[k] <= '9') {
					k++
				}
				heredocs = append(heredocs, heredoc{delim: rest[:k]})
			}
		case c == '$' && i+1 < len(src):
			j := i + 1
			if src[j] == '{' {
				j++
				if j < len(src) && (src[j] == '#' || src[j] == '!') {
					j++
				}
			}
			k := j
			for k < len(src) && (src[k] >= 'A' && src[k] <= 'Z' || src[k] >= '0' && src[k] <= '9' || src[k] == '_' || src[k] >= 'a' && src[k] <= 'z') {
				k++
			}
			name := src[j:k]
			if name != "" && name[0] >= 'A' && name[0] <= 'Z' && name == strings.ToUpper(name) {
				ctx := byte(0)
				if inDouble {
					ctx = '"'
				}
				refs = append(refs, shellRef{Name: name, Off: i, Ctx: ctx})
			}
			wordStart = false
			i = k - 1
			continue
		case c == ' ' || c == '\t' || c == ';' || c == '|' || c == '&' || c == '(' || c == ')' || c == '`':
			wordStart = true
			continue
		}
		if wordStart && !inDouble && isNameStart(c) {
			k := i
			for k < len(src) && (isNameStart(src[k]) || src[k] >= '0' && src[k] <= '9') {
				k++
			}
			word := src[i:k]
			if k < len(src) && (src[k] == '=' || strings.HasPrefix(src[k:], "+=")) {
				assigned[word] = true
			}
			switch prevWord {
			case "for", "export", "local", "declare", "readonly", "typeset", "read", "select", "mapfile", "readarray":
				assigned[word] = true
			}
			// read -r -p "..." NAME and similar: any option before the name.
			if prevPrevWord == "read" || prevPrevWord == "export" || prevPrevWord == "declare" || prevPrevWord == "local" {
				assigned[word] = true
			}
			prevPrevWord, prevWord = prevWord, word
			i = k - 1
			wordStart = false
			continue
		}
		if wordStart && c == '-' {
			// an option such as -r: keep prevWord so "read -r NAME" works.
			k := i
			for k < len(src) && src[k] != ' ' && src[k] != '\t' && src[k] != '\n' {
				k++
			}
			i = k - 1
			wordStart = false
			continue
		}
		wordStart = false
	}
	return refs, assigned
}

type shellRef struct {
	Name string
	Off  int
	// Ctx is where the reference stands: 0 bare, '"' inside double
	// quotes, 'h' in the body of an unquoted heredoc.
	Ctx byte
}

// heredoc is a pending heredoc: its delimiter, and whether it was quoted
// (<<'EOF': its body expands nothing).
type heredoc struct {
	delim  string
	quoted bool
}

// bodyRefs finds ${NAME} references in a non-shell body (manifests, copy
// lists, attribute values), where only the braced form is a reference.
func bodyRefs(src string, bracedOnly bool) []shellRef {
	var refs []shellRef
	for i := 0; i < len(src); i++ {
		if src[i] != '$' || i+1 >= len(src) {
			continue
		}
		j := i + 1
		braced := src[j] == '{'
		if braced {
			j++
		} else if bracedOnly {
			continue
		}
		k := j
		for k < len(src) && (src[k] >= 'A' && src[k] <= 'Z' || src[k] >= '0' && src[k] <= '9' || src[k] == '_') {
			k++
		}
		if k == j || src[j] < 'A' || src[j] > 'Z' {
			continue
		}
		if braced && (k >= len(src) || src[k] != '}') {
			continue
		}
		refs = append(refs, shellRef{Name: src[j:k], Off: i})
	}
	return refs
}

// Substitute replaces ${NAME} (and, unless bracedOnly, $NAME) with values[NAME]
// for the names present in values. Used for kube bodies and attribute values,
// never for shell text.
func Substitute(src string, values map[string]string, bracedOnly bool) string {
	refs := FindRefs(src, bracedOnly)
	if len(refs) == 0 {
		return src
	}
	var b strings.Builder
	last := 0
	for _, r := range refs {
		v, ok := values[r.Name]
		if !ok {
			continue
		}
		b.WriteString(src[last:r.Start])
		b.WriteString(v)
		last = r.End
	}
	b.WriteString(src[last:])
	return b.String()
}

// scanHeredocs returns the offset just past the bodies of the pending
// heredocs that start at off, each ended by a line equal to its delimiter,
// and the references in the bodies of unquoted ones (which the shell
// expands; quoted ones expand nothing).
func scanHeredocs(src string, off int, docs []heredoc) (int, []shellRef) {
	var refs []shellRef
	for _, d := range docs {
		for off < len(src) {
			line, _, _ := strings.Cut(src[off:], "\n")
			if strings.TrimLeft(line, "\t") == d.delim {
				off += len(line) + 1
				break
			}
			if !d.quoted {
				for _, r := range bodyRefs(line, false) {
					refs = append(refs, shellRef{Name: r.Name, Off: off + r.Off, Ctx: 'h'})
				}
			}
			off += len(line) + 1
		}
	}
	return min(off, len(src)), refs
}

// ShowShell fills values into a bash script for a person to read or paste:
// each $NAME or ${NAME} the shell would expand becomes its value, quoted
// for where it stands: a shell word outside quotes, escaped for double
// quotes inside them, as it is in an unquoted heredoc's body. References
// the shell would not expand (single quotes, comments, quoted heredocs),
// names without a value and ${NAME...} forms with operators stay as written.
func ShowShell(src string, values map[string]string) string {
	refs, _ := shellRefs(src)
	var b strings.Builder
	last := 0
	for _, r := range refs {
		v, ok := values[r.Name]
		if !ok || r.Off < last {
			continue
		}
		var end int
		switch rest := src[r.Off:]; {
		case strings.HasPrefix(rest, "${"+r.Name+"}"):
			end = r.Off + len(r.Name) + 3
		case strings.HasPrefix(rest, "$"+r.Name):
			end = r.Off + 1 + len(r.Name)
		default: // ${NAME:-...} and the like: the shell's to expand
			continue
		}
		b.WriteString(src[last:r.Off])
		switch {
		case r.Ctx == '"':
			b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(v))
		case r.Ctx == 'h' || v == "":
			b.WriteString(v)
		default:
			b.WriteString(ShellWord(v))
		}
		last = end
	}
	b.WriteString(src[last:])
	return b.String()
}

// Ref is a parameter reference in text: src[Start:End] is $NAME or ${NAME}.
type Ref struct {
	Name       string
	Start, End int
}

// FindRefs returns the $NAME and ${NAME} references in src (only ${NAME}
// when bracedOnly), for display: the site wraps them so the page can fill in
// values.
func FindRefs(src string, bracedOnly bool) []Ref {
	raw := bodyRefs(src, bracedOnly)
	out := make([]Ref, len(raw))
	for i, r := range raw {
		end := r.Off + 1 + len(r.Name)
		if src[r.Off+1] == '{' {
			end += 2
		}
		out[i] = Ref{Name: r.Name, Start: r.Off, End: end}
	}
	return out
}

// ReadNames is every name of names (a runbook's Names) that the block
// reads: in its body and in the attributes the runners fill (kind, name,
// namespace, selectors, replicas, for), sorted. The exported script and the
// copied command pass exactly these.
func (b *Block) ReadNames(names map[string]bool) []string {
	set := map[string]bool{}
	for _, r := range b.Refs {
		set[r] = true
	}
	for _, s := range []string{b.Kind, b.Name, b.Namespace, b.Selector, b.FieldSelector, b.Replicas, b.For, b.Content} {
		for _, r := range FindRefs(s, false) {
			if names[r.Name] {
				set[r.Name] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// Names returns every parameter and capture name of the runbook.
func (r *Runbook) Names() map[string]bool {
	m := map[string]bool{}
	for _, p := range r.Params {
		m[p.Name] = true
	}
	for _, b := range r.Blocks {
		for _, c := range b.Captures {
			m[c.Name] = true
		}
	}
	return m
}
