package site

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"golang.org/x/net/html"

	"github.com/cairn-dev/cairn/runbook"
)

// cairnMarkup are the kinds of difference between Cairn's page and plain
// goldmark (with the same GFM options) that are Cairn's own documented
// markup (docs/runbook-format.md, "CommonMark conformance"). Every example
// of the CommonMark spec that renders differently must fall into one of
// them; anything else is a bug.
var cairnMarkup = map[string]string{
	"container": "a line starting with ::: opens or closes a Cairn container (admonition, tabs)",
	"attrs":     "{...} after a fence's language holds Cairn block attributes",
	"fence":     "a code fence that is never closed is an error in a runbook",
}

// TestCommonMarkConformance renders every example of the CommonMark spec
// shipped with the goldmark module through Cairn (runbook.Parse and the
// page renderer) and through plain goldmark with the same extensions, and
// compares them after taking away the page chrome Cairn documents (heading
// levels and ids, step sections, code block frames and highlighting). Each
// remaining difference must be explained by cairnMarkup.
func TestCommonMarkConformance(t *testing.T) {
	spec := specFile(t)
	var examples []struct {
		Markdown string `json:"markdown"`
		HTML     string `json:"html"`
		Example  int    `json:"example"`
		Section  string `json:"section"`
	}
	if err := json.Unmarshal(spec, &examples); err != nil {
		t.Fatal(err)
	}
	plain := goldmark.New(goldmark.WithExtensions(extension.GFM))
	identical, asSpec := 0, 0
	explained := map[string][]int{}
	for _, ex := range examples {
		var want bytes.Buffer
		if err := plain.Convert([]byte(ex.Markdown), &want); err != nil {
			t.Fatal(err)
		}
		if want.String() == ex.HTML {
			asSpec++
		}
		src := "---\ntitle: example\n---\n" + ex.Markdown
		rb, err := runbook.Parse(fmt.Sprintf("example-%d.md", ex.Example), []byte(src))
		var got []byte
		if err == nil {
			got, err = renderBody(rb, stringsFor("en"), nil, false)
			if err != nil {
				t.Fatal(err)
			}
		}
		if err == nil && normalizeHTML(string(got)) == normalizeHTML(want.String()) {
			identical++
			continue
		}
		why := explain(ex.Markdown, err)
		if why == "" {
			t.Errorf("example %d (%s) renders differently, for no documented reason:\nmarkdown:\n%s\ngoldmark:\n%s\ncairn (%v):\n%s\nnormalized goldmark: %s\nnormalized cairn:    %s",
				ex.Example, ex.Section, ex.Markdown, want.String(), err, got, normalizeHTML(want.String()), normalizeHTML(string(got)))
			continue
		}
		explained[why] = append(explained[why], ex.Example)
	}
	keys := make([]string, 0, len(explained))
	for k := range explained {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %v", k, explained[k]))
	}
	t.Logf("CommonMark spec: %d of %d examples identical to plain goldmark (goldmark itself: %d as the spec); Cairn's own markup: %s",
		identical, len(examples), asSpec, strings.Join(parts, "; "))
	fmt.Fprintf(os.Stderr, "commonmark: %d of %d spec examples identical to plain goldmark\n", identical, len(examples))
}

// explain says which of cairnMarkup makes an example differ, or "".
func explain(md string, err error) string {
	for _, line := range strings.Split(md, "\n") {
		l := strings.TrimLeft(line, " >-*+0123456789.)\t")
		if strings.HasPrefix(l, ":::") {
			return "container"
		}
		if (strings.HasPrefix(l, "```") || strings.HasPrefix(l, "~~~")) && strings.Contains(l, "{") {
			return "attrs"
		}
	}
	if err != nil && strings.Contains(err.Error(), "never closed") {
		return "fence"
	}
	return ""
}

// specFile reads spec.json from the goldmark module in the module cache.
func specFile(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yuin/goldmark").Output()
	if err != nil {
		t.Skipf("go list: %v (the goldmark module is not in the module cache)", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "_test", "spec.json"))
	if err != nil {
		t.Skipf("no CommonMark spec in the goldmark module: %v", err)
	}
	return b
}

