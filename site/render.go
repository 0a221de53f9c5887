package site

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/chroma/v2"
	"github.com/yuin/goldmark"
	gast "github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"

	"github.com/cairn-dev/cairn/runbook"
	rbast "github.com/cairn-dev/cairn/runbook/ast"
	"github.com/cairn-dev/cairn/runbook/paste"
)

// rendererPriority puts Cairn's node renderers ahead of goldmark's HTML
// renderer (priority 1000), so ours win for the kinds both register.
const rendererPriority = 100

// nodeRenderer renders the nodes of package runbook/ast for one runbook page.
type nodeRenderer struct {
	rb      *runbook.Runbook
	t       Strings
	names   map[string]bool
	inStep  bool
	results map[string]BlockResult
	ids     map[string]bool // element ids taken on the page, for heading ids
	// copies are the blocks' paste templates (runbook/paste), written once
	// at the end of the page as JSON for Copy (not as attributes: HTML
	// escaping of every quote made the largest page a third bigger).
	copies map[string]*paste.Template
	codes  *codeCache // nil: highlight every block
}

// BlockResult is a block's last verified run, baked into the page. The
// executor's journal provides it; the site only shows it.
type BlockResult struct {
	Status   string
	At       string // RFC 3339
	Where    string // host list or kube context
	Exit     int
	Duration string
	Output   string // redacted
	Reasons  []string
}

// renderBody renders a parsed runbook's Markdown body to HTML.
func renderBody(rb *runbook.Runbook, t Strings, results map[string]BlockResult, rawHTML bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := renderBodyTo(&buf, rb, t, results, rawHTML, nil); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// renderBodyTo appends renderBody's HTML to buf (a pooled buffer that has
// grown to page size already: growing a fresh one was a twentieth of a
// build).
func renderBodyTo(buf *bytes.Buffer, rb *runbook.Runbook, t Strings, results map[string]BlockResult, rawHTML bool, code *codeCache) error {
	nr := &nodeRenderer{rb: rb, t: t, names: rb.Names(), results: results, codes: code}
	var hopts []ghtml.Option
	if rawHTML {
		hopts = append(hopts, ghtml.WithUnsafe()) // raw_html: render (cairn.yaml)
	}
	r := renderer.NewRenderer(renderer.WithNodeRenderers(
		util.Prioritized(ghtml.NewRenderer(hopts...), 1000),
		util.Prioritized(extension.NewTableHTMLRenderer(), 500),
		util.Prioritized(extension.NewStrikethroughHTMLRenderer(), 500),
		util.Prioritized(extension.NewTaskCheckBoxHTMLRenderer(), 500),
		util.Prioritized(nr, rendererPriority),
	))
	if err := r.Render(buf, rb.Body, rb.Doc); err != nil {
		return fmt.Errorf("%s: render: %w", rb.Path, err)
	}
	return nil
}

// RegisterFuncs implements renderer.NodeRenderer.
func (r *nodeRenderer) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(gast.KindDocument, r.document)
	reg.Register(rbast.KindStep, r.step)
	reg.Register(rbast.KindCodeBlock, r.codeBlock)
	reg.Register(rbast.KindContainer, r.container)
	reg.Register(gast.KindHeading, r.heading)
	reg.Register(gast.KindCodeBlock, r.indentedCode)
}

// indentedCode renders an indented code block like a display-only fenced
// block (frame, copy button, the column's scrolling), not as a bare <pre>.
func (r *nodeRenderer) indentedCode(w util.BufWriter, src []byte, node gast.Node, entering bool) (gast.WalkStatus, error) {
	if !entering {
		return gast.WalkContinue, nil
	}
	fmt.Fprintf(w, `<div class="cb cb-display cb-indented"><div class="cb-head"><button type="button" class="cb-copy">%s</button></div>`, html.EscapeString(r.t["copy"]))
	w.WriteString(`<pre class="chroma"><code>`)
	lines := node.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		w.WriteString(html.EscapeString(string(seg.Value(src))))
	}
	w.WriteString("</code></pre></div>\n")
	return gast.WalkSkipChildren, nil
}

