// Package paste builds the shell command a reader copies for a block: what
// the page's Copy button puts on the clipboard, what its confirmation shows,
// and what `cairn run` shows before a block runs. Copy is the path of
// readers without the executor (air-gapped sites among them), so the command
// is complete (the hosts, sudo and ssh of an SSH block; --context of a kube
// block; the source and destination of a copy) and does what the block does
// when the executor runs it: the body under bash -euo pipefail with the
// values in its environment, on each host over ssh, with no standard input.
//
// Values are data. They are never spliced into the command's text: a value
// is one single-quoted shell word, assigned to the name the block uses and
// passed in the environment; where an attribute holds a reference inside a
// word (selector="tier in (${APP})") the word is double-quoted around
// "${APP}", which the shell expands without reading the value as code; a
// kube body is JSON with each value JSON-escaped inside its string. Bodies
// travel in quoted here-documents whose terminator is chosen not to occur
// in them, and a filled value never holds a newline there. A value not known
// yet (a capture whose block has not run, a secret the page does not copy)
// is named with where it comes from: the command stops with that message
// unless the reader's shell sets it.
//
// Build gives a Template: text and value slots, filled by Fill here (for
// `cairn run`) and by the same rules in the theme's cairn.js (the page).
package paste

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/nodepod"
)

// Slot kinds.
const (
	KindShell   = "sh" // a shell word: the value single-quoted
	KindHosts   = "hosts"
	KindJSONStr = "js" // inside a JSON string: the value JSON-escaped
	KindJSON    = "jp" // a whole JSON scalar: a number or boolean as it is, else a JSON string
)

// Segment is literal text or a value slot.
type Segment struct {
	Text string `json:"t,omitempty"`
	Name string `json:"v,omitempty"`
	Kind string `json:"k,omitempty"`
}

// Var says what a slot's name is, for the message when its value is not
// known.
type Var struct {
	Secret bool   `json:"secret,omitempty"`
	From   string `json:"from"` // "parameter NAME" or `captured by block "x" (step 2)`
}

// Template is a block's command with value slots.
type Template struct {
	Segs []Segment      `json:"s"`
	Vars map[string]Var `json:"n"`
}

// JSON is the template as the page reads it (data-copy).
func (t *Template) JSON() string {
	b, _ := json.Marshal(t)
	return string(b)
}

type builder struct {
	rb    *runbook.Runbook
	b     *runbook.Block
	t     *Template
	names map[string]bool // the runbook's parameters and captures
}

func (w *builder) text(s string) {
	if n := len(w.t.Segs); n > 0 && w.t.Segs[n-1].Name == "" {
		w.t.Segs[n-1].Text += s
		return
	}
	w.t.Segs = append(w.t.Segs, Segment{Text: s})
}

func (w *builder) slot(name, kind string) {
	w.t.Segs = append(w.t.Segs, Segment{Name: name, Kind: kind})
	if _, ok := w.t.Vars[name]; !ok {
		w.t.Vars[name] = w.describe(name)
	}
}

// describe says where a name's value comes from.
func (w *builder) describe(name string) Var {
	if p := w.rb.ParamByName(name); p != nil {
		return Var{Secret: p.Secret, From: "parameter " + name}
	}
	for _, x := range w.rb.Blocks {
		for _, c := range x.Captures {
			if c.Name == name {
				where := fmt.Sprintf("captured by block %q", x.ID)
				if x.Step != nil {
					where += fmt.Sprintf(" (step %d)", x.Step.Number)
				}
				return Var{Secret: c.Secret || slices.Contains(x.Secrets, name), From: where}
			}
		}
	}
	return Var{From: name}
}

// Build returns the command for an executable block b of rb, or nil for a
// block with nothing to paste (manual steps, display blocks).
func Build(rb *runbook.Runbook, b *runbook.Block) *Template {
	if !b.Executable() || b.Target == runbook.TargetManual && !runbook.IsShellLang(b.Lang) {
		return nil
	}
	w := &builder{rb: rb, b: b, t: &Template{Vars: map[string]Var{}}, names: rb.Names()}
	switch {
	case b.Target == runbook.TargetManual:
		w.manual()
	case b.Target == runbook.TargetKube && b.Action != "":
		w.kubeAction()
	case b.Target == runbook.TargetSSH && b.Action == "copy":
		w.copyFiles()
	case b.Target == runbook.TargetSSH:
		w.ssh()
	case b.Target == runbook.TargetPod:
		w.pods()
	case b.Target == runbook.TargetNode:
		w.nodes()
	default:
		w.local()
	}
	w.text(")\n")
	return w.t
}

