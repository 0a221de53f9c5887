package runbook

// A native kube action (action=get, apply, …) is also a kubectl command: the
// page's Copy and cairn run's confirmation give it (runbook/paste) and the
// exported script runs it (export). Both take the arguments from here, so
// the command a reader copies and the one the script runs are the same.

// ArgKind is how a kubectl argument is written into a shell command.
type ArgKind int

const (
	ArgPlain  ArgKind = iota // a fixed word that needs no quoting
	ArgQuoted                // a fixed word that needs quoting; no references in it are expanded
	ArgAttr                  // an attribute value: its ${NAME} references are the block's values
)

// KubectlArg is one argument of a kube action's kubectl command.
type KubectlArg struct {
	Kind ArgKind
	Text string
}

func plain(s ...string) []KubectlArg {
	out := make([]KubectlArg, len(s))
	for i, x := range s {
		out[i] = KubectlArg{ArgPlain, x}
	}
	return out
}

func attr(s string) KubectlArg { return KubectlArg{ArgAttr, s} }

// KubectlSelection is the objects a kube block names: KIND [NAME], its
// namespace and selectors.
func KubectlSelection(b *Block) []KubectlArg {
	out := []KubectlArg{attr(b.Kind)}
	if b.Name != "" {
		out = append(out, attr(b.Name))
	}
	return append(out, kubectlScope(b)...)
}

// kubectlScope is -n, -l and --field-selector as the block gives them.
func kubectlScope(b *Block) []KubectlArg {
	var out []KubectlArg
	if b.Namespace != "" {
		out = append(out, KubectlArg{ArgPlain, "-n"}, attr(b.Namespace))
	}
	if b.Selector != "" {
		out = append(out, KubectlArg{ArgPlain, "-l"}, attr(b.Selector))
	}
	if b.FieldSelector != "" {
		out = append(out, KubectlArg{ArgPlain, "--field-selector"}, attr(b.FieldSelector))
	}
	return out
}

// KubectlArgs is the kubectl command (after `kubectl --context C`) that
// does what b's action does: the verb and its arguments. Not in it: the
// body apply and patch send (apply reads it with -f -, a patch is added
// by each side as --patch-file or -p) and wait's --timeout (what is left
// of the block's timeout after waiting for the objects to exist). Nil for
// a block with no action.
func KubectlArgs(b *Block) []KubectlArg {
	switch b.Action {
	case "apply":
		args := plain("apply", "--server-side", "--field-manager=cairn", "--force-conflicts")
		if b.Namespace != "" {
			args = append(args, KubectlArg{ArgPlain, "-n"}, attr(b.Namespace))
		}
		return append(args, plain("-f", "-")...)
	case "get":
		args := append(plain("get"), KubectlSelection(b)...)
		if b.JSONPath != "" {
			// Taken as written, as the kube runner takes it: no values in it.
			return append(args, KubectlArg{ArgPlain, "-o"}, KubectlArg{ArgQuoted, "jsonpath=" + b.JSONPath})
		}
		return append(args, plain("-o", "yaml")...)
	case "delete":
		return append(append(plain("delete"), KubectlSelection(b)...), plain("--wait=false")...)
	case "patch":
		pt := b.PatchType
		if pt == "" {
			pt = "strategic"
		}
		return append(append(plain("patch"), KubectlSelection(b)...), plain("--type", pt)...)
	case "scale":
		return append(append(plain("scale"), KubectlSelection(b)...), attr("--replicas="+b.Replicas))
	case "wait":
		args := append(plain("wait"), KubectlSelection(b)...)
		if b.All && b.Name == "" && b.Selector == "" && b.FieldSelector == "" {
			args = append(args, plain("--all")...)
		}
		return append(args, attr("--for="+b.For))
	}
	return nil
}