func (r *nodeRenderer) document(w util.BufWriter, _ []byte, _ gast.Node, entering bool) (gast.WalkStatus, error) {
	if !entering && r.inStep {
		w.WriteString("</section>\n")
		r.inStep = false
	}
	if !entering && len(r.copies) > 0 {
		// json.Marshal writes <, > and & as \u003c, \u003e, \u0026:
		// nothing in it can end the script or read as markup.
		js, err := json.Marshal(r.copies)
		if err != nil {
			return gast.WalkStop, err
		}
		w.WriteString(`<script type="application/json" id="cairn-copy">`)
		w.Write(js)
		w.WriteString("</script>\n")
	}
	return gast.WalkContinue, nil
}

// heading gives every heading that is not a step (those are h2 sections
// with the step's id) a stable id, so it can be linked: a slug of its text,
// unique on the page (-2, -3 after the first).
func (r *nodeRenderer) heading(w util.BufWriter, src []byte, node gast.Node, entering bool) (gast.WalkStatus, error) {
	n := node.(*gast.Heading)
	level := min(n.Level+1, 6) // the page title is the only h1; a Markdown # becomes h2.
	if n.Level >= 3 {
		level = n.Level
	}
	if entering {
		fmt.Fprintf(w, `<h%d id="%s">`, level, html.EscapeString(r.headingID(runbook.PlainText(n, src))))
	} else {
		fmt.Fprintf(w, "</h%d>\n", level)
	}
	return gast.WalkContinue, nil
}

func (r *nodeRenderer) step(w util.BufWriter, _ []byte, node gast.Node, entering bool) (gast.WalkStatus, error) {
	n := node.(*rbast.Step)
	st := r.rb.Steps[n.Index]
	if entering {
		if r.inStep {
			w.WriteString("</section>\n")
		}
		r.inStep = true
		id := html.EscapeString(st.ID)
		fmt.Fprintf(w, `<section class="step" id="%s" data-step="%s"`, id, id)
		writeWhen(w, st.When)
		w.WriteString(">\n")
		fmt.Fprintf(w, `<h2 class="step-title"><input type="checkbox" class="step-done" data-step="%s" aria-label="%s"> <span class="step-num">%d</span> <span class="step-text">`,
			id, html.EscapeString(fmt.Sprintf(r.t["step_done_label"], st.Number)), st.Number)
		return gast.WalkContinue, nil
	}
	fmt.Fprintf(w, `</span> <a class="anchor" href="#%s" aria-label="%s">#</a></h2>`+"\n", html.EscapeString(st.ID), html.EscapeString(r.t["link_to_step"]))
	return gast.WalkContinue, nil
}

func writeWhen(w util.BufWriter, c *runbook.Cond) {
	if c == nil {
		return
	}
	j, _ := json.Marshal(c)
	fmt.Fprintf(w, ` data-when="%s" data-when-src="%s"`, html.EscapeString(string(j)), html.EscapeString(c.Src))
}