// refs are the parameter and capture names the block reads, sorted, as
// the exported script has them.
func (w *builder) refs() []string { return w.b.ReadNames(w.names) }

// assign writes NAME=value lines for names: shell variables of the
// reader's shell the command then uses.
func (w *builder) assign(names []string) {
	for _, n := range names {
		w.text(n + "=")
		w.slot(n, KindShell)
		w.text("\n")
	}
}

// delim is a here-document terminator that is no line of body.
func delim(body string) string {
	d := "CAIRN_EOF"
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[strings.TrimRight(l, "\r")] = true
		lines[strings.TrimLeft(strings.TrimRight(l, "\r"), "\t")] = true
	}
	for i := 2; lines[d]; i++ {
		d = fmt.Sprintf("CAIRN_EOF_%d", i)
	}
	return d
}

// readBody writes bash that reads body, verbatim, into CAIRN_BODY.
func (w *builder) readBody(body string) {
	body = strings.TrimRight(body, "\n")
	d := delim(body)
	w.text("IFS= read -r -d '' CAIRN_BODY <<'" + d + "' || true\n" + body + "\n" + d + "\n")
}

// header is a comment naming the block, for a reader who reads the paste.
func (w *builder) header(what string) {
	title := w.b.ID
	if w.b.Title != "" {
		title += " — " + w.b.Title
	}
	// One subshell: a paste into an interactive shell runs as one command
	// (a value that is not known stops all of it, not one line of it), and
	// leaves no variable or function behind.
	w.text("# " + oneLine(title) + ": " + what + "\n(\n")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// manual: a manual shell step as the reader would type it, after the
// values it uses (exported, for the commands it starts).
func (w *builder) manual() {
	w.header("a manual step, by hand in this shell")
	for _, n := range w.refs() {
		w.text("export " + n + "=")
		w.slot(n, KindShell)
		w.text("\n")
	}
	w.text(strings.TrimRight(w.b.Content, "\n") + "\n")
}

const bashFlags = "bash --noprofile --norc -euo pipefail"

// local: the body under bash -euo pipefail, values in its environment, no
// standard input (as the executor runs it).
func (w *builder) local() {
	refs := w.refs()
	kube := w.b.Target == runbook.TargetKube
	ctx := w.kubeContext()
	if kube && ctx != "" {
		w.header("on this machine, kubectl and helm pinned to context " + ctx)
	} else if kube {
		w.header("on this machine, against your current kube context")
	} else {
		w.header("on this machine")
	}
	w.assign(refs)
	body := w.b.Content
	if kube && ctx != "" {
		// The executor pins the runbook's context in a kubeconfig of its
		// own; a paste pins it for kubectl (a function) and helm.
		body = "kubectl() { command kubectl --context " + runbook.ShellWord(ctx) + " \"$@\"; }\n" + body
	}
	w.readBody(body)
	var env []string
	for _, r := range refs {
		env = append(env, r+"=\"$"+r+"\"")
	}
	if kube && ctx != "" {
		env = append(env, "HELM_KUBECONTEXT="+runbook.ShellWord(ctx))
	}
	cmd := bashFlags + " -c \"$CAIRN_BODY\" </dev/null\n"
	if len(env) > 0 {
		cmd = "env " + strings.Join(env, " ") + " " + cmd
	}
	w.text(cmd)
}

// kubeContext is the runbook's kube context when it names exactly one.
func (w *builder) kubeContext() string {
	if cs := w.rb.Meta.KubeContexts; len(cs) == 1 && !strings.ContainsAny(cs[0], "*?[") {
		return cs[0]
	}
	return ""
}

const sshOpts = "ssh ${CAIRN_SSH_CONFIG:+-F \"$CAIRN_SSH_CONFIG\"} -o BatchMode=yes -T"

// ssh: the body on each host of the block's group, one after another,
// read by the remote bash from standard input after the exports of the
// values it uses (printf %q quotes them for the remote shell).
func (w *builder) ssh() {
	b := w.b
	refs := w.refs()
	sudo := ""
	how := "over ssh"
	if b.Sudo {
		sudo = "sudo -n "
		how += ", as root (sudo -n)"
	}
	w.header("on each host of " + b.Hosts + " " + how)
	w.assign(refs)
	w.readBody(b.Content)
	w.text("for CAIRN_HOST in ")
	w.slot(b.Hosts, KindHosts)
	w.text("; do\n")
	w.remoteInput(refs)
	w.text(sshOpts + " \"$CAIRN_HOST\" '" + sudo + bashFlags + " -s' || break\ndone\n")
}

// kubectl is the kubectl command, pinned to the runbook's context when it
// names one, with -n when ns (an attribute) is set.
func (w *builder) kubectl(ns string) string {
	c := "kubectl"
	if ctx := w.kubeContext(); ctx != "" {
		c += " --context " + runbook.ShellWord(ctx)
	}
	if ns != "" {
		c += " -n " + w.wordText(ns, false)
	}
	return c
}

// against is how a header names the cluster.
func (w *builder) against() string {
	if ctx := w.kubeContext(); ctx != "" {
		return "context " + ctx
	}
	return "your current kube context"
}

// remoteInput writes the { exports; body } the ssh loop pipes into a
// remote bash (printf %q quotes the values for it).
func (w *builder) remoteInput(refs []string) {
	w.text("  {")
	for _, r := range refs {
		w.text(" printf 'export " + r + "=%q\\n' \"$" + r + "\";")
	}
	w.text(" printf '%s\\n' \"$CAIRN_BODY\"; } |\n    ")
}

// execArgs is what follows kubectl exec POD --: the shell that exports
// each value given as NAME VALUE arguments and runs the body, the last
// argument (nodepod.Shell); host is the shell expression of CAIRN_HOST.
func (w *builder) execArgs(refs []string, host string) string {
	var b strings.Builder
	b.WriteString("/bin/sh -c " + runbook.ShellWord(nodepod.Shell) + " cairn")
	for _, r := range refs {
		b.WriteString(" " + r + " \"$" + r + "\"")
	}
	b.WriteString(" CAIRN_BLOCK " + runbook.ShellWord(w.b.ID) + " CAIRN_HOST " + host + " \"$CAIRN_BODY\" </dev/null")
	return b.String()
}

// pods: the body in each chosen pod, one after another (kubectl exec),
// read by the container's bash (sh without one) from standard input after
// the exports of the values it uses.
func (w *builder) pods() {
	b := w.b
	refs := w.refs()
	kc := w.kubectl(b.Namespace)
	what := "pod " + b.Name
	switch {
	case b.Workload != "":
		what = "pod of " + b.Workload
	case b.Selector != "":
		what = "pod with labels " + b.Selector
	}
	w.header("in each " + oneLine(what) + " (kubectl exec), against " + w.against())
	w.assign(refs)
	w.readBody(b.Content)
	switch {
	case b.Name != "":
		w.text("CAIRN_PODS=" + w.wordText(b.Name, false) + "\n")
	case b.Workload != "":
		// The workload's own selector (its matchLabels), as the runner
		// reads it.
		w.text("CAIRN_SEL=$(" + kc + " get " + w.wordText(b.Workload, false) +
			" -o go-template='{{range $k, $v := .spec.selector.matchLabels}}{{$k}}={{$v}},{{end}}') || exit\n")
		w.text("CAIRN_PODS=$(" + kc + " get pods -l \"${CAIRN_SEL%,}\" -o name) || exit\n")
	default:
		w.text("CAIRN_PODS=$(" + kc + " get pods -l " + w.wordText(b.Selector, false) + " -o name) || exit\n")
	}
	container := ""
	if b.Container != "" {
		container = " -c " + w.wordText(b.Container, false)
	}
	// No globbing of the names' words.
	w.text("set -f\nfor CAIRN_POD in $CAIRN_PODS; do\n")
	w.text("  " + kc + " exec \"$CAIRN_POD\"" + container + " -- " + w.execArgs(refs, "\"${CAIRN_POD#pod/}\"") + " || break\ndone\n")
}

// nodes: the body on each chosen node, one after another, as root in the
// node's namespaces, through the pod the executor makes (runbook/nodepod:
// made with kubectl create, entered with kubectl exec and nsenter, deleted
// after), which is what kubectl debug node --profile=sysadmin does.
func (w *builder) nodes() {
	b := w.b
	refs := w.refs()
	kc := w.kubectl(b.Namespace)
	what := "node of " + b.Nodes
	if b.Nodes == "" {
		what = "node with labels " + b.Selector
	}
	switch {
	case b.Action != "copy":
		w.header("on each " + oneLine(what) + " as root, through a privileged pod pinned to it (kubectl exec and nsenter), against " + w.against())
	case b.From != "":
		w.header("copies files from node " + b.From + " to each " + oneLine(what) + " as root, through privileged pods pinned to them (kubectl exec and nsenter), against " + w.against())
	default:
		w.header("copies files from this machine to each " + oneLine(what) + " as root, through a privileged pod pinned to it (kubectl exec and nsenter), against " + w.against())
	}
	w.assign(refs)
	if b.Action != "copy" {
		w.readBody(b.Content)
	}
	w.text("CAIRN_IMAGE=")
	if b.Image != "" {
		w.word(b.Image, false)
	} else {
		w.text("\"${CAIRN_NODE_IMAGE:-" + nodepod.DefaultImage + "}\"")
	}
	w.text("\n")
	if b.Nodes != "" {
		w.text("CAIRN_NODES=$(printf '%s' " + w.wordText(b.Nodes, false) + " | tr ',' ' ')\n")
	} else {
		w.text("CAIRN_NODES=$(" + kc + " get nodes -l " + w.wordText(b.Selector, false) + " -o name) || exit\n")
	}
	w.text("IFS= read -r -d '' CAIRN_POD_JSON <<'CAIRN_EOF' || true\n" + nodepod.Template(b.ID, b.Timeout) + "\nCAIRN_EOF\n")
	if b.Action == "copy" {
		w.nodeCopy(kc)
		return
	}
	w.nodePod(kc)
	w.text("set -f\nfor CAIRN_NODE in $CAIRN_NODES; do\n  CAIRN_NODE=${CAIRN_NODE#node/}\n")
	w.text("  if cairn_node_up \"$CAIRN_NODE\"; then\n")
	w.text("    " + kc + " exec \"$CAIRN_P\" -- " + strings.Join(nodepod.Nsenter, " ") + " " + w.execArgs(refs, "\"$CAIRN_NODE\"") + "\n")
	w.text("    CAIRN_RC=$?\n  else\n    CAIRN_RC=1\n  fi\n")
	w.text("  [ -z \"$CAIRN_P\" ] || " + kc + " delete \"$CAIRN_P\" --grace-period=" + fmt.Sprint(nodepod.Grace) + " --wait=false >/dev/null\n")
	w.text("  [ \"$CAIRN_RC\" = 0 ] || break\ndone\n")
}

// nodePod writes cairn_node_up NODE: the node pod of $CAIRN_POD_JSON made
// on NODE and waited for, its name in CAIRN_P ("" when none was made).
func (w *builder) nodePod(kc string) {
	w.text("cairn_node_up() {\n  CAIRN_P=\n")
	w.text("  case $1/$CAIRN_IMAGE in " + nodepod.NameChars + ") echo \"not a node name or image: $1 $CAIRN_IMAGE\" >&2; return 1;; esac\n")
	w.text("  CAIRN_J=${CAIRN_POD_JSON//" + nodepod.NodeSlot + "/$1}\n  CAIRN_J=${CAIRN_J//" + nodepod.ImageSlot + "/$CAIRN_IMAGE}\n")
	w.text("  CAIRN_P=$(printf '%s' \"$CAIRN_J\" | " + kc + " create -f - -o name) || return 1\n")
	w.text("  " + kc + " wait --for=condition=Ready \"$CAIRN_P\" --timeout=120s >/dev/null\n}\n")
}

// nodeCopy: each SOURCE [DEST] line to each node as root through its node
// pod (runbook/nodepod.Put: whole or not at all, with the source's mode),
// from this machine or from the node of from= through a pod of its own.
func (w *builder) nodeCopy(kc string) {
	b := w.b
	w.nodePod(kc)
	ns := strings.Join(nodepod.Nsenter, " ") + " /bin/sh -c "
	w.text("CAIRN_PUT=" + runbook.ShellQuote(nodepod.Put) + "\n")
	if b.From != "" {
		w.text("CAIRN_CAT=" + runbook.ShellQuote(nodepod.Cat) + "\nCAIRN_STAT=" + runbook.ShellQuote(nodepod.Stat) + "\n")
		w.text("CAIRN_FROM=" + w.wordText(b.From, false) + "\n")
		w.text("cairn_node_up \"$CAIRN_FROM\" || { [ -z \"$CAIRN_P\" ] || " + kc + " delete \"$CAIRN_P\" --wait=false >/dev/null; exit 1; }\nCAIRN_SRC_POD=$CAIRN_P\n")
		w.text("cairn_get() { " + kc + " exec \"$CAIRN_SRC_POD\" -- " + ns + "\"$1\" cairn \"$2\"; }\n")
	}
	w.text("set -f\nfor CAIRN_HOST in $CAIRN_NODES; do\n  CAIRN_HOST=${CAIRN_HOST#node/}\n")
	w.text("  if ! cairn_node_up \"$CAIRN_HOST\"; then\n    [ -z \"$CAIRN_P\" ] || " + kc + " delete \"$CAIRN_P\" --wait=false >/dev/null\n    break\n  fi\n  CAIRN_RC=0\n")
	for _, c := range b.Copies {
		w.text("  CAIRN_SRC=")
		w.word(c.Src, b.From == "")
		w.text(" CAIRN_DST=")
		w.word(c.Dst, false)
		w.text("\n")
		put := kc + " exec -i \"$CAIRN_P\" -- " + ns + "\"$CAIRN_PUT\" cairn \"$CAIRN_DST\" \"0$CAIRN_MODE\" \"${CAIRN_SRC##*/}\" \"$$\""
		if b.From == "" {
			w.text("  [ \"$CAIRN_RC\" = 0 ] && CAIRN_MODE=$(stat -L -c %a -- \"$CAIRN_SRC\") && " + put + " <\"$CAIRN_SRC\" || CAIRN_RC=1\n")
		} else {
			w.text("  [ \"$CAIRN_RC\" = 0 ] && CAIRN_MODE=$(cairn_get \"$CAIRN_STAT\" \"$CAIRN_SRC\" | cut -d' ' -f1) && cairn_get \"$CAIRN_CAT\" \"$CAIRN_SRC\" | " + put + " || CAIRN_RC=1\n")
		}
	}
	w.text("  " + kc + " delete \"$CAIRN_P\" --grace-period=" + fmt.Sprint(nodepod.Grace) + " --wait=false >/dev/null\n")
	w.text("  [ \"$CAIRN_RC\" = 0 ] || break\ndone\n")
	if b.From != "" {
		w.text(kc + " delete \"$CAIRN_SRC_POD\" --grace-period=" + fmt.Sprint(nodepod.Grace) + " --wait=false >/dev/null\n")
	}
}

// copyFiles: each SOURCE [DEST] line to each host (from the reader's
// machine, or from the host of from=), with its mode, under sudo when the
// block says so.
func (w *builder) copyFiles() {
	b := w.b
	sudo := ""
	if b.Sudo {
		sudo = "sudo -n "
	}
	from := "this machine"
	if b.From != "" {
		from = "the host of " + b.From
	}
	w.header("copies files from " + from + " to each host of " + b.Hosts)
	refs := w.refs()
	if b.From != "" && !slices.Contains(refs, b.From) {
		refs = append(refs, b.From)
		sort.Strings(refs)
	}
	w.assign(refs)
	// cairn_put HOST DEST MODE: standard input to DEST on HOST.
	w.text("cairn_put() { " + sshOpts + " \"$1\" \"" + sudo + "mkdir -p -- \\\"\\$(dirname -- $(printf %q \"$2\"))\\\" && " +
		sudo + "tee -- $(printf %q \"$2\") >/dev/null && " + sudo + "chmod $3 -- $(printf %q \"$2\")\"; }\n")
	if b.From != "" {
		w.text("cairn_get() { " + sshOpts + " \"$1\" \"" + sudo + "$2 -- $(printf %q \"$3\")\" </dev/null; }\n")
		w.text("CAIRN_FROM=")
		w.slot(b.From, KindHosts)
		w.text("\n")
	}
	w.text("for CAIRN_HOST in ")
	w.slot(b.Hosts, KindHosts)
	w.text("; do\n")
	for _, line := range strings.Split(b.Content, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		src, dst := f[0], f[0]
		if len(f) > 1 {
			dst = f[1]
		}
		w.text("  CAIRN_SRC=")
		w.word(src, true)
		w.text(" CAIRN_DST=")
		w.word(dst, false)
		if b.From == "" {
			w.text(" &&\n    cairn_put \"$CAIRN_HOST\" \"$CAIRN_DST\" \"$(stat -L -c %a -- \"$CAIRN_SRC\")\" <\"$CAIRN_SRC\" || break\n")
		} else {
			w.text(" &&\n    cairn_get \"$CAIRN_FROM\" cat \"$CAIRN_SRC\" | cairn_put \"$CAIRN_HOST\" \"$CAIRN_DST\" \"$(cairn_get \"$CAIRN_FROM\" 'stat -L -c %a' \"$CAIRN_SRC\")\" || break\n")
		}
	}
	w.text("done\n")
}

// word writes s (an attribute or a copy path) as one shell word: as it is
// when plain, single-quoted when it has no references, else double-quoted
// with "${NAME}" for each reference (expanded by the shell, never read as
// code) and the rest escaped. A leading ~/ of a local path is $HOME.
func (w *builder) word(s string, local bool) { w.text(w.wordText(s, local)) }

func (w *builder) wordText(s string, local bool) string {
	var out strings.Builder
	refs := runbook.FindRefs(s, false)
	var known []runbook.Ref
	for _, r := range refs {
		if w.names[r.Name] || r.Name == "CAIRN_HOST" {
			known = append(known, r)
		}
	}
	if local && strings.HasPrefix(s, "~/") {
		out.WriteString("\"$HOME\"")
		s = s[1:]
		for i := range known {
			known[i].Start--
			known[i].End--
		}
	}
	if len(known) == 0 {
		return out.String() + runbook.ShellWord(s)
	}
	var b strings.Builder
	b.WriteByte('"')
	at := 0
	for _, r := range known {
		b.WriteString(dqEscape(s[at:r.Start]))
		b.WriteString("${" + r.Name + "}")
		at = r.End
	}
	b.WriteString(dqEscape(s[at:]))
	b.WriteByte('"')
	return out.String() + b.String()
}

// dqEscape escapes s for the inside of a double-quoted shell word.
func dqEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(s)
}

