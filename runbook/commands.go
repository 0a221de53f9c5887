package runbook

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// ShellCommands splits a shell body into its simple commands' words,
// roughly (at newlines, with continued lines joined, and at ; & | ( ) ` { }),
// with what runs a command stripped off its front (sudo and its flags, env
// and assignments, time, nohup, exec, xargs, watch, then, do, if, while,
// until, else, !, command, nice). Quoted text is one word Q, never a
// command, unless it substitutes one ("$(kubectl delete …)"). Comments are
// dropped. Enough to find which commands a block runs (cairn import's
// safety marks, cairn check's stdin warning); not a shell parser.
func ShellCommands(body string) [][]string {
	var out [][]string
	for _, cmd := range simpleCommands(body) {
		if w := commandWords(cmd); len(w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

var quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)

func simpleCommands(body string) []string {
	body = strings.ReplaceAll(body, "\\\n", " ")
	var out []string
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimPrefix(line, "$ ") // a prompt
		if !strings.ContainsAny(line, `"'`) {
			// Most lines quote nothing; the regexp was a tenth of a build.
		} else {
			line = quotedRe.ReplaceAllStringFunc(line, func(q string) string {
				if strings.Contains(q, "$(") || strings.Contains(q, "`") {
					return q
				}
				return " Q "
			})
		}
		out = append(out, strings.FieldsFunc(line, func(r rune) bool {
			return r == ';' || r == '&' || r == '|' || r == '(' || r == ')' || r == '`' || r == '{' || r == '}'
		})...)
	}
	return out
}

func commandWords(cmd string) []string {
	cmd = strings.ReplaceAll(cmd, ">", " > ")
	cmd = strings.ReplaceAll(cmd, " >  > ", " >> ")
	cmd = strings.ReplaceAll(cmd, "<", " < ")
	cmd = strings.ReplaceAll(cmd, " <  < ", " << ")
	cmd = strings.ReplaceAll(cmd, " <<  < ", " <<< ")
	w := strings.Fields(strings.ReplaceAll(cmd, "$", ""))
	for len(w) > 0 {
		switch first := w[0]; {
		case first == "sudo" || first == "doas":
			w = w[1:]
			for len(w) > 0 && strings.HasPrefix(w[0], "-") {
				if w[0] == "-u" || w[0] == "-g" {
					w = w[1:]
				}
				if len(w) > 0 {
					w = w[1:]
				}
			}
		case first == "env" || first == "time" || first == "nohup" || first == "exec" || first == "xargs" ||
			first == "watch" || first == "then" || first == "do" || first == "if" || first == "while" ||
			first == "until" || first == "else" || first == "!" || first == "command" || first == "nice":
			w = w[1:]
			for len(w) > 0 && strings.HasPrefix(w[0], "-") {
				w = w[1:]
			}
		case strings.Contains(first, "=") && !strings.HasPrefix(first, "="):
			w = w[1:]
		default:
			return w
		}
	}
	return w
}

var loopInput = regexp.MustCompile(`(?s)\bdone\s*<|\|\s*while\b`)

// mayReadStdin is false when no command of body can be one readsStdin
// names: none of their names stands in the text (with $ removed, as
// commandWords removes it) as a word of its own, so most blocks skip
// splitting into commands ("Ready" or "already" hold no read).
func mayReadStdin(body string) bool {
	if strings.Contains(body, "$") {
		body = strings.ReplaceAll(body, "$", "")
	}
	for _, name := range stdinWords {
		for i := 0; ; {
			j := strings.Index(body[i:], name)
			if j < 0 {
				break
			}
			at, end := i+j, i+j+len(name)
			if (at == 0 || !wordByte(body[at-1])) && (end == len(body) || !wordByte(body[end]) && body[end] != '/') {
				return true
			}
			i = at + 1
		}
	}
	return false
}

// wordByte is a byte that can be part of a command name next to the one
// looked for (a '/' before it is a directory, after it a directory too).
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c >= 0x80
}

// stdinWords are the names readsStdin looks for ("kubectl edit": edit).
var stdinWords = append(slices.Collect(maps.Keys(interactive)), "read", "edit")

// interactive are programs that wait for a person at a terminal.
var interactive = map[string]bool{
	"vi": true, "vim": true, "nvim": true, "nano": true, "emacs": true, "less": true, "more": true, "top": true,
	"htop": true, "passwd": true, "visudo": true, "vipw": true,
}

// ReadsStdin names the command of a shell block that waits for input (see
// readsStdin), or "".
func ReadsStdin(b *Block) string {
	if !contains(shellLangs, b.Lang) || b.Action != "" || b.Target == TargetManual {
		return ""
	}
	return readsStdin(b.Content)
}

// readsStdin names the first command of body that waits for standard
// input or a person, or "": `read` without a redirection, an editor or a
// pager, `kubectl edit`, `ssh -t`.
func readsStdin(body string) string {
	if !mayReadStdin(body) {
		return ""
	}
	// `while read …; do …; done < file` and `… | while read` read what
	// they are given.
	loopFed := loopInput.MatchString(body)
	for _, w := range ShellCommands(body) {
		name := w[0]
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		switch {
		case name == "read":
			redirected := false
			for _, a := range w[1:] {
				if a == "<" || a == "<<" || a == "<<<" {
					redirected = true
				}
			}
			if !redirected && !loopFed {
				return "read"
			}
		case interactive[name]:
			return name
		case name == "kubectl" && len(w) > 1 && w[1] == "edit":
			return "kubectl edit"
		}
	}
	return ""
}
