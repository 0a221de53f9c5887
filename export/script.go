// Package export turns a runbook into a standalone bash script for sites
// without Cairn, network or browser, and packs runbooks, their scripts and
// the static site into an offline bundle.
//
// Data flows Markdown → runbook model → script: the package reads only the
// model (package runbook) and mirrors the executor's semantics in bash —
// parameters validated before anything runs, blocks run in document order,
// retried until their expectations hold, captures handed to later blocks,
// secrets masked — so that an exported script behaves like `cairn run`.
//
// Every value that reaches the script is quoted: literals single-quoted,
// bodies (shell scripts, manifests, patches, manual instructions) in quoted
// heredocs whose delimiter does not occur in them, and parameter values only
// ever travel at run time, through variables and the environment.
package export

import (
	"bytes"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/nodepod"
	"github.com/cairn-dev/cairn/runbook/shellsession"
)

// Options configure Script.
type Options struct {
	// Version is the Cairn version named in the header.
	Version string
	// Source is the runbook's path as shown in the header and in messages;
	// default rb.Path.
	Source string
	// Name is the script's file name, used for its default log file
	// (NAME.log next to the script); default SLUG.sh.
	Name string
}

//go:embed runtime.bash
var runtimeSrc string

// singleQuoted is s for the inside of a single-quoted bash word.
func singleQuoted(s string) string { return strings.ReplaceAll(s, "'", `'\''`) }

// runtime is runtime.bash with what runbook/nodepod says of node pods
// filled in, so that the script makes the executor's node pod.
var runtime = strings.NewReplacer(
	"@NAMECHARS@", nodepod.NameChars,
	"@NODESLOT@", nodepod.NodeSlot,
	"@IMAGESLOT@", nodepod.ImageSlot,
	"@NSENTER@", strings.Join(nodepod.Nsenter, " "),
	"@GRACE@", strconv.Itoa(nodepod.Grace),
	"@SHELL@", singleQuoted(nodepod.Shell),
	"@PUT@", singleQuoted(nodepod.Put),
	"@STAT@", singleQuoted(nodepod.Stat),
	"@CAT@", singleQuoted(nodepod.Cat),
	"@SESSIONWRAP@", singleQuoted(shellsession.Wrapper),
).Replace(runtimeSrc)

// ScriptName is the default file name of rb's exported script.
func ScriptName(rb *runbook.Runbook) string { return rb.Slug + ".sh" }

// Script returns rb as one standalone bash script.
func Script(rb *runbook.Runbook, opts Options) ([]byte, error) {
	if opts.Source == "" {
		opts.Source = rb.Path
	}
	if opts.Name == "" {
		opts.Name = ScriptName(rb)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	g := &gen{rb: rb, opts: opts, names: rb.Names()}
	if err := g.script(); err != nil {
		return nil, fmt.Errorf("export %s: %w", rb.Path, err)
	}
	return g.w.Bytes(), nil
}

type gen struct {
	rb    *runbook.Runbook
	opts  Options
	names map[string]bool
	w     bytes.Buffer
	pcre  bool
	errs  []string
}

func (g *gen) p(format string, args ...any) { fmt.Fprintf(&g.w, format, args...) }

func (g *gen) fail(b *runbook.Block, format string, args ...any) {
	g.errs = append(g.errs, fmt.Sprintf("%s:%d: block %q: %s", g.rb.Path, b.Pos.Line, b.ID, fmt.Sprintf(format, args...)))
}

// q quotes s as one literal bash word.
func q(s string) string { return runbook.ShellQuote(s) }

// oneLine makes s fit a comment or a one-line message.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		return r
	}, s))
}

// heredoc returns a delimiter for a quoted heredoc holding body: a line
// equal to it never occurs in body.
func heredoc(kind, body string) string {
	lines := map[string]bool{}
	for _, l := range strings.Split(body, "\n") {
		lines[strings.TrimSpace(l)] = true // an indented twin confuses readers (and shellcheck)
	}
	base := "CAIRN_EOF_" + kind
	d := base
	for n := 1; lines[d]; n++ {
		d = base + "_" + strconv.Itoa(n)
	}
	return d
}

// bodyVar writes `IFS= read -r -d ” VAR <<'DELIM' … DELIM` so that VAR
// holds body exactly.
func (g *gen) bodyVar(indent, name, kind, body string) {
	if body == "" {
		g.p("%s%s=''\n", indent, name)
		return
	}
	d := heredoc(kind, body)
	g.p("%sIFS= read -r -d '' %s <<'%s' || true\n", indent, name, d)
	g.w.WriteString(body)
	if !strings.HasSuffix(body, "\n") {
		g.w.WriteString("\n")
		g.p("%s\n", d)
		g.p("%s%s=${%s%%$'\\n'}\n", indent, name, name)
		return
	}
	g.p("%s\n", d)
}