// kubeAction: the kubectl command that does what the action does, with
// the waits the kube runner does: apply again while a CRD of the same
// manifest is not served yet, wait for objects that do not exist yet.
func (w *builder) kubeAction() {
	b := w.b
	refs := w.refs()
	var attrRefs []string
	for _, r := range refs {
		if b.Manifest == nil || !manifestOnly(b, r) {
			attrRefs = append(attrRefs, r)
		}
	}
	ctx := w.kubeContext()
	if ctx != "" {
		w.header("kubectl " + b.Action + " against context " + ctx)
	} else {
		w.header("kubectl " + b.Action + " against your current kube context")
	}
	w.assign(attrRefs)
	var c strings.Builder
	c.WriteString("kubectl")
	if ctx != "" {
		c.WriteString(" --context " + runbook.ShellWord(ctx))
	}
	for _, a := range runbook.KubectlArgs(b) {
		switch a.Kind {
		case runbook.ArgAttr:
			c.WriteString(" " + w.wordText(a.Text, false))
		case runbook.ArgQuoted:
			c.WriteString(" " + runbook.ShellWord(a.Text))
		default:
			c.WriteString(" " + a.Text)
		}
	}
	switch b.Action {
	case "apply":
		w.manifest()
		w.text("n=0\nuntil CAIRN_OUT=$(printf '%s\\n' \"$CAIRN_M\" | " + c.String() + " 2>&1); do\n" + applyRetry)
		return
	case "patch":
		w.manifest()
		w.text("printf '%s\\n' \"$CAIRN_M\" | " + c.String() + " --patch-file /dev/stdin\n")
		return
	case "wait":
		// kubectl wait fails at once on an object that does not exist yet;
		// the runner waits for it to appear within the block's timeout.
		secs := int(b.Timeout.Seconds())
		w.text("end=$((SECONDS + " + fmt.Sprint(secs) + "))\nuntil CAIRN_OUT=$(" + c.String() + " --timeout=$((end - SECONDS > 0 ? end - SECONDS : 1))s </dev/null 2>&1); do\n" + waitRetry)
		return
	}
	w.text(c.String() + " </dev/null\n")
}