// normalizeHTML takes away Cairn's page chrome: heading levels and ids,
// step sections and their title widgets, code block frames, copy buttons
// and highlighting spans. What remains is the document's structure and
// text, with attributes sorted.
func normalizeHTML(s string) string {
	z := html.NewTokenizer(strings.NewReader(s))
	var b strings.Builder
	skip := 0      // depth inside an element dropped with its content
	inCode := 0    // inside <code>: only text counts
	var drop []int // depth stack of dropped wrapper elements
	depth := 0
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		class := attr(tok, "class")
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			if skip > 0 {
				if tt == html.StartTagToken && !voidTag(tok.Data) {
					skip++
				}
				continue
			}
			switch {
			case tok.Data == "input" && strings.Contains(class, "step-done"),
				tok.Data == "button":
				if tt == html.StartTagToken && tok.Data == "button" {
					skip = 1
				}
				continue
			case tok.Data == "span" && (class == "step-num" || class == "cb-title" || class == "ln"),
				tok.Data == "a" && class == "anchor",
				tok.Data == "div" && class == "cb-head":
				skip = 1
				continue
			case tok.Data == "section" && strings.Contains(class, "step"),
				tok.Data == "div" && strings.HasPrefix(class, "cb "),
				tok.Data == "span":
				if tt == html.StartTagToken {
					depth++
					drop = append(drop, depth)
				}
				continue
			case inCode > 0:
				continue
			}
			if tt == html.StartTagToken && !voidTag(tok.Data) {
				depth++
			}
			b.WriteString(canonTag(tok))
			if tok.Data == "code" {
				inCode++
			}
		case html.EndTagToken:
			if skip > 0 {
				skip--
				continue
			}
			if len(drop) > 0 && drop[len(drop)-1] == depth {
				drop = drop[:len(drop)-1]
				depth--
				continue
			}
			if inCode > 0 && tok.Data != "code" {
				continue
			}
			depth--
			if tok.Data == "code" {
				inCode--
			}
			b.WriteString("</" + headingTag(tok.Data) + ">")
		case html.TextToken:
			if skip > 0 {
				continue
			}
			if inCode == 0 && strings.TrimSpace(tok.Data) == "" {
				continue
			}
			if inCode == 0 {
				b.WriteString(strings.Join(strings.Fields(tok.Data), " "))
			} else {
				b.WriteString(tok.Data)
			}
		case html.CommentToken:
			b.WriteString("<!--" + tok.Data + "-->")
		}
	}
	return b.String()
}

func attr(tok html.Token, name string) string {
	for _, a := range tok.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

func voidTag(name string) bool {
	switch name {
	case "br", "hr", "img", "input", "meta", "link", "source", "wbr", "area", "base", "col", "embed", "param", "track":
		return true
	}
	return false
}

// headingTag maps h1..h6 to h: Cairn shifts levels (the page title is the
// only h1).
func headingTag(name string) string {
	if len(name) == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6' {
		return "h"
	}
	return name
}

// canonTag writes a start tag with sorted attributes, without heading ids,
// Cairn's pre class or an empty language class.
func canonTag(tok html.Token) string {
	var attrs []string
	for _, a := range tok.Attr {
		switch {
		case headingTag(tok.Data) == "h" && (a.Key == "id" || a.Key == "class"),
			tok.Data == "pre" && a.Key == "class",
			tok.Data == "code" && a.Key == "class" && a.Val == "language-":
			continue
		}
		attrs = append(attrs, fmt.Sprintf("%s=%q", a.Key, a.Val))
	}
	sort.Strings(attrs)
	s := "<" + headingTag(tok.Data)
	if len(attrs) > 0 {
		s += " " + strings.Join(attrs, " ")
	}
	return s + ">"
}

// TestNormalizeHTML: the comparison takes away chrome, not content.
func TestNormalizeHTML(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"<h1>Foo <em>x</em></h1>\n", `<h2 id="foo-x">Foo <em>x</em></h2>`, true},
		{"<h2>Step</h2>\n<p>t</p>\n", `<section class="step" id="step" data-step="step"><h2 class="step-title"><input type="checkbox" class="step-done"> <span class="step-num">1</span> <span class="step-text">Step</span> <a class="anchor" href="#step">#</a></h2><p>t</p></section>`, true},
		{"<pre><code class=\"language-go\">x := 1\n</code></pre>\n", `<div class="cb cb-display"><div class="cb-head"><button type="button" class="cb-copy">Copy</button></div><pre class="chroma"><code class="language-go"><span class="nx">x</span> <span class="o">:=</span> 1
</code></pre></div>`, true},
		{"<p>a</p>", "<p>b</p>", false},
		{"<h1>Foo</h1>", "<h2>Bar</h2>", false},
		{"<pre><code class=\"language-go\">x\n</code></pre>", `<div class="cb cb-display"><pre class="chroma"><code class="language-sh">x
</code></pre></div>`, false},
		{"<ul><li>a</li></ul>", "<ol><li>a</li></ol>", false},
	} {
		if got := normalizeHTML(tc.a) == normalizeHTML(tc.b); got != tc.same {
			t.Errorf("same(%q, %q) = %v\n%s\n%s", tc.a, tc.b, got, normalizeHTML(tc.a), normalizeHTML(tc.b))
		}
	}
}