func seconds(d time.Duration) string {
	s := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	if d > 0 && d < time.Second {
		return s
	}
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func (g *gen) script() error {
	rb := g.rb
	title := oneLine(rb.Meta.Title)
	g.p("#!/usr/bin/env bash\n")
	g.p("#\n# %s\n#\n", title)
	g.p("# Runbook: %s\n", oneLine(rb.Slug))
	g.p("# Source:  %s (sha256 %s)\n", oneLine(g.opts.Source), rb.Hash)
	g.p("# Cairn:   %s\n", oneLine(g.opts.Version))
	g.p("#\n# Exported by `cairn export`: a standalone script that runs the runbook's steps\n")
	g.p("# in order and checks each block's expectations, as `cairn run` does. Do not edit\n")
	g.p("# it; export the runbook again instead. Usage: %s --help\n\n", oneLine(g.opts.Name))
	// Literals are single-quoted on purpose: a $ in them must stay a $.
	g.p("# shellcheck disable=SC1003,SC2016,SC2088 # single quotes keep every literal literal ($, ~, \\ and all)\n\n")
	g.p("if [ -z \"${BASH_VERSINFO:-}\" ] || [ \"${BASH_VERSINFO[0]}\" -lt 4 ] || { [ \"${BASH_VERSINFO[0]}\" -eq 4 ] && [ \"${BASH_VERSINFO[1]}\" -lt 3 ]; }; then\n")
	g.p("\techo \"this script needs bash 4.3 or later\" >&2\n\texit 2\nfi\n")
	g.p("set -u -o pipefail\n\n")

	g.p("cairn_prog=$0\n")
	g.p("cairn_runbook=%s\n", q(rb.Slug))
	g.p("cairn_source=%s\n", q(oneLine(g.opts.Source)))
	g.p("cairn_source_hash=%s\n", q(rb.Hash))
	g.p("cairn_version=%s\n", q(oneLine(g.opts.Version)))
	logName := strings.TrimSuffix(g.opts.Name, ".sh") + ".log"
	g.p("cairn_default_log=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"/%s\n", q(logName))
	g.p("export cairn_runbook cairn_source cairn_source_hash cairn_version\n\n")

	g.params()
	g.captures()
	g.kubeContexts()
	g.usage()
	g.p("\n%s\n", runtime)

	g.p("# ---------------------------------------------------------------------------\n")
	g.p("# The runbook: one function per executable block, one per step.\n")
	g.p("# ---------------------------------------------------------------------------\n\n")
	for _, b := range rb.Blocks {
		if b.Executable() {
			g.block(b)
		}
	}
	g.steps()
	g.needsTable()
	g.list()
	g.p("cairn_needs_pcre=%d\n\n", boolInt(g.pcre))
	g.p("cairn_main \"$@\"\n")
	if len(g.errs) > 0 {
		return fmt.Errorf("cannot export:\n  %s", strings.Join(g.errs, "\n  "))
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (g *gen) params() {
	rb := g.rb
	var names []string
	for _, p := range rb.Params {
		names = append(names, p.Name)
	}
	g.p("# Parameters: --param NAME=VALUE, else the environment variable NAME, else the default.\n")
	g.p("cairn_param_names=(%s)\n", strings.Join(names, " "))
	row := func(arr string, val func(p *runbook.Param) (string, bool)) {
		g.p("declare -A %s=(", arr)
		first := true
		for _, p := range rb.Params {
			v, ok := val(p)
			if !ok {
				continue
			}
			if !first {
				g.p(" ")
			}
			first = false
			g.p("[%s]=%s", p.Name, q(v))
		}
		g.p(")\n")
	}
	row("cairn_ptype", func(p *runbook.Param) (string, bool) { return string(p.Type), true })
	row("cairn_ptitle", func(p *runbook.Param) (string, bool) { return oneLine(p.Label()), true })
	row("cairn_pdefault", func(p *runbook.Param) (string, bool) { return p.Default, p.HasDefault })
	row("cairn_prequired", func(p *runbook.Param) (string, bool) { return strconv.Itoa(boolInt(p.Required)), true })
	row("cairn_psecret", func(p *runbook.Param) (string, bool) { return strconv.Itoa(boolInt(p.Secret)), true })
	row("cairn_ppattern", func(p *runbook.Param) (string, bool) {
		if p.Pattern == nil {
			return "", false
		}
		g.pcre = true
		return p.Pattern.String(), true
	})
	row("cairn_pvalues", func(p *runbook.Param) (string, bool) {
		return strings.Join(p.Values, "\n"), p.Type == runbook.TypeEnum
	})
	g.p("\n")
}

// captureNames returns every capture name, sorted, with whether any block
// marks it secret.
func (g *gen) captureNames() ([]string, map[string]bool) {
	secret := map[string]bool{}
	seen := map[string]bool{}
	var names []string
	for _, b := range g.rb.Blocks {
		for _, c := range b.Captures {
			if !seen[c.Name] {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
			if c.Secret {
				secret[c.Name] = true
			}
		}
	}
	sort.Strings(names)
	return names, secret
}

func (g *gen) captures() {
	names, secret := g.captureNames()
	g.p("# Values blocks capture for later blocks (secret ones are masked and never saved).\n")
	g.p("cairn_capture_names=(%s)\n", strings.Join(names, " "))
	g.p("declare -A cairn_csecret=(")
	for i, n := range names {
		if i > 0 {
			g.p(" ")
		}
		g.p("[%s]=%d", n, boolInt(secret[n]))
	}
	g.p(")\n\n")
}

func (g *gen) kubeContexts() {
	var qs []string
	for _, c := range g.rb.Meta.KubeContexts {
		qs = append(qs, q(c))
	}
	g.p("# Kube contexts the runbook may touch (globs); empty: any.\n")
	g.p("cairn_kube_contexts=(%s)\n\n", strings.Join(qs, " "))
	// What the runbook requires, checked before the first block (names are
	// validated command and resource names).
	r := g.rb.Meta.Requires
	var local, hosts, res []string
	for _, b := range r.Binaries {
		local = append(local, q(b))
	}
	for _, h := range r.Hosts {
		hosts = append(hosts, q(h.Param+":"+strings.Join(h.Binaries, " ")))
	}
	for _, x := range r.Resources {
		res = append(res, q(x))
	}
	g.p("# requires: binaries on this machine, on the hosts of a parameter, API resources.\n")
	g.p("cairn_req_local=(%s)\ncairn_req_hosts=(%s)\ncairn_req_resources=(%s)\n\n", strings.Join(local, " "), strings.Join(hosts, " "), strings.Join(res, " "))
}

func (g *gen) usage() {
	rb := g.rb
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", oneLine(rb.Meta.Title))
	if rb.Meta.Summary != "" {
		fmt.Fprintf(&b, "%s\n\n", oneLine(rb.Meta.Summary))
	}
	fmt.Fprintf(&b, "Exported from %s (sha256 %s) by Cairn %s.\n\n", oneLine(g.opts.Source), rb.Hash, oneLine(g.opts.Version))
	fmt.Fprintf(&b, "Usage:\n  %s [--param NAME=VALUE ...] [--list | --step ID | --from ID] [--dry-run] [--yes]\n\n", oneLine(g.opts.Name))
	b.WriteString(`Options:
  --param NAME=VALUE   a parameter value (or set the environment variable NAME)
  --capture NAME=VALUE a value an earlier run captured (non-secret ones are kept
                       in LOG.captures and reused by --from)
  --list               print the steps and blocks, run nothing
  --step ID            run only this step
  --from ID            start at this step and run the rest (resume after a failure)
  --dry-run            print what would run, parameters filled in, secrets masked
  --yes, -y            answer yes to confirmations and pass manual steps
  --log FILE           append the run's log here (default: next to this script)
  --results FILE       append each block's verdict and output as JSON lines here,
                       for cairn journal import (default: LOG's name, .results.jsonl)
  --sign KEY           when the script ends, sign the results with this SSH key
                       (ssh-keygen -Y sign) into RESULTS.sig
  --context NAME       kube context (default $CAIRN_KUBE_CONTEXT, else current-context)
  --kubeconfig FILE    kubeconfig for kubectl (default $CAIRN_KUBECONFIG, else kubectl's)
  --ssh-config FILE    ssh -F FILE for ssh and scp (default $CAIRN_SSH_CONFIG)
  --help, -h           this text

Exit status: 0 when every block was verified or skipped, 1 when a block failed
(the message says which and how to resume), 2 for bad arguments or parameters.
`)
	if len(rb.Params) > 0 {
		b.WriteString("\nParameters:\n")
		for _, p := range rb.Params {
			var attrs []string
			attrs = append(attrs, string(p.Type))
			if p.Type == runbook.TypeEnum {
				attrs = append(attrs, "one of "+strings.Join(p.Values, ", "))
			}
			switch {
			case p.Secret:
				attrs = append(attrs, "secret, asked without echo when not given")
			case p.HasDefault:
				attrs = append(attrs, "default "+strconv.Quote(p.Default))
			}
			if p.Required {
				attrs = append(attrs, "required")
			}
			if p.Pattern != nil {
				attrs = append(attrs, "pattern "+p.Pattern.String())
			}
			fmt.Fprintf(&b, "  %s (%s)\n", p.Name, oneLine(strings.Join(attrs, "; ")))
			if l := oneLine(p.Label()); l != p.Name {
				fmt.Fprintf(&b, "      %s\n", l)
			}
			if p.Description != "" {
				fmt.Fprintf(&b, "      %s\n", oneLine(p.Description))
			}
		}
	}
	if r := rb.Meta.Requires; len(r.Images)+len(r.Charts)+len(r.Binaries)+len(r.Hosts)+len(r.Resources) > 0 {
		b.WriteString("\nBring in beforehand (this site has no network):\n")
		for _, x := range r.Images {
			fmt.Fprintf(&b, "  image   %s\n", oneLine(x))
		}
		for _, x := range r.Charts {
			fmt.Fprintf(&b, "  chart   %s\n", oneLine(x))
		}
		for _, x := range r.Binaries {
			fmt.Fprintf(&b, "  binary  %s (on this machine)\n", oneLine(x))
		}
		for _, h := range r.Hosts {
			fmt.Fprintf(&b, "  binary  %s (on the hosts of %s)\n", oneLine(strings.Join(h.Binaries, ", ")), h.Param)
		}
		for _, x := range r.Resources {
			fmt.Fprintf(&b, "  api     %s (served by the cluster)\n", oneLine(x))
		}
	}
	text := b.String()
	d := heredoc("USAGE", text)
	g.p("cairn_usage() {\n\tcat <<'%s'\n%s%s\n}\n", d, text, d)
}

// badge describes where a block runs, as in `cairn run`.
func (g *gen) badge(b *runbook.Block) string {
	switch b.Target {
	case runbook.TargetSSH:
		s := "ssh:" + b.Hosts
		if p := g.rb.ParamByName(b.Hosts); p != nil && p.Group != "" {
			s = "ssh:" + p.Group + " (" + b.Hosts + ")"
		}
		if b.Action == "copy" {
			from := "this machine"
			if b.From != "" {
				from = b.From
			}
			s += " copy from " + from
		}
		if b.Sudo {
			s += " sudo"
		}
		if b.Parallel > 1 {
			s += fmt.Sprintf(" parallel=%d", b.Parallel)
		}
		return s
	case runbook.TargetKube:
		if b.Action == "" {
			return "kube shell"
		}
		s := "kube " + b.Action
		if b.Kind != "" {
			s += " " + b.Kind
		}
		if b.Name != "" {
			s += "/" + b.Name
		}
		return s
	case runbook.TargetPod, runbook.TargetNode:
		s := b.Badge(g.rb)
		if b.Namespace != "" {
			s += " in " + b.Namespace
		}
		if b.Parallel > 1 {
			s += fmt.Sprintf(" parallel=%d", b.Parallel)
		}
		return s
	case runbook.TargetManual:
		return "manual"
	}
	return "local"
}

// refs is every parameter or capture name the block reads, sorted.
func (g *gen) refs(b *runbook.Block) []string { return b.ReadNames(g.names) }

// captureRefs is "NAME:BLOCK" for every capture b reads, BLOCK the first
// block that captures it.
func (g *gen) captureRefs(refs []string) []string {
	var out []string
	for _, r := range refs {
		if g.rb.ParamByName(r) != nil {
			continue
		}
		by := ""
		for _, x := range g.rb.Blocks {
			for _, c := range x.Captures {
				if c.Name == r && by == "" {
					by = x.ID
				}
			}
		}
		out = append(out, q(r+":"+by))
	}
	return out
}

func (g *gen) expects(b *runbook.Block) string {
	var parts []string
	e := b.Expect
	if b.Target == runbook.TargetManual {
		return "done by hand"
	}
	if e.AnyExit {
		parts = append(parts, "any exit status")
	} else {
		parts = append(parts, fmt.Sprintf("exit status %d", e.Exit))
	}
	for _, s := range e.Contains {
		parts = append(parts, fmt.Sprintf("output contains %q", s))
	}
	for _, s := range e.NotContains {
		parts = append(parts, fmt.Sprintf("output does not contain %q", s))
	}
	for _, re := range e.Match {
		parts = append(parts, "output matches /"+shownRegexp(re)+"/")
	}
	for _, s := range e.Similar {
		parts = append(parts, fmt.Sprintf("output similar to the expected output at line %d", s.BodyPos.Line))
	}
	if e.Count >= 0 {
		parts = append(parts, fmt.Sprintf("%d objects", e.Count))
	}
	for _, jc := range e.JSONPath {
		parts = append(parts, jc.Path+jc.Op+jc.Value+" on every object")
	}
	if b.Retries > 0 {
		parts = append(parts, fmt.Sprintf("up to %d attempts, %s apart", b.Retries+1, b.Interval))
	}
	return oneLine(strings.Join(parts, "; "))
}

func fn(kind string, b *runbook.Block) string { return fmt.Sprintf("cairn_%s_%d", kind, b.Index) }

func (g *gen) block(b *runbook.Block) {
	refs := g.refs(b)
	g.p("# Block %s (%s), %s:%d\n", oneLine(b.ID), oneLine(g.badge(b)), oneLine(g.opts.Source), b.Pos.Line)
	if b.Title != "" {
		g.p("# %s\n", oneLine(b.Title))
	}
	if len(b.Redact) > 0 {
		// Refused rather than ignored: output the page would redact must not
		// reach a terminal or log unredacted.
		g.fail(b, "redact= patterns cannot be exported yet (secret= captures and secret parameters can)")
	}
	if b.When != nil {
		g.p("%s() { %s; }\n", fn("when", b), b.When.Shell())
	}
	g.p("%s() {\n", fn("block", b))
	if !b.Always {
		g.p("\tif ((cairn_failed)); then\n\t\treturn 0\n\tfi\n")
	}
	g.p("\tcairn_begin %s %s %s %s\n", q(b.ID), q(string(b.Target)), q(g.badge(b)), q(b.Hash))
	if b.When != nil {
		g.p("\tif ! %s; then\n\t\tcairn_skip %s %s\n\t\treturn 0\n\tfi\n", fn("when", b), q(b.ID), q(oneLine(b.When.Src)))
	}
	g.p("\tcairn_line=%d\n", b.Pos.Line)
	g.p("\tcairn_refs=%s\n", q(strings.Join(refs, " ")))
	g.p("\tcairn_expects=%s\n", q(g.expects(b)))
	g.p("\tcairn_timeout=%s\n", q(b.Timeout.String()))
	g.p("\tcairn_interval=%s\n", q(b.Interval.String()))
	live := 1
	for _, c := range b.Captures {
		if c.Secret {
			live = 0
		}
	}
	g.p("\tcairn_live=%d\n", live)
	kind := strings.ToUpper(strings.ReplaceAll(b.ID, "-", "_"))
	g.bodyVar("\t", "cairn_body", kind, b.Content)
	if b.Manifest != nil {
		// Kube bodies go out as JSON with each reference marked inside the
		// string that holds it; cairn_json_fill puts values there JSON-escaped,
		// so a value stays one scalar (runbook.Manifest, the daemon's rule).
		tmpl, err := b.Manifest.Template(func(_ int, r runbook.ManifestRef) string {
			if r.Plain {
				return "\x01" + r.Name + "\x02"
			}
			return "\x01" + r.Name + "\x03"
		})
		if err != nil {
			g.fail(b, "manifest: %v", err)
		}
		g.bodyVar("\t", "cairn_json", kind+"_JSON", string(tmpl))
	}
	if b.Target == runbook.TargetManual {
		g.p("\tcairn_manual %s \"$(cairn_sub 0 \"$cairn_refs\" \"$cairn_body\" display)\"\n}\n\n", q(b.ID))
		return
	}
	if crefs := g.captureRefs(refs); len(crefs) > 0 {
		g.p("\tcairn_need %s %s\n", q(b.ID), strings.Join(crefs, " "))
	}
	if b.Confirm {
		msg := b.ConfirmMsg
		if msg == "" || msg == "true" {
			msg = "this step changes the target"
		}
		g.p("\tcairn_confirm %s %s || return 0\n", q(b.ID), q(oneLine(msg)))
	}
	if b.Target.UsesKube() {
		g.p("\tcairn_kube_init\n")
	}
	secs := seconds(b.Timeout)
	g.p("\tif ((cairn_dry)); then\n")
	switch {
	case b.Target == runbook.TargetLocal:
		g.p("\t\tcairn_dry_show 'here (bash -euo pipefail)' \"$(cairn_shell_view \"$cairn_refs\" \"$cairn_body\")\"\n")
	case b.Target == runbook.TargetKube && b.Action == "":
		g.p("\t\tcairn_dry_show \"here with kube context ${cairn_kube_ctx:-(current)} pinned (bash -euo pipefail)\" \"$(cairn_shell_view \"$cairn_refs\" \"$cairn_body\")\"\n")
	case b.Target == runbook.TargetSSH && b.Action == "copy":
		from := "this machine"
		if b.From != "" {
			from = "${cairn_val[" + b.From + "]:-}"
		}
		g.p("\t\tcairn_dry_show \"as copies from %s to each of ${cairn_val[%s]:-}\" \"$(cairn_sub 0 \"$cairn_refs\" \"$cairn_body\" display)\"\n", from, b.Hosts)
	case b.Target == runbook.TargetSSH:
		sudo := ""
		if b.Sudo {
			sudo = " under sudo -n"
		}
		g.p("\t\tcairn_dry_show \"on each of ${cairn_val[%s]:-} over ssh%s (bash -euo pipefail)\" \"$(cairn_shell_view \"$cairn_refs\" \"$cairn_body\")\"\n", b.Hosts, sudo)
	case b.Target == runbook.TargetPod:
		g.p("\t\tcairn_dry_show %s \"$(cairn_shell_view \"$cairn_refs\" \"$cairn_body\")\"\n", attr("in each pod ("+oneLine(b.Badge(g.rb))+") with kubectl exec (bash -euo pipefail)"))
	case b.Target == runbook.TargetNode && b.Action == "copy":
		from := "this machine"
		if b.From != "" {
			from = "node " + b.From
		}
		g.p("\t\tcairn_dry_show %s \"$(cairn_sub 0 \"$cairn_refs\" \"$cairn_body\" display)\"\n", attr("as copies from "+from+" to each node ("+oneLine(b.Badge(g.rb))+") as root, through a privileged pod pinned to it"))
	case b.Target == runbook.TargetNode:
		g.p("\t\tcairn_dry_show %s \"$(cairn_shell_view \"$cairn_refs\" \"$cairn_body\")\"\n", attr("on each node ("+oneLine(b.Badge(g.rb))+") as root, through a privileged pod pinned to it (bash -euo pipefail)"))
	default:
		g.p("\t\tcairn_disp=display\n\t\t%s\n\t\tcairn_disp=''\n", fn("kube", b))
	}
	g.p("\t\tcairn_say \"  expects: $cairn_expects\"\n")
	g.p("\t\treturn 0\n\tfi\n")
	if b.Target == runbook.TargetSSH && b.Action == "copy" {
		if b.From != "" {
			g.p("\tcairn_from=${cairn_val[%s]:-}\n", b.From)
		} else {
			g.p("\tcairn_from=''\n")
		}
	}
	attempts := 1 + b.Retries
	g.p("\tcairn_session=%s\n", q(b.Session))
	g.p("\tcairn_exec %d %s %s %s %s\n}\n", attempts, seconds(b.Interval), fn("run", b), fn("verify", b), fn("capture", b))

	// How one attempt runs.
	g.p("%s() {\n", fn("run", b))
	want := strconv.Itoa(b.Expect.Exit)
	if b.Expect.AnyExit {
		want = "any"
	}
	switch {
	case b.Target == runbook.TargetLocal:
		g.p("\tcairn_timeout_kills=1\n\tcairn_single '' cairn_local %s\n", secs)
	case b.Target == runbook.TargetKube && b.Action == "":
		g.p("\tcairn_timeout_kills=1\n\tcairn_single \"$cairn_kube_ctx\" cairn_local %s \"$cairn_kube_pinned\"\n", secs)
	case b.Target == runbook.TargetSSH && b.Action == "copy":
		g.p("\tcairn_group %s %d %s cairn_copy %d %s\n", b.Hosts, max(b.Parallel, 1), want, boolInt(b.Sudo), secs)
	case b.Target == runbook.TargetSSH:
		g.p("\tcairn_group %s %d %s cairn_ssh_script %d %s%s\n", b.Hosts, max(b.Parallel, 1), want, boolInt(b.Sudo), secs, prefixSpace(g.captureNamesOf(refs)))
	case b.Target == runbook.TargetPod:
		how, what := "selector", b.Selector
		switch {
		case b.Name != "":
			how, what = "name", b.Name
		case b.Workload != "":
			how, what = "workload", b.Workload
		}
		g.p("\tcairn_pods %s %s %s || return 0\n", attr(b.Namespace), how, attr(what))
		g.p("\tcairn_fan %d %s cairn_pod_script %s %s %s%s\n", max(b.Parallel, 1), want, attr(b.Namespace), attr(b.Container), secs, prefixSpace(g.captureNamesOf(refs)))
	case b.Target == runbook.TargetNode:
		how, what := "selector", b.Selector
		if b.Nodes != "" {
			how, what = "names", b.Nodes
		}
		image := "\"${CAIRN_NODE_IMAGE:-" + nodepod.DefaultImage + "}\""
		if b.Image != "" {
			image = attr(b.Image)
		}
		g.p("\tcairn_nodes %s %s || return 0\n", how, attr(what))
		g.p("\tcairn_node_pod=%s\n", q(nodepod.Template(b.ID, b.Timeout)))
		if b.Action == "copy" {
			g.p("\tcairn_node_stage %s %s %s %s || { cairn_hosts=(); return 0; }\n", attr(b.From), attr(b.Namespace), image, secs)
			g.p("\tcairn_fan %d %s cairn_node_copy %s %s %s\n", max(b.Parallel, 1), want, attr(b.Namespace), image, secs)
			break
		}
		g.p("\tcairn_fan %d %s cairn_node_script %s %s %s%s\n", max(b.Parallel, 1), want, attr(b.Namespace), image, secs, prefixSpace(g.captureNamesOf(refs)))
	default:
		g.p("\tcairn_timeout_kills=0\n\tcairn_single \"$cairn_kube_ctx\" %s\n", fn("kube", b))
	}
	g.p("}\n")
	if b.Target == runbook.TargetKube && b.Action != "" {
		g.kube(b, secs)
	}
	g.verify(b)
	g.capture(b)
	g.p("\n")
}

// captureNamesOf are the names of refs that are captures, not parameters: the
// remote preamble exports them beside the parameters.
func (g *gen) captureNamesOf(refs []string) []string {
	var caps []string
	for _, r := range refs {
		if g.rb.ParamByName(r) == nil {
			caps = append(caps, r)
		}
	}
	return caps
}

func prefixSpace(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return " " + strings.Join(ss, " ")
}

// attr returns bash that yields an attribute value with parameter
// references substituted at run time.
func attr(s string) string {
	if !strings.Contains(s, "$") {
		return q(s)
	}
	return "\"$(cairn_sub 0 \"$cairn_refs\" " + q(s) + " \"$cairn_disp\")\""
}

// kube writes the function that does a native kube action with kubectl,
// and the selection its JSONPath checks read.
func (g *gen) kube(b *runbook.Block, secs string) {
	g.p("%s() {\n", fn("kube", b))
	rt := "--request-timeout=" + secs + "s"
	switch b.Action {
	case "apply":
		g.p("\tlocal m\n\tm=$(cairn_json_fill \"$cairn_refs\" \"$cairn_json\" \"$cairn_disp\")\n")
		g.p("\tif [[ -n $cairn_disp ]]; then\n")
		g.p("\t\tcairn_dry_show \"kubectl --context ${cairn_kube_ctx:-(current)} apply --server-side --field-manager=cairn --force-conflicts -f - with\" \"$m\"\n\t\treturn 0\n\tfi\n")
		g.p("\tcairn_kube_apply \"$m\"\n")
	case "get", "delete", "patch", "scale", "wait":
		if b.Action == "delete" && b.Name == "" && b.Selector == "" && b.FieldSelector == "" {
			g.fail(b, "delete needs name=, selector= or field-selector=")
		}
		// The arguments the copied command has too (runbook.KubectlArgs).
		g.p("\tlocal -a a=(%s)\n", kubectlWords(runbook.KubectlArgs(b)))
		if b.Action == "patch" {
			g.p("\ta+=(-p \"$(cairn_json_fill \"$cairn_refs\" \"$cairn_json\" \"$cairn_disp\")\")\n")
		}
		if b.Action == "wait" {
			g.p("\tif [[ -n $cairn_disp ]]; then\n\t\tcairn_say \"  would run: kubectl --context ${cairn_kube_ctx:-(current)}$(printf ' %%q' \"${a[@]}\") --timeout=%ss (waiting for the objects to exist first)\"\n\t\treturn 0\n\tfi\n", secs)
			g.p("\tcairn_kube_wait %s \"${a[@]}\"\n", secs)
			break
		}
		g.p("\tif [[ -n $cairn_disp ]]; then\n\t\tcairn_say \"  would run: kubectl --context ${cairn_kube_ctx:-(current)}$(printf ' %%q' \"${a[@]}\")\"\n\t\treturn 0\n\tfi\n")
		switch b.Action {
		case "get":
			g.p("\tlocal out rc\n\tout=$(cairn_kctl %s \"${a[@]}\" 2>&1)\n\trc=$?\n\tprintf '%%s\\n' \"$out\"\n\treturn \"$rc\"\n", rt)
		case "patch":
			if b.PatchType == "" || b.PatchType == "strategic" {
				// A custom resource takes no strategic merge patch: the
				// executor sends a JSON merge patch then, and so does this.
				g.p("\tlocal out rc i\n\tout=$(cairn_kctl %s \"${a[@]}\" 2>&1)\n\trc=$?\n", rt)
				g.p("\tif ((rc != 0)) && [[ $out == *'strategic merge patch is not supported'* ]]; then\n")
				g.p("\t\tprintf '%%s does not support strategic merge patch (a custom resource); sending it as a JSON merge patch\\n' %s\n", attr(b.Kind))
				g.p("\t\tfor i in \"${!a[@]}\"; do [[ ${a[i]} == --type ]] && a[i+1]=merge; done\n")
				g.p("\t\tout=$(cairn_kctl %s \"${a[@]}\" 2>&1)\n\t\trc=$?\n\tfi\n", rt)
				g.p("\tprintf '%%s\\n' \"$out\"\n\treturn \"$rc\"\n")
			} else {
				g.p("\tcairn_kctl %s \"${a[@]}\"\n", rt)
			}
		default:
			g.p("\tcairn_kctl %s \"${a[@]}\"\n", rt)
		}
	default:
		g.fail(b, "unknown kube action %q", b.Action)
	}
	g.p("}\n")

	// The objects the block's JSONPath checks, count and captures read.
	if len(b.Expect.JSONPath) == 0 && b.Expect.Count < 0 && !hasJSONPathCapture(b) && b.Expect.Lease == nil {
		return
	}
	g.p("%s() {\n", fn("select", b))
	g.p("\tcairn_sel=()\n\tcairn_sel_in=''\n")
	switch b.Action {
	case "apply":
		g.p("\tcairn_sel=(-f -)\n\tcairn_sel_in=$(cairn_sub 1 \"$cairn_refs\" \"$cairn_body\")\n")
	case "delete":
		g.fail(b, "JSONPath checks, counts and captures on deleted objects cannot be exported")
	default:
		g.p("\tcairn_sel=(%s)\n", kubectlWords(runbook.KubectlSelection(b)))
	}
	g.p("}\n")
}

// kubectlWords writes kubectl arguments as words of a bash array.
func kubectlWords(args []runbook.KubectlArg) string {
	w := make([]string, len(args))
	for i, a := range args {
		switch a.Kind {
		case runbook.ArgAttr:
			w[i] = attr(a.Text)
		case runbook.ArgQuoted:
			w[i] = q(a.Text)
		default:
			w[i] = a.Text
		}
	}
	return strings.Join(w, " ")
}

func hasJSONPathCapture(b *runbook.Block) bool {
	for _, c := range b.Captures {
		if c.JSONPath != "" {
			return true
		}
	}
	return false
}

// columnPath turns a {…} JSONPath into the expression custom-columns take
// (kubectl prints one row per object for a single object and for a list
// alike, which -o jsonpath does not).
func columnPath(p string) (string, bool) {
	p = strings.TrimSpace(p)
	if !strings.HasPrefix(p, "{") || !strings.HasSuffix(p, "}") {
		return "", false
	}
	in := p[1 : len(p)-1]
	if strings.ContainsAny(in, "{}") || strings.Contains(in, "range") || !strings.HasPrefix(in, ".") || strings.Contains(in, ",") {
		return "", false
	}
	return in, true
}

func (g *gen) verify(b *runbook.Block) {
	e := b.Expect
	g.p("%s() {\n", fn("verify", b))
	native := b.Target == runbook.TargetKube && b.Action != ""
	if native {
		g.p("\tcairn_expect_kube_ok \"$1\" || return 0\n")
	} else if !e.AnyExit {
		g.p("\tcairn_expect_exit \"$1\" %d\n", e.Exit)
	}
	for _, s := range e.Contains {
		g.p("\tcairn_expect_contains \"$1\" %s\n", q(s))
	}
	for _, s := range e.NotContains {
		g.p("\tcairn_expect_not_contains \"$1\" %s\n", q(s))
	}
	for _, re := range e.Match {
		g.pcre = true
		g.p("\tcairn_expect_match \"$1\" %s %s\n", q(pcreMatch(re)), q(oneLine(shownRegexp(re))))
	}
	for _, s := range e.Similar {
		pats, texts := similarPatterns(s.Content)
		g.p("\tcairn_expect_similar \"$1\" %d %s %s\n", s.BodyPos.Line, q(strings.Join(pats, "\n")), q(strings.Join(texts, "\n")))
	}
	if (e.Count >= 0 || len(e.JSONPath) > 0) && !native {
		g.fail(b, "expect.count and expect.jsonpath need a native kube action")
	}
	if native && (e.Count >= 0 || len(e.JSONPath) > 0) {
		g.p("\t%s\n", fn("select", b))
		if e.Count >= 0 {
			g.p("\tcairn_expect_count \"$1\" %d\n", e.Count)
		}
		for _, jc := range e.JSONPath {
			col, ok := columnPath(jc.Path)
			if !ok {
				g.fail(b, "expect.jsonpath %s: only a single {.path} expression can be exported", jc.Path)
				continue
			}
			g.p("\tcairn_expect_jsonpath \"$1\" %s %s %s %s\n", q(col), q(jc.Path), q(jc.Op), q(jc.Value))
		}
	}
	if e.Lease != nil {
		if !native {
			g.fail(b, "expect.lease needs action=get kind=Lease name=...")
		} else {
			g.pcre = true
			g.p("\t%s\n", fn("select", b))
			g.p("\tcairn_expect_lease \"$1\" %s %s\n", q(pcreMatch(e.Lease)), q(oneLine(shownRegexp(e.Lease))))
		}
	}
	g.p("\treturn 0\n}\n")
}

func (g *gen) capture(b *runbook.Block) {
	g.p("%s() {\n", fn("capture", b))
	var learn []string
	for _, c := range b.Captures {
		switch {
		case c.Regexp != nil:
			g.pcre = true
			re, err := pcreCapture(c.Regexp)
			if err != nil {
				g.fail(b, "%v", err)
				continue
			}
			if c.Secret {
				learn = append(learn, q(re))
			}
			g.p("\tcairn_capture_regex %s %d %s %s\n", c.Name, boolInt(c.Secret), q(re), q(oneLine(shownRegexp(c.Regexp))))
		case c.JSONPath != "":
			if b.Target != runbook.TargetKube || b.Action == "" {
				g.fail(b, "capture.%s: jsonpath captures of shell output cannot be exported (capture with a regex, or use a kube action)", c.Name)
				continue
			}
			col, ok := columnPath(c.JSONPath)
			if !ok {
				g.fail(b, "capture.%s: only a single {.path} expression can be exported", c.Name)
				continue
			}
			g.p("\t%s\n", fn("select", b))
			g.p("\tcairn_capture_jsonpath %s %d %s %s\n", c.Name, boolInt(c.Secret), q(col), q(c.JSONPath))
		}
	}
	if len(learn) > 0 {
		// Learn the secret values before anything is shown.
		g.p("\tcairn_learn_secrets %s\n", strings.Join(learn, " "))
	}
	g.p("\treturn 0\n}\n")
}

func (g *gen) stepBlocks(s *runbook.Step) []*runbook.Block {
	var out []*runbook.Block
	for _, b := range g.rb.Blocks {
		if b.Executable() && b.Step == s {
			out = append(out, b)
		}
	}
	return out
}

func (g *gen) steps() {
	rb := g.rb
	var ids []string
	var counts []string
	intro := g.stepBlocks(nil)
	for _, s := range rb.Steps {
		blocks := g.stepBlocks(s)
		ids = append(ids, q(s.ID))
		counts = append(counts, strconv.Itoa(len(blocks)))
		g.p("# Step %d: %s {#%s}\n", s.Number, oneLine(s.Title), oneLine(s.ID))
		g.p("# %s\n", oneLine(g.summary(blocks)))
		g.p("cairn_step_%d() {\n", s.Number)
		if len(blocks) == 0 {
			g.p("\t:\n}\n\n")
			continue
		}
		g.p("\tcairn_step=%s\n", q(s.ID))
		g.p("\tprintf '\\n== %%d. %%s (%%s)\\n' %d %s %s\n", s.Number, q(oneLine(s.Title)), q(s.ID))
		for _, b := range blocks {
			g.p("\t%s\n", fn("block", b))
		}
		g.p("}\n\n")
	}
	g.p("cairn_step_ids=(%s)\n", strings.Join(ids, " "))
	g.p("cairn_step_blocks=(%s)\n\n", strings.Join(counts, " "))
	g.p("cairn_plan() {\n")
	g.p("\tlocal i\n\tcairn_total=0\n\tcairn_started=0\n")
	if len(intro) > 0 {
		g.p("\tcairn_want '' && cairn_total=$((cairn_total + %d))\n", len(intro))
	}
	g.p("\tfor i in \"${!cairn_step_ids[@]}\"; do\n\t\tcairn_want \"${cairn_step_ids[i]}\" && cairn_total=$((cairn_total + cairn_step_blocks[i]))\n\tdone\n")
	g.p("\tcairn_started=0\n")
	if len(intro) > 0 {
		g.p("\tif cairn_want ''; then\n\t\tcairn_step=''\n")
		for _, b := range intro {
			g.p("\t\t%s\n", fn("block", b))
		}
		g.p("\tfi\n")
	}
	for _, s := range rb.Steps {
		g.p("\tif cairn_want %s; then\n\t\tcairn_step_%d\n\tfi\n", q(s.ID), s.Number)
	}
	g.p("\treturn 0\n}\n\n")
}

// needsTable is what cairn_check_needs reads: for every executable block
// that is not manual, in document order, its id, step, line, condition
// (the function that tests it, and its text), the captures it reads and
// those it sets (executor.Plan.Unmet walks the same).
func (g *gen) needsTable() {
	var ids, steps, lines, whens, srcs, reads, sets []string
	for _, b := range g.rb.Blocks {
		if !b.Executable() || b.Target == runbook.TargetManual {
			continue
		}
		ids = append(ids, q(b.ID))
		st := ""
		if b.Step != nil {
			st = b.Step.ID
		}
		steps = append(steps, q(st))
		lines = append(lines, strconv.Itoa(b.Pos.Line))
		w, src := "", ""
		if b.When != nil {
			w, src = fn("when", b), oneLine(b.When.Src)
		}
		whens, srcs = append(whens, q(w)), append(srcs, q(src))
		reads = append(reads, q(strings.Join(g.captureNamesOf(g.refs(b)), " ")))
		var set []string
		for _, c := range b.Captures {
			set = append(set, c.Name)
		}
		sets = append(sets, q(strings.Join(set, " ")))
	}
	g.p("# Blocks as cairn_check_needs sees them: id, step, line, condition, captures read and set.\n")
	for _, row := range []struct {
		name string
		vals []string
	}{{"ids", ids}, {"steps", steps}, {"lines", lines}, {"when", whens}, {"whensrc", srcs}, {"reads", reads}, {"sets", sets}} {
		g.p("cairn_nb_%s=(%s)\n", row.name, strings.Join(row.vals, " "))
	}
	g.p("\n")
}

// summary is a step's one-line summary: what its blocks do.
func (g *gen) summary(blocks []*runbook.Block) string {
	if len(blocks) == 0 {
		return "No executable blocks."
	}
	var parts []string
	for _, b := range blocks {
		parts = append(parts, b.ID+" ("+g.badge(b)+")")
	}
	n := "blocks"
	if len(blocks) == 1 {
		n = "block"
	}
	return fmt.Sprintf("%d %s: %s", len(blocks), n, strings.Join(parts, ", "))
}

func (g *gen) list() {
	rb := g.rb
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s), %d steps\n", oneLine(rb.Meta.Title), oneLine(rb.Slug), len(rb.Steps))
	for _, b2 := range g.stepBlocks(nil) {
		fmt.Fprintf(&b, "     %-24s %s\n", oneLine(b2.ID), oneLine(g.badge(b2)))
	}
	for _, s := range rb.Steps {
		fmt.Fprintf(&b, "%3d. %-24s %s\n", s.Number, oneLine(s.ID), oneLine(s.Title))
		for _, b2 := range g.stepBlocks(s) {
			extra := ""
			if b2.Confirm {
				extra += "  [confirm]"
			}
			if b2.When != nil {
				extra += "  when " + oneLine(b2.When.Src)
			}
			fmt.Fprintf(&b, "       %-22s %s%s\n", oneLine(b2.ID), oneLine(g.badge(b2)), extra)
		}
	}
	text := b.String()
	d := heredoc("LIST", text)
	g.p("cairn_print_list() {\n\tcat <<'%s'\n%s%s\n}\n\n", d, text, d)
}