// manifestOnly reports whether name appears only in b's body.
func manifestOnly(b *runbook.Block, name string) bool {
	for _, s := range []string{b.Kind, b.Name, b.Namespace, b.Selector, b.FieldSelector, b.Replicas, b.For} {
		for _, r := range runbook.FindRefs(s, false) {
			if r.Name == name {
				return false
			}
		}
	}
	return true
}

// markerAt is a placeholder Manifest.Template writes, as JSON escapes it:
// "\u0001NAME\u0002" with its quotes (a whole plain scalar, whole) or
// \u0001NAME\u0002 or \u0001NAME\u0003 (inside a string).
type markerAt struct {
	start, end int
	name       string
	whole      bool
}

// markers finds them left to right, as the expression
// "\\u0001([A-Z][A-Z0-9_]*)\\u0002"|\\u0001([A-Z][A-Z0-9_]*)\\u000[23]
// would (a match that begins at the quote first), without a regexp: this
// runs for every kube block of every page a build renders.
func markers(js string) []markerAt {
	const open = `\u0001`
	var out []markerAt
	for at := 0; ; {
		i := strings.Index(js[at:], open)
		if i < 0 {
			return out
		}
		i += at
		j := i + len(open)
		n := j
		if n < len(js) && js[n] >= 'A' && js[n] <= 'Z' {
			n++
			for n < len(js) && (js[n] >= 'A' && js[n] <= 'Z' || js[n] >= '0' && js[n] <= '9' || js[n] == '_') {
				n++
			}
		}
		if n == j {
			at = j
			continue
		}
		rest := js[n:]
		switch {
		case i > 0 && js[i-1] == '"' && strings.HasPrefix(rest, `\u0002"`):
			out = append(out, markerAt{start: i - 1, end: n + len(`\u0002"`), name: js[j:n], whole: true})
		case strings.HasPrefix(rest, `\u0002`) || strings.HasPrefix(rest, `\u0003`):
			out = append(out, markerAt{start: i, end: n + len(`\u0002`), name: js[j:n]})
		default:
			at = j
			continue
		}
		at = out[len(out)-1].end
	}
}