func (r *nodeRenderer) container(w util.BufWriter, src []byte, node gast.Node, entering bool) (gast.WalkStatus, error) {
	n := node.(*rbast.Container)
	switch n.Name {
	case "tabs":
		if !entering {
			w.WriteString("</div>\n")
			return gast.WalkContinue, nil
		}
		fmt.Fprintf(w, `<div class="tabs" data-group="%d"`, n.Group)
		if n.Param != "" {
			fmt.Fprintf(w, ` data-param="%s"`, html.EscapeString(n.Param))
		}
		w.WriteString(">\n<div class=\"tab-list\" role=\"tablist\">")
		i := 0
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			tab, ok := c.(*rbast.Container)
			if !ok || tab.Name != "tab" {
				continue
			}
			sel, tabindex := "false", "-1"
			if i == 0 {
				sel, tabindex = "true", "0"
			}
			fmt.Fprintf(w, `<button type="button" class="tab" role="tab" id="tab-%d-%d" aria-controls="panel-%d-%d" aria-selected="%s" tabindex="%s" data-value="%s">%s</button>`,
				n.Group, i, n.Group, i, sel, tabindex, html.EscapeString(tab.Value), html.EscapeString(tab.Title))
			i++
		}
		w.WriteString("</div>\n")
		return gast.WalkContinue, nil
	case "tab":
		if !entering {
			w.WriteString("</div>\n")
			return gast.WalkContinue, nil
		}
		i := 0
		if p := n.Parent(); p != nil {
			for c := p.FirstChild(); c != nil && c != gast.Node(n); c = c.NextSibling() {
				if t, ok := c.(*rbast.Container); ok && t.Name == "tab" {
					i++
				}
			}
		}
		hidden := ""
		if i > 0 {
			hidden = " hidden"
		}
		fmt.Fprintf(w, `<div class="tab-panel" role="tabpanel" id="panel-%d-%d" aria-labelledby="tab-%d-%d" data-value="%s"%s>`+"\n",
			n.Group, i, n.Group, i, html.EscapeString(n.Value), hidden)
		return gast.WalkContinue, nil
	default:
		if !entering {
			w.WriteString("</aside>\n")
			return gast.WalkContinue, nil
		}
		title := n.Title
		if title == "" {
			title = r.t[n.Name]
		}
		fmt.Fprintf(w, `<aside class="admonition admonition-%s" role="note"><p class="admonition-title">%s</p>`+"\n",
			html.EscapeString(n.Name), html.EscapeString(title))
		return gast.WalkContinue, nil
	}
}

func (r *nodeRenderer) codeBlock(w util.BufWriter, src []byte, node gast.Node, entering bool) (gast.WalkStatus, error) {
	if !entering {
		return gast.WalkContinue, nil
	}
	b := r.rb.Blocks[node.(*rbast.CodeBlock).Index]
	switch b.Role {
	case runbook.RoleExpected:
		r.expected(w, b)
	case runbook.RoleOutput:
		r.recorded(w, b)
	case runbook.RoleExec:
		r.exec(w, b)
	default:
		w.WriteString(`<div class="cb cb-display"><div class="cb-head">`)
		if b.Title != "" {
			fmt.Fprintf(w, `<span class="cb-title">%s</span>`, html.EscapeString(b.Title))
		}
		fmt.Fprintf(w, `<button type="button" class="cb-copy">%s</button></div>`, html.EscapeString(r.t["copy"]))
		r.code(w, b, false)
		w.WriteString("</div>\n")
	}
	return gast.WalkSkipChildren, nil
}

// podsOrNodes is what a pod or node block's attributes choose, as the
// page shows it (references filled in by the form).
func podsOrNodes(b *runbook.Block) string {
	switch {
	case b.Nodes != "":
		return b.Nodes
	case b.Workload != "":
		return b.Workload
	case b.Name != "":
		return b.Name
	}
	return b.Selector
}

