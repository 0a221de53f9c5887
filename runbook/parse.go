package runbook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/yuin/goldmark"
	gast "github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	rbast "github.com/cairn-dev/cairn/runbook/ast"
)

type gastNode = gast.Node

// Priorities of the parts this package registers with goldmark.
const (
	// Before goldmark's own block parsers (list items are 300): a ::: line
	// starts a container wherever a block can start.
	containerPriority = 90
	// The model is built after goldmark's own transformers have run.
	modelPriority = 1000
)

// stateKey carries the runbook being built from Parse to the transformer.
var stateKey = parser.NewContextKey()

// modelTransformer turns the parsed document into the runbook model: steps,
// blocks and containers are validated and replaced by runbook/ast nodes.
type modelTransformer struct{}

func (modelTransformer) Transform(doc *gast.Document, _ text.Reader, pc parser.Context) {
	if p, ok := pc.Get(stateKey).(*parseState); ok {
		p.transform(doc)
		p.resolve()
	}
}

// Extension adds Cairn's block syntax (::: containers) and the transformer
// that builds the runbook model to a goldmark parser. Parse uses it;
// renderers register their own NodeRenderers for the nodes in runbook/ast.
var Extension goldmark.Extender = extender{}

type extender struct{}

func (extender) Extend(m goldmark.Markdown) {
	m.Parser().AddOptions(
		parser.WithBlockParsers(util.Prioritized(containerParser{}, containerPriority)),
		parser.WithASTTransformers(util.Prioritized(modelTransformer{}, modelPriority)),
	)
}

var markdown = sync.OnceValue(func() goldmark.Markdown {
	return goldmark.New(goldmark.WithExtensions(extension.GFM, Extension))
})

// Parse reads one runbook. It always returns a Runbook (possibly partial, so
// tools can show what they could read); err is a Diagnostics listing every
// problem, or nil.
func Parse(path string, src []byte) (*Runbook, error) {
	sum := sha256.Sum256(src)
	rb := &Runbook{Path: path, Source: src, Hash: hex.EncodeToString(sum[:])}
	p := &parseState{rb: rb, li: newLineIndex(src)}
	base := filepath.Base(path)
	rb.Slug = strings.TrimSuffix(base, filepath.Ext(base))

	fm, bodyOff, ok, closed := splitFrontMatter(src)
	switch {
	case !ok:
		// Plain Markdown (a README, another tool's page): a page titled
		// by its first # heading, or by its file name.
		p.warnf(Pos{Line: 1}, "no front matter: the title comes from the first # heading or the file name; start the file with --- YAML with a title --- to set it, or run cairn import")
		p.titleFromHeading = true
	case !closed:
		p.errf(Pos{Line: 1}, "front matter is never closed: add a --- line after the YAML")
	default:
		p.parseFrontMatter(fm, 2)
		for _, hr := range rb.Meta.Requires.Hosts {
			prm := rb.ParamByName(hr.Param)
			switch {
			case prm == nil:
				p.errf(hr.Pos, "front matter: requires.hosts: unknown parameter %q%s", hr.Param, p.paramHint(hr.Param))
			case prm.Type != TypeHost && prm.Type != TypeHosts:
				p.errf(hr.Pos, "front matter: requires.hosts: parameter %s is of type %s; want host or hosts", hr.Param, prm.Type)
			}
		}
	}
	if rb.Meta.Lang == "" {
		rb.Meta.Lang, rb.Meta.LangDefaulted = "en", true
	}
	rb.BodyOffset = bodyOff
	rb.Body = src[bodyOff:]
	p.bodyOff = bodyOff

	pc := parser.NewContext()
	pc.Set(stateKey, p)
	rb.Doc = markdown().Parser().Parse(text.NewReader(rb.Body), parser.WithContext(pc))
	if p.titleFromHeading && rb.Meta.Title == "" {
		rb.Meta.Title = strings.TrimSuffix(base, filepath.Ext(base))
	}
	p.diags.Sort()
	var errs Diagnostics
	for _, d := range p.diags {
		if d.Warning {
			rb.Warnings = append(rb.Warnings, d)
		} else {
			errs = append(errs, d)
		}
	}
	if len(errs) == 0 {
		return rb, nil
	}
	return rb, errs
}