// manifest reads the kube body into CAIRN_M: JSON in a quoted
// here-document, each value a slot JSON-escaped in its string (the kube
// runner's and the exported script's rule: a value stays one scalar), one
// line per document.
func (w *builder) manifest() {
	b := w.b
	raw := func() {
		body := strings.TrimRight(b.Content, "\n")
		d := delim(body)
		w.text("IFS= read -r -d '' CAIRN_M <<'" + d + "' || true\n" + body + "\n" + d + "\n")
	}
	if b.Manifest == nil {
		raw()
		return
	}
	tmpl, err := b.Manifest.Template(func(_ int, r runbook.ManifestRef) string {
		if r.Plain {
			return "\x01" + r.Name + "\x02"
		}
		return "\x01" + r.Name + "\x03"
	})
	if err != nil {
		raw()
		return
	}
	js := strings.TrimRight(string(tmpl), "\n")
	ms := markers(js)
	var bare strings.Builder // js without the placeholders, for the delimiter
	at := 0
	for _, m := range ms {
		bare.WriteString(js[at:m.start])
		at = m.end
	}
	bare.WriteString(js[at:])
	d := delim(bare.String())
	w.text("IFS= read -r -d '' CAIRN_M <<'" + d + "' || true\n")
	at = 0
	for _, m := range ms {
		w.text(js[at:m.start])
		switch {
		case m.whole && w.names[m.name]:
			w.slot(m.name, KindJSON)
		case m.whole:
			w.text(js[m.start:m.end])
		case w.names[m.name]:
			w.slot(m.name, KindJSONStr)
		default:
			w.text("${" + m.name + "}")
		}
		at = m.end
	}
	w.text(js[at:] + "\n" + d + "\n")
}

// applyRetry and waitRetry end the loops that wait as the kube runner does.
const (
	applyRetry = `  case $CAIRN_OUT in *'ensure CRDs are installed first'* | *'no matches for kind'* | *'the server could not find the requested resource'*) if ((++n < 30)); then sleep 1; continue; fi ;; esac
  printf '%s\n' "$CAIRN_OUT" >&2; exit 1
done
printf '%s\n' "$CAIRN_OUT"
`
	waitRetry = `  if ((SECONDS < end)) && [[ $CAIRN_OUT == *NotFound* || $CAIRN_OUT == *'no matching resources'* ]]; then sleep 1; continue; fi
  printf '%s\n' "$CAIRN_OUT" >&2; exit 1
done
printf '%s\n' "$CAIRN_OUT"
`
)