func (r *nodeRenderer) exec(w util.BufWriter, b *runbook.Block) {
	id := html.EscapeString(b.ID)
	fmt.Fprintf(w, `<div class="cb cb-exec" id="block-%s" data-block="%s" data-hash="%s" data-target="%s"`,
		id, id, b.Hash, html.EscapeString(string(b.Target)))
	if b.Step != nil {
		fmt.Fprintf(w, ` data-step="%s"`, html.EscapeString(b.Step.ID))
	}
	writeWhen(w, b.When)
	if b.Target.UsesKube() && b.Namespace != "" {
		fmt.Fprintf(w, ` data-namespace="%s"`, html.EscapeString(b.Namespace))
	}
	if c := paste.Build(r.rb, b); c != nil {
		if r.copies == nil {
			r.copies = map[string]*paste.Template{}
		}
		r.copies[b.ID] = c
		w.WriteString(` data-copy`)
	}
	if b.Confirm {
		msg := b.ConfirmMsg
		if msg == "" {
			msg = "true"
		}
		fmt.Fprintf(w, ` data-confirm="%s"`, html.EscapeString(msg))
	}
	w.WriteString(">\n<div class=\"cb-head\">")
	fmt.Fprintf(w, `<span class="badge badge-%s" title="%s">%s</span>`, html.EscapeString(string(b.Target)),
		html.EscapeString(r.t["target_"+string(b.Target)]), html.EscapeString(b.Badge(r.rb)))
	if b.Target == runbook.TargetSSH && b.Hosts != "" {
		// Where it runs, with the form's value once there is one.
		fmt.Fprintf(w, `<span class="cb-hosts" title="%s">→ %s</span>`, html.EscapeString(r.t["runs_on"]), r.withRefs("$"+b.Hosts))
	}
	if b.Target == runbook.TargetPod || b.Target == runbook.TargetNode {
		label := r.t["runs_in_pods"]
		if b.Target == runbook.TargetNode {
			label = r.t["runs_on_nodes"]
		}
		fmt.Fprintf(w, `<span class="cb-hosts" title="%s">→ %s</span>`, html.EscapeString(label), r.withRefs(podsOrNodes(b)))
	}
	if b.Sudo {
		w.WriteString(`<span class="flag flag-sudo">sudo</span>`)
	}
	if title := b.Title; title != "" || b.Target == runbook.TargetKube && b.Action != "" {
		if title == "" {
			title = kubeSummary(b)
		}
		fmt.Fprintf(w, `<span class="cb-title">%s</span>`, r.withRefs(title))
	}
	if b.Confirm {
		fmt.Fprintf(w, `<span class="flag flag-confirm" title="%s">%s</span>`, html.EscapeString(r.t["confirm_needed"]), html.EscapeString(r.t["flag_confirm"]))
	}
	if b.Timeout != runbook.DefaultTimeout {
		fmt.Fprintf(w, `<span class="flag flag-timeout">%s %s</span>`, html.EscapeString(r.t["flag_timeout"]), html.EscapeString(shortDuration(b.Timeout)))
	}
	if b.Retries > 0 {
		fmt.Fprintf(w, `<span class="flag flag-retries">%s %d × %s</span>`, html.EscapeString(r.t["flag_retries"]), b.Retries, html.EscapeString(shortDuration(b.Interval)))
	}
	fmt.Fprintf(w, `<span class="cb-actions"><button type="button" class="cb-copy">%s</button>`, html.EscapeString(r.t["copy"]))
	if b.Target == runbook.TargetManual {
		fmt.Fprintf(w, `<button type="button" class="cb-run cb-mark" disabled title="%s">%s</button>`, html.EscapeString(r.t["run_disabled"]), html.EscapeString(r.t["mark_done"]))
	} else {
		fmt.Fprintf(w, `<button type="button" class="cb-run" disabled title="%s">%s</button>`, html.EscapeString(r.t["run_disabled"]), html.EscapeString(r.t["run"]))
	}
	w.WriteString("</span></div>\n")
	r.code(w, b, true)
	if exp := describeExpect(b, r.t); len(exp) > 0 {
		fmt.Fprintf(w, `<ul class="cb-expect" aria-label="%s">`, html.EscapeString(r.t["expectations"]))
		for _, e := range exp {
			fmt.Fprintf(w, "<li>%s</li>", e)
		}
		w.WriteString("</ul>\n")
	}
	if len(b.Captures) > 0 {
		fmt.Fprintf(w, `<ul class="cb-capture" aria-label="%s">`, html.EscapeString(r.t["captures"]))
		for _, c := range b.Captures {
			how := "regex"
			pat := ""
			if c.JSONPath != "" {
				how, pat = "jsonpath", c.JSONPath
			} else if c.Regexp != nil {
				pat = strings.TrimPrefix(c.Regexp.String(), "(?m)")
			}
			secret := ""
			if c.Secret {
				secret = ` <span class="secret">` + html.EscapeString(r.t["secret"]) + `</span>`
			}
			fmt.Fprintf(w, `<li><code class="prm-name">$%s</code> ← %s <code>%s</code>%s</li>`, html.EscapeString(c.Name), how, html.EscapeString(pat), secret)
		}
		w.WriteString("</ul>\n")
	}
	if res, ok := r.results[b.ID]; ok {
		r.result(w, b, res)
	} else {
		w.WriteString(`<div class="cb-result" hidden></div>` + "\n")
	}
	w.WriteString("</div>\n")
}