type parseState struct {
	rb       *Runbook
	li       *lineIndex
	bodyOff  int
	diags    Diagnostics
	step     *Step
	stepIDs  map[string]bool
	blockIDs map[string]*Block
	captures map[string]*Block // capture name -> first block that sets it
	tabSets  int
	lastExec *Block
	// titleFromHeading: no front matter; the first # heading is the title.
	titleFromHeading bool
	// sessionVars: the names each shell session's blocks so far assign
	// (a later block of the session may read them).
	sessionVars map[string]map[string]bool
}

func (p *parseState) errf(pos Pos, format string, args ...any) {
	p.diags = append(p.diags, Diagnostic{File: p.rb.Path, Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (p *parseState) rawHTML(pos Pos, msg string) {
	p.diags = append(p.diags, Diagnostic{File: p.rb.Path, Pos: pos, Msg: msg, Warning: true, Code: CodeRawHTML})
}

func (p *parseState) warnf(pos Pos, format string, args ...any) {
	p.diags = append(p.diags, Diagnostic{File: p.rb.Path, Pos: pos, Msg: fmt.Sprintf(format, args...), Warning: true})
}

// at converts a byte offset in Body to a file position.
func (p *parseState) at(off int) Pos { return p.li.pos(p.bodyOff + off) }

type walkCtx struct {
	when        *Cond // from enclosing tabs
	inContainer bool
	// inBlock: inside a list item, block quote or other CommonMark
	// container, where a ## is an ordinary heading, never a step.
	inBlock bool
}

func (p *parseState) transform(doc gast.Node) {
	p.stepIDs = map[string]bool{}
	p.blockIDs = map[string]*Block{}
	p.captures = map[string]*Block{}
	p.walk(doc, walkCtx{})
}

func (p *parseState) walk(parent gast.Node, ctx walkCtx) {
	for n := parent.FirstChild(); n != nil; {
		next := n.NextSibling()
		switch n := n.(type) {
		case *gast.Heading:
			switch {
			case n.Level == 1 && p.titleFromHeading && p.rb.Meta.Title == "" && !ctx.inBlock && !ctx.inContainer:
				// It becomes the page's title, so the body does not
				// repeat it.
				p.rb.Meta.Title = PlainText(n, p.rb.Body)
				p.rb.Meta.TitleFromHeading = true
				p.rb.Meta.TitleSpan = p.headingSpan(n)
				parent.RemoveChild(parent, n)
			case n.Level == 2 && !ctx.inBlock:
				if ctx.inContainer {
					p.errf(p.at(n.Pos()), "a step heading (##) cannot be inside a ::: container; close the container first")
				} else {
					p.step = nil
					st := p.newStep(n)
					parent.ReplaceChild(parent, n, st)
				}
			}
		case *gast.FencedCodeBlock:
			cb := p.newBlock(n, ctx)
			parent.ReplaceChild(parent, n, cb)
		case *gast.HTMLBlock:
			// Comments are meant to vanish; a closing tag was warned
			// about with its opening one.
			if n.HTMLBlockType != gast.HTMLBlockType2 && n.Lines().Len() > 0 && !bytes.HasPrefix(firstLine(n, p.rb.Body), []byte("</")) {
				p.rawHTML(p.at(n.Pos()), "raw HTML is not shown on the page (runbook pages omit raw HTML, as goldmark does by default); write it in Markdown, or set raw_html: render in cairn.yaml")
			}
		case *gast.RawHTML:
			if n.Segments.Len() > 0 {
				seg := n.Segments.At(0)
				if raw := seg.Value(p.rb.Body); !bytes.HasPrefix(raw, []byte("<!--")) && !bytes.HasPrefix(raw, []byte("</")) {
					p.rawHTML(p.at(seg.Start), fmt.Sprintf("inline raw HTML %q is not shown on the page; write it in Markdown, or set raw_html: render in cairn.yaml", raw))
				}
			}
		case *rbast.Container:
			p.container(n, ctx)
		default:
			if n.Type() == gast.TypeBlock && n.HasChildren() {
				inner := ctx
				inner.inBlock = true
				p.walk(n, inner)
			}
		}
		n = next
	}
}

// headingAttrs splits the raw heading line into its text and attributes.
func (p *parseState) newStep(h *gast.Heading) *rbast.Step {
	st := &Step{Number: len(p.rb.Steps) + 1, Pos: p.at(h.Pos())}
	node := &rbast.Step{Index: len(p.rb.Steps)}
	node.SetPos(h.Pos())
	node.SetLines(h.Lines())
	var attrStart = -1
	if h.Lines().Len() > 0 {
		seg := h.Lines().At(0)
		raw := string(seg.Value(p.rb.Body))
		_, attrText, off := splitTrailingAttrs(raw)
		if attrText != "" {
			attrStart = seg.Start + off
			attrs, err := p.parseAttrList(attrText, attrStart)
			if err == nil {
				for _, a := range attrs {
					pos := p.at(attrStart + a.Off)
					switch a.Key {
					case "id":
						st.ID, st.Explicit = a.Value, true
						if !idRe.MatchString(a.Value) {
							p.errf(pos, "step id %q must match [a-z0-9][a-z0-9-]*", a.Value)
						}
					case "when":
						st.When = p.cond(a.Value, pos, attrStart+a.Off)
					case "always":
						switch a.Value {
						case "true":
							st.Always = true
						case "false":
						default:
							p.errf(pos, "step: always must be true or false, not %q", a.Value)
						}
					default:
						p.errf(pos, "step: unknown heading attribute %q (known: #id, when, always)", a.Key)
					}
				}
			}
		}
	}
	// Move the inline children over, dropping the {attributes} text.
	for c := h.FirstChild(); c != nil; {
		next := c.NextSibling()
		if attrStart >= 0 {
			if t, ok := c.(*gast.Text); ok {
				if t.Segment.Start >= attrStart {
					c = next
					continue
				}
				if t.Segment.Stop > attrStart {
					t.Segment = t.Segment.WithStop(attrStart)
					t.Segment = t.Segment.TrimRightSpace(p.rb.Body)
				}
			} else if c.Pos() >= attrStart {
				c = next
				continue
			}
		}
		node.AppendChild(node, c)
		c = next
	}
	st.Title = strings.TrimSpace(PlainText(node, p.rb.Body))
	if st.ID == "" {
		st.ID = Slugify(st.Title)
		if st.ID == "" {
			st.ID = fmt.Sprintf("step-%d", st.Number)
		}
		base := st.ID
		for i := 2; p.stepIDs[st.ID]; i++ {
			st.ID = fmt.Sprintf("%s-%d", base, i)
		}
	} else if p.stepIDs[st.ID] {
		first := p.rb.StepByID(st.ID)
		p.errf(st.Pos, "duplicate step id %q (first used at line %d); step ids must be unique", st.ID, first.Pos.Line)
	}
	p.stepIDs[st.ID] = true
	p.rb.Steps = append(p.rb.Steps, st)
	p.step = st
	p.lastExec = nil
	return node
}

func (p *parseState) parseAttrList(s string, off int) ([]Attr, error) {
	attrs, n, err := ParseAttrs(s)
	if err != nil {
		ae := err.(*AttrError)
		p.errf(p.at(off+ae.Off), "%s", ae.Msg)
		return nil, err
	}
	if rest := strings.TrimSpace(s[n:]); rest != "" {
		p.errf(p.at(off+n), "unexpected %q after the attributes", rest)
		return nil, fmt.Errorf("trailing text")
	}
	return attrs, nil
}

func (p *parseState) cond(src string, pos Pos, off int) *Cond {
	c, err := ParseCond(src)
	if err != nil {
		p.errf(pos, "when: %v", err)
		return nil
	}
	for _, name := range c.Names() {
		prm := p.rb.ParamByName(name)
		if prm == nil {
			p.errf(pos, "when: unknown parameter %q%s", name, p.paramHint(name))
		}
	}
	for _, cmp := range c.Comparisons() {
		if prm := p.rb.ParamByName(cmp[0]); prm != nil && prm.Type == TypeEnum && !contains(prm.Values, cmp[1]) {
			p.errf(pos, "when: %q is not a value of %s (values: %s)", cmp[1], cmp[0], strings.Join(prm.Values, ", "))
		}
	}
	c.root.walk(func(n condNode) {
		check := func(x condNode) {
			if v, ok := x.(condVar); ok {
				if prm := p.rb.ParamByName(string(v)); prm != nil && prm.Type != TypeBool {
					p.errf(pos, "when: %s is a %s parameter, not bool; compare it, e.g. %s == \"...\"", v, prm.Type, v)
				}
			}
		}
		switch n := n.(type) {
		case condNot:
			check(n.x)
		case condAnd:
			check(n.l)
			check(n.r)
		case condOr:
			check(n.l)
			check(n.r)
		}
	})
	if v, ok := c.root.(condVar); ok {
		if prm := p.rb.ParamByName(string(v)); prm != nil && prm.Type != TypeBool {
			p.errf(pos, "when: %s is a %s parameter, not bool; compare it, e.g. %s == \"...\"", v, prm.Type, v)
		}
	}
	return c
}

func (p *parseState) paramHint(name string) string {
	names := make([]string, len(p.rb.Params))
	for i, prm := range p.rb.Params {
		names[i] = prm.Name
	}
	if n := nearest(name, names); n != "" {
		return fmt.Sprintf("; did you mean %s?", n)
	}
	if len(names) == 0 {
		return "; the runbook declares no params"
	}
	return fmt.Sprintf(" (declared: %s)", strings.Join(names, ", "))
}

var admonitionKinds = []string{"note", "tip", "caution", "warning"}

func (p *parseState) container(c *rbast.Container, ctx walkCtx) {
	pos := p.at(c.Pos())
	if !c.Closed {
		p.errf(pos, "::: %s container is never closed; add a line of %s", c.Name, strings.Repeat(":", c.Colons))
	}
	title, attrText, off := splitTrailingAttrs(c.Info)
	var attrs []Attr
	if attrText != "" {
		var err error
		if attrs, err = p.parseAttrList(attrText, c.InfoAt+off); err != nil {
			attrs = nil
		}
	}
	c.Title = strings.TrimSpace(title)
	attrPos := func(a Attr) Pos { return p.at(c.InfoAt + off + a.Off) }
	inner := walkCtx{when: ctx.when, inContainer: true}
	switch c.Name {
	case "tabs":
		p.tabSets++
		c.Group = p.tabSets
		var param *Param
		for _, a := range attrs {
			if a.Key != "param" {
				p.errf(attrPos(a), "::: tabs: unknown attribute %q (known: param)", a.Key)
				continue
			}
			param = p.rb.ParamByName(a.Value)
			switch {
			case param == nil:
				p.errf(attrPos(a), "::: tabs: param: unknown parameter %q%s", a.Value, p.paramHint(a.Value))
			case param.Type != TypeEnum:
				p.errf(attrPos(a), "::: tabs: param: %s is a %s parameter; tabs bind only to enum parameters", a.Value, param.Type)
				param = nil
			default:
				c.Param = param.Name
			}
		}
		ntabs := 0
		for ch := c.FirstChild(); ch != nil; ch = ch.NextSibling() {
			tab, ok := ch.(*rbast.Container)
			if !ok || tab.Name != "tab" {
				p.errf(p.at(ch.Pos()), "::: tabs holds only ::: tab containers (give the inner ones fewer colons than the outer)")
				continue
			}
			ntabs++
			tab.Group = c.Group
			p.tab(tab, param, inner)
		}
		if ntabs == 0 {
			p.errf(pos, "::: tabs has no ::: tab inside")
		}
	case "tab":
		p.errf(pos, "::: tab must be directly inside a ::: tabs container")
		p.walk(c, inner)
	default:
		if !contains(admonitionKinds, c.Name) {
			hint := ""
			if n := nearest(c.Name, append(admonitionKinds, "tabs")); n != "" {
				hint = fmt.Sprintf("; did you mean %q?", n)
			}
			p.errf(pos, "unknown container kind %q (known: note, tip, caution, warning, tabs)%s", c.Name, hint)
		}
		for _, a := range attrs {
			p.errf(attrPos(a), "::: %s takes no attributes, only a title", c.Name)
		}
		p.walk(c, inner)
	}
}

func (p *parseState) tab(tab *rbast.Container, param *Param, ctx walkCtx) {
	title, attrText, off := splitTrailingAttrs(tab.Info)
	tab.Title = strings.TrimSpace(title)
	pos := p.at(tab.Pos())
	if !tab.Closed {
		p.errf(pos, "::: tab container is never closed; add a line of %s", strings.Repeat(":", tab.Colons))
	}
	if tab.Title == "" {
		p.errf(pos, "::: tab needs a title: ::: tab 스택형 etcd")
	}
	if attrText != "" {
		attrs, err := p.parseAttrList(attrText, tab.InfoAt+off)
		if err == nil {
			for _, a := range attrs {
				apos := p.at(tab.InfoAt + off + a.Off)
				if a.Key != "value" {
					p.errf(apos, "::: tab: unknown attribute %q (known: value)", a.Key)
					continue
				}
				tab.Value = a.Value
				if param == nil {
					p.errf(apos, "::: tab: value needs the enclosing ::: tabs to name an enum parameter with {param=...}")
				} else if !contains(param.Values, a.Value) {
					p.errf(apos, "::: tab: %q is not a value of %s (values: %s)", a.Value, param.Name, strings.Join(param.Values, ", "))
				}
			}
		}
	}
	if param != nil {
		if tab.Value == "" {
			p.errf(pos, "::: tab: the tab set is bound to %s, so each tab needs {value=...} (one of %s)", param.Name, strings.Join(param.Values, ", "))
		} else {
			tab.Param = param.Name
			src := fmt.Sprintf("%s == %q", param.Name, tab.Value)
			if c, err := ParseCond(src); err == nil {
				ctx.when = And(ctx.when, c)
			}
		}
	}
	p.walk(tab, ctx)
}

// PlainText is the text content of inline nodes (a heading's title).
func PlainText(n gast.Node, src []byte) string {
	var b strings.Builder
	_ = gast.Walk(n, func(c gast.Node, entering bool) (gast.WalkStatus, error) {
		if !entering {
			return gast.WalkContinue, nil
		}
		switch t := c.(type) {
		case *gast.Text:
			b.Write(t.Segment.Value(src))
			if t.SoftLineBreak() || t.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *gast.String:
			b.Write(t.Value)
		}
		return gast.WalkContinue, nil
	})
	return b.String()
}

// Slugify derives an id from a heading: lower case, runs of other than
// letters and digits (of any script) become '-'.
func Slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
		} else {
			dash = true
		}
	}
	return b.String()
}

