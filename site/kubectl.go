package site

import (
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// kubectlCommand is what Copy puts on the clipboard for a native kube
// action: the kubectl command that does the same, for a reader to paste
// into a terminal. Parameter references stay as ${NAME}; the page fills
// them in (shell-quoted on the command line, as written in the heredoc
// body). The kube context is the runbook's when it names exactly one.
func kubectlCommand(rb *runbook.Runbook, b *runbook.Block) string {
	if b.Target != runbook.TargetKube || b.Action == "" {
		return ""
	}
	args := []string{"kubectl"}
	if cs := rb.Meta.KubeContexts; len(cs) == 1 && !strings.ContainsAny(cs[0], "*?[") {
		args = append(args, "--context", word(cs[0]))
	}
	add := func(a ...string) { args = append(args, a...) }
	ns := func() {
		if b.Namespace != "" {
			add("-n", word(b.Namespace))
		}
	}
	sel := func() {
		if b.Selector != "" {
			add("-l", word(b.Selector))
		}
		if b.FieldSelector != "" {
			add("--field-selector", word(b.FieldSelector))
		}
	}
	kindName := func() {
		add(word(b.Kind))
		if b.Name != "" {
			add(word(b.Name))
		}
	}
	body := ""
	switch b.Action {
	case "apply":
		add("apply", "--server-side", "--field-manager=cairn")
		ns()
		add("-f", "-")
		body = b.Content
	case "get":
		add("get")
		kindName()
		ns()
		sel()
		if b.JSONPath != "" {
			add("-o", runbook.ShellQuote("jsonpath="+b.JSONPath))
		} else {
			add("-o", "yaml")
		}
	case "delete":
		add("delete")
		kindName()
		ns()
		sel()
		add("--wait=false")
	case "scale":
		add("scale")
		kindName()
		ns()
		add("--replicas=" + word(b.Replicas))
	case "wait":
		add("wait")
		kindName()
		if b.All {
			add("--all")
		}
		ns()
		sel()
		add("--for="+word(b.For), "--timeout="+shortDuration(b.Timeout))
	case "patch":
		add("patch")
		kindName()
		ns()
		pt := b.PatchType
		if pt == "" {
			pt = "strategic"
		}
		add("--type", pt, "--patch-file", "/dev/stdin")
		body = b.Content
	default:
		return ""
	}
	cmd := strings.Join(args, " ")
	if body == "" {
		return cmd
	}
	delim := "EOF"
	for strings.Contains("\n"+body+"\n", "\n"+delim+"\n") {
		delim += "_"
	}
	return cmd + " <<'" + delim + "'\n" + strings.TrimRight(body, "\n") + "\n" + delim
}

// word is an argument as written: quoted when it is not plain, with its
// ${NAME} references left for the page (which quotes their values).
func word(s string) string {
	if runbook.PlainWord(s) {
		return s
	}
	// Parameter references alone: the page quotes what it fills in.
	if refs := runbook.FindRefs(s, false); len(refs) > 0 {
		rest := s
		for i := len(refs) - 1; i >= 0; i-- {
			rest = rest[:refs[i].Start] + rest[refs[i].End:]
		}
		if rest == "" || runbook.PlainWord(rest) { // "$NS" alone, or "app=${APP}"
			return s
		}
	}
	return runbook.ShellQuote(s)
}