// refInText finds $NAME and ${NAME} in header text.
var refInText = regexp.MustCompile(`\$(?:\{([A-Z][A-Z0-9_]*)\}|([A-Z][A-Z0-9_]*))`)

// withRefs escapes text and wraps references to the runbook's parameters
// and captures in the spans the page fills with the form's values, as in
// code: a header says "-n kube-system", not "-n $NAMESPACE".
func (r *nodeRenderer) withRefs(text string) string {
	known := map[string]bool{}
	for _, p := range r.rb.Params {
		known[p.Name] = true
	}
	for _, b := range r.rb.Blocks {
		for _, c := range b.Captures {
			known[c.Name] = true
		}
	}
	var out strings.Builder
	last := 0
	for _, m := range refInText.FindAllStringSubmatchIndex(text, -1) {
		name := ""
		if m[2] >= 0 {
			name = text[m[2]:m[3]]
		} else {
			name = text[m[4]:m[5]]
		}
		if !known[name] {
			continue
		}
		out.WriteString(html.EscapeString(text[last:m[0]]))
		fmt.Fprintf(&out, `<span class="prm" data-p="%s">%s</span>`, name, html.EscapeString(text[m[0]:m[1]]))
		last = m[1]
	}
	out.WriteString(html.EscapeString(text[last:]))
	return out.String()
}

// result writes a baked last-run result with its provenance.
func (r *nodeRenderer) result(w util.BufWriter, b *runbook.Block, res BlockResult) {
	fmt.Fprintf(w, `<div class="cb-result cb-result-baked" data-status="%s" data-at="%s" data-where="%s" data-exit="%d" data-duration="%s">`,
		html.EscapeString(res.Status), html.EscapeString(res.At), html.EscapeString(res.Where), res.Exit, html.EscapeString(res.Duration))
	fmt.Fprintf(w, `<div class="cb-result-head"><span class="status status-%s">%s</span>`, html.EscapeString(res.Status), html.EscapeString(r.t["status_"+res.Status]))
	for _, v := range []string{res.At, res.Where, fmt.Sprintf("exit %d", res.Exit), res.Duration} {
		if v != "" {
			fmt.Fprintf(w, ` <span class="prov">%s</span>`, html.EscapeString(v))
		}
	}
	w.WriteString("</div>")
	if len(res.Reasons) > 0 {
		w.WriteString(`<ul class="cb-reasons">`)
		for _, reason := range res.Reasons {
			fmt.Fprintf(w, "<li>%s</li>", html.EscapeString(reason))
		}
		w.WriteString("</ul>")
	}
	w.WriteString(`<pre class="output"><code>`)
	writeOutput(w, res.Output, b, r.t)
	w.WriteString("</code></pre></div>\n")
}

// kubeSummary says what a native kube block does, since it often has no body:
// "wait ciliumnodes.cilium.io (all) for jsonpath=…".
func kubeSummary(b *runbook.Block) string {
	parts := []string{b.Action}
	if b.Kind != "" {
		k := b.Kind
		if b.Name != "" {
			k += "/" + b.Name
		}
		parts = append(parts, k)
	}
	if b.Namespace != "" {
		parts = append(parts, "-n "+b.Namespace)
	}
	if b.Selector != "" {
		parts = append(parts, "-l "+b.Selector)
	}
	if b.FieldSelector != "" {
		parts = append(parts, "--field-selector "+b.FieldSelector)
	}
	if b.All {
		parts = append(parts, "--all")
	}
	if b.Replicas != "" {
		parts = append(parts, "--replicas "+b.Replicas)
	}
	if b.JSONPath != "" {
		parts = append(parts, "-o jsonpath="+b.JSONPath)
	}
	if b.For != "" {
		parts = append(parts, "--for "+b.For)
	}
	return strings.Join(parts, " ")
}