// fenceSpan returns the byte range in Body of a fenced block, closing fence
// included.
// closed is false when no closing fence was found: CommonMark then runs the
// block to the end of its container (here, usually the file).
func fenceSpan(n *gast.FencedCodeBlock, body []byte) (start, end int, closed bool) {
	start = n.Pos()
	end = start
	if nl := bytes.IndexByte(body[start:], '\n'); nl >= 0 {
		end = start + nl + 1
	} else {
		return start, len(body), false
	}
	open := strings.TrimLeft(string(body[start:end]), " ")
	fc := byte('`')
	if open != "" && open[0] == '~' {
		fc = '~'
	}
	width := len(open) - len(strings.TrimLeft(open, string(fc)))
	if l := n.Lines().Len(); l > 0 {
		end = n.Lines().At(l - 1).Stop
	}
	// The closing fence, if any, is the next line: the same character, at
	// least as many, nothing else but spaces.
	rest := body[end:]
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	t := strings.TrimSpace(string(line))
	if t != "" && strings.Trim(t, string(fc)) == "" && len(t) >= width {
		end += len(line)
		if end < len(body) {
			end++
		}
		closed = true
	}
	return start, end, closed
}

// resolve links expected/output blocks to their blocks, once all ids are known.
func (p *parseState) resolve() {
	for _, b := range p.rb.Blocks {
		if b.Role != RoleExpected && b.Role != RoleOutput {
			continue
		}
		if b.OutputOf == "" {
			continue // reported already
		}
		of := p.blockIDs[b.OutputOf]
		if of == nil {
			ids := make([]string, 0, len(p.blockIDs))
			for id := range p.blockIDs {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			hint := ""
			if n := nearest(b.OutputOf, ids); n != "" {
				hint = fmt.Sprintf("; did you mean %q?", n)
			}
			key := "expected"
			if b.Role == RoleOutput {
				key = "output"
			}
			p.errf(b.Pos, "%s=%s: no executable block has that id%s", key, b.OutputOf, hint)
			continue
		}
		b.Of = of
		if b.Role == RoleExpected {
			of.ExpectedOutputs = append(of.ExpectedOutputs, b)
			if b.Match == "similar" {
				of.Expect.Similar = append(of.Expect.Similar, b)
			}
		}
	}
}

func firstLine(n gast.Node, src []byte) []byte {
	seg := n.Lines().At(0)
	return seg.Value(src)
}

// headingSpan is the byte range in Source of a heading's lines: its text
// lines and, for a setext heading, the underline.
func (p *parseState) headingSpan(h *gast.Heading) [2]int {
	src := p.rb.Source
	if h.Lines().Len() == 0 {
		return [2]int{}
	}
	start := p.bodyOff + h.Lines().At(0).Start
	end := p.bodyOff + h.Lines().At(h.Lines().Len()-1).Stop
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	lineEnd := func(i int) int {
		for i < len(src) && src[i] != '\n' {
			i++
		}
		if i < len(src) {
			i++
		}
		return i
	}
	end = lineEnd(end)
	// A setext heading's underline (=== or ---) follows its text.
	if next := strings.TrimSpace(string(src[end:lineEnd(end)])); next != "" && strings.Trim(next, "=") == "" {
		end = lineEnd(end)
	}
	return [2]int{start, end}
}