// shortDuration prints 30s, 5m, 1h30m rather than Go's 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// describeExpect lists a block's expectations as HTML fragments.
func describeExpect(b *runbook.Block, t Strings) []string {
	var out []string
	e := b.Expect
	code := func(s string) string { return "<code>" + html.EscapeString(s) + "</code>" }
	if e.AnyExit {
		out = append(out, html.EscapeString(t["expect_any_exit"]))
	} else if e.Exit != 0 {
		out = append(out, html.EscapeString(t["expect_exit"])+" "+code(strconv.Itoa(e.Exit)))
	}
	for _, s := range e.Contains {
		out = append(out, html.EscapeString(t["expect_contains"])+" "+code(s))
	}
	for _, s := range e.NotContains {
		out = append(out, html.EscapeString(t["expect_not_contains"])+" "+code(s))
	}
	for _, re := range e.Match {
		out = append(out, html.EscapeString(t["expect_match"])+" "+code(strings.TrimPrefix(re.String(), "(?m)")))
	}
	for _, j := range e.JSONPath {
		out = append(out, html.EscapeString(t["expect_jsonpath"])+" "+code(j.Path+j.Op+j.Value))
	}
	if e.Lease != nil {
		holder := e.Lease.String()
		if holder == "." {
			holder = "any"
		}
		out = append(out, html.EscapeString(t["expect_lease"])+" "+code(holder))
	}
	if e.Count >= 0 {
		out = append(out, html.EscapeString(t["expect_count"])+" "+code(strconv.Itoa(e.Count)))
	}
	if b.For != "" {
		out = append(out, html.EscapeString(t["expect_wait"])+" "+code(b.For))
	}
	if len(e.Similar) > 0 {
		out = append(out, html.EscapeString(t["expect_similar"]))
	}
	return out
}

func (r *nodeRenderer) expected(w util.BufWriter, b *runbook.Block) {
	fmt.Fprintf(w, `<details class="expected" data-for="%s"`, html.EscapeString(b.OutputOf))
	if b.Match != "" {
		fmt.Fprintf(w, ` data-match="%s"`, html.EscapeString(b.Match))
	}
	summary := r.t["expected_output"]
	if b.Match == "similar" {
		summary = r.t["expected_output_checked"]
	}
	fmt.Fprintf(w, ` open><summary>%s</summary><pre class="output"><code>`, html.EscapeString(summary))
	if b.Match == "similar" {
		writePlaceholders(w, b.Content)
	} else {
		w.WriteString(html.EscapeString(b.Content))
	}
	w.WriteString("</code></pre></details>\n")
}

// writePlaceholders marks <placeholder> tokens and ... lines of a similar-match block.
func writePlaceholders(w util.BufWriter, s string) {
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			w.WriteString(html.EscapeString(s))
			return
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 || strings.ContainsAny(s[i:i+j], " \n\t") {
			w.WriteString(html.EscapeString(s[:i+1]))
			s = s[i+1:]
			continue
		}
		w.WriteString(html.EscapeString(s[:i]))
		fmt.Fprintf(w, `<span class="ph">%s</span>`, html.EscapeString(s[i:i+j+1]))
		s = s[i+j+1:]
	}
}

func (r *nodeRenderer) recorded(w util.BufWriter, b *runbook.Block) {
	fmt.Fprintf(w, `<div class="cb-recorded" data-for="%s"`, html.EscapeString(b.OutputOf))
	keys := make([]string, 0, len(b.Recorded))
	for k := range b.Recorded {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, ` data-%s="%s"`, html.EscapeString(k), html.EscapeString(b.Recorded[k]))
	}
	fmt.Fprintf(w, `><div class="cb-recorded-head">%s`, html.EscapeString(r.t["recorded_output"]))
	for _, k := range []string{"status", "at", "host", "context", "exit", "duration"} {
		if v, ok := b.Recorded[k]; ok {
			if k == "status" && r.t["status_"+v] != "" {
				v = r.t["status_"+v] // the page's language; data-status keeps the word
			}
			fmt.Fprintf(w, ` <span class="prov prov-%s">%s</span>`, k, html.EscapeString(v))
		}
	}
	w.WriteString(`</div><pre class="output"><code>`)
	writeOutput(w, b.Content, r.rb.BlockByID(b.OutputOf), r.t)
	w.WriteString("</code></pre></div>\n")
}

// writeOutput writes a block's recorded output, the lines its mute=
// patterns call known and harmless in a muted span that says why.
func writeOutput(w util.BufWriter, out string, of *runbook.Block, t Strings) {
	if of == nil || len(of.Mute) == 0 {
		w.WriteString(html.EscapeString(out))
		return
	}
	why := html.EscapeString(t["muted"] + of.MuteWhy)
	for line := range strings.Lines(out) {
		if of.Muted(strings.TrimSuffix(line, "\n")) {
			fmt.Fprintf(w, `<span class="out-muted" title="%s">%s</span>`, why, html.EscapeString(line))
		} else {
			w.WriteString(html.EscapeString(line))
		}
	}
}

// code writes the highlighted block body, wrapping parameter references.
func (r *nodeRenderer) code(w util.BufWriter, b *runbook.Block, exec bool) {
	lang := b.Lang
	fmt.Fprintf(w, `<pre class="chroma"><code class="language-%s">`, html.EscapeString(lang))
	var refs []runbook.Ref
	// Shell and manual blocks refer to $NAME; manifests only to ${NAME}.
	braced := !(lang == "bash" || lang == "sh" || lang == "shell" || lang == "console" || lang == "zsh" || b.Target == runbook.TargetManual)
	for _, ref := range runbook.FindRefs(b.Content, braced) {
		if r.names[ref.Name] {
			refs = append(refs, ref)
		}
	}
	if r.codes == nil {
		highlight(w, lang, b.Content, refs, b.LineNos)
	} else {
		w.WriteString(r.codes.highlight(lang, b.Content, refs, b.LineNos))
	}
	w.WriteString("</code></pre>\n")
}

// codeCache holds highlighted code by what it is made from. cairn serve's
// builder keeps one: an edit renders its runbook again, and its code
// blocks, unchanged by an edit of the prose, were a tenth of that. The byte
// count bounds what a long session keeps. A streaming build (cairn build)
// has none: there few blocks repeat, and keeping them cost memory and time.
type codeCache struct {
	m sync.Map // codeKey → highlighted HTML
	n atomic.Int64
}

const maxCachedCode = 16 << 20

func (c *codeCache) highlight(lang, src string, refs []runbook.Ref, lineNos bool) string {
	key := codeKey(lang, src, refs, lineNos)
	if out, ok := c.m.Load(key); ok {
		return out.(string)
	}
	var sb strings.Builder
	bw := bufio.NewWriter(&sb)
	highlight(bw, lang, src, refs, lineNos)
	bw.Flush()
	out := sb.String()
	if c.n.Add(int64(len(key)+len(out))) <= maxCachedCode {
		c.m.Store(key, out)
	}
	return out
}

func codeKey(lang, src string, refs []runbook.Ref, lineNos bool) string {
	var sb strings.Builder
	sb.Grow(len(lang) + len(src) + 16*len(refs) + 4)
	// Lengths first, so that no two blocks' parts join into one key.
	fmt.Fprintf(&sb, "%d:%s", len(lang), lang)
	if lineNos {
		sb.WriteString("\x00n")
	}
	for _, r := range refs {
		fmt.Fprintf(&sb, "\x00%d,%d,%s", r.Start, r.End, r.Name)
	}
	sb.WriteString("\x00\x00")
	sb.WriteString(src)
	return sb.String()
}

// highlight writes chroma tokens as <span class="CLASS"> using chroma's short
// CSS class names, so one stylesheet serves light and dark themes.
func highlight(w util.BufWriter, lang, src string, refs []runbook.Ref, lineNos bool) {
	toks, err := tokenize(lang, src)
	if err != nil {
		w.WriteString(html.EscapeString(src))
		return
	}
	pos := 0
	ri := 0
	inRef := false
	line := 1
	if lineNos {
		fmt.Fprintf(w, `<span class="ln">%d</span>`, line)
	}
	emit := func(cls, text string) {
		for text != "" {
			// Split at newlines for line numbers, and at ref boundaries.
			n := len(text)
			if lineNos {
				if i := strings.IndexByte(text, '\n'); i >= 0 && i+1 < n {
					n = i + 1
				}
			}
			if ri < len(refs) {
				if !inRef && refs[ri].Start > pos && refs[ri].Start < pos+n {
					n = refs[ri].Start - pos
				} else if inRef && refs[ri].End > pos && refs[ri].End < pos+n {
					n = refs[ri].End - pos
				}
			}
			if ri < len(refs) && !inRef && refs[ri].Start == pos {
				fmt.Fprintf(w, `<span class="prm" data-p="%s">`, refs[ri].Name)
				inRef = true
				if refs[ri].End < pos+n {
					n = refs[ri].End - pos
				}
			}
			piece := text[:n]
			if cls != "" {
				fmt.Fprintf(w, `<span class="%s">%s</span>`, cls, html.EscapeString(piece))
			} else {
				w.WriteString(html.EscapeString(piece))
			}
			pos += n
			text = text[n:]
			if inRef && refs[ri].End == pos {
				w.WriteString("</span>")
				inRef = false
				ri++
			}
			if lineNos && strings.HasSuffix(piece, "\n") && pos < len(src) {
				line++
				fmt.Fprintf(w, `<span class="ln">%d</span>`, line)
			}
		}
	}
	for _, tok := range toks {
		emit(chroma.StandardTypes[tok.Type], tok.Value)
	}
	if inRef {
		w.WriteString("</span>")
	}
}

// inlineMarkdown renders a short Markdown string (a prerequisite) without the
// surrounding paragraph.
func inlineMarkdown(md goldmark.Markdown, s string) string {
	var buf bytes.Buffer
	if err := md.Convert([]byte(s), &buf); err != nil {
		return html.EscapeString(s)
	}
	out := strings.TrimSpace(buf.String())
	out = strings.TrimPrefix(out, "<p>")
	out = strings.TrimSuffix(out, "</p>")
	return out
}

// headingID makes a page-unique id from text, slugified as step ids are;
// "section" if nothing is left. The step ids, block ids and the theme's own ids are taken first.
func (r *nodeRenderer) headingID(text string) string {
	if r.ids == nil {
		r.ids = map[string]bool{}
		for _, id := range themeIDs {
			r.ids[id] = true
		}
		for _, st := range r.rb.Steps {
			r.ids[st.ID] = true
		}
		for _, b := range r.rb.Blocks {
			if b.ID != "" {
				r.ids["block-"+b.ID] = true
			}
		}
	}
	base := runbook.Slugify(text)
	if base == "" {
		base = "section"
	}
	id := base
	for i := 2; r.ids[id]; i++ {
		id = fmt.Sprintf("%s-%d", base, i)
	}
	r.ids[id] = true
	return id
}

// themeIDs are the element ids the default theme's page uses.
var themeIDs = []string{"cairn-data", "cairn-i18n", "main", "params-title", "prereq-title", "search-input", "search-results", "sidebar", "toc-title"}
