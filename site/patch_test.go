package site

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// patchBase is a runbook with each kind of part a patch may or may not
// touch: prose, a list, an admonition, a heading, a code block, a
// parameter in prose, a second step.
const patchBase = "---\ntitle: 패치\nlang: ko\nparams:\n  - name: X\n    default: a\n---\n\n" +
	"머리 문단이에요.\n\n" +
	"## 첫 단계 {#one}\n\n첫 문단이에요.\n\n- 하나\n- 둘\n\n:::note\n알림 문단이에요.\n:::\n\n" +
	"### 작은 제목\n\n```bash {#hello target=local}\necho hello\n```\n\n" +
	"## 둘째 단계 {#two}\n\n끝 문단이에요.\n"

func renderPatchPage(t *testing.T, md string) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background())
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("build: %v %v", err, res.Diagnostics)
	}
	return res.Files["a/index.html"]
}

// TestDiffPage: an edit of plain prose (a paragraph, a list, an
// admonition, a heading) becomes a patch of exactly the parts it changed;
// anything a page's scripts bring to life, a part added or a change outside
// the content has no patch, and says why.
func TestDiffPage(t *testing.T) {
	old := renderPatchPage(t, patchBase)
	for _, tc := range []struct {
		name, from, to string
		want           []string // the new parts' text, or
		why            string   // why there is no patch
	}{
		{name: "paragraph", from: "첫 문단이에요.", to: "고친 첫 문단이에요.", want: []string{"고친 첫 문단이에요."}},
		{name: "intro", from: "머리 문단이에요.", to: "고친 머리 문단.", want: []string{"고친 머리 문단."}},
		{name: "list and heading", from: "- 둘\n\n:::note\n알림 문단이에요.\n:::\n\n### 작은 제목", to: "- 셋\n\n:::note\n알림 문단이에요.\n:::\n\n### 큰 제목", want: []string{"셋", "큰 제목"}},
		{name: "admonition", from: "알림 문단이에요.", to: "고친 알림.", want: []string{"고친 알림."}},
		{name: "last step", from: "끝 문단이에요.", to: "고친 끝.", want: []string{"고친 끝."}},
		{name: "nothing", from: "", to: "", want: nil},
		{name: "code", from: "echo hello", to: "echo bye", why: "a live part"},
		{name: "step title", from: "## 첫 단계 {#one}", to: "## 첫 걸음 {#one}", why: "outside the content"},
		{name: "paragraph added", from: "첫 문단이에요.", to: "첫 문단이에요.\n\n새 문단.", why: "parts added, removed or moved"},
		{name: "title", from: "title: 패치", to: "title: 새 패치", why: "outside the content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md := patchBase
			if tc.from != "" {
				md = strings.Replace(patchBase, tc.from, tc.to, 1)
			}
			next := renderPatchPage(t, md)
			p, why := DiffPage(old, next)
			if tc.why != "" {
				if p != nil || why != tc.why {
					t.Fatalf("patch %+v, why %q; want none because %q", p, why, tc.why)
				}
				return
			}
			if p == nil {
				t.Fatalf("no patch: %s", why)
			}
			if len(p.Parts) != len(tc.want) {
				t.Fatalf("%d parts changed, want %d: %+v", len(p.Parts), len(tc.want), p.Parts)
			}
			for i, w := range tc.want {
				if !strings.Contains(p.Parts[i].HTML, w) {
					t.Errorf("part %d = %s, want it to hold %q", p.Parts[i].I, p.Parts[i].HTML, w)
				}
			}
			checkPatch(t, old, next, p)
		})
	}
}

// checkPatch: the patch's parts put into old's parts give next's, and its
// hash and page data are next's.
func checkPatch(t *testing.T, old, next []byte, p *PagePatch) {
	t.Helper()
	a, b := splitPage(old), splitPage(next)
	parts := append([][]byte(nil), a.parts...)
	for _, part := range p.Parts {
		parts[part.I] = []byte(part.HTML)
	}
	for i := range parts {
		if !bytes.Equal(parts[i], b.parts[i]) {
			t.Fatalf("part %d after the patch:\n%s\nwant\n%s", i, parts[i], b.parts[i])
		}
	}
	if p.Base != a.hash || p.Hash != b.hash || p.Data != b.data || p.N != len(b.parts) || b.hash == "" || b.data == "" {
		t.Errorf("patch base %q hash %q n %d data %d bytes; pages: %q → %q, %d parts, %d bytes of data", p.Base, p.Hash, p.N, len(p.Data), a.hash, b.hash, len(b.parts), len(b.data))
	}
}

// FuzzDiffPage: any two inputs are cut without a panic, and a patch, when
// there is one, turns the first page's parts into the second's.
func FuzzDiffPage(f *testing.F) {
	f.Add(`<article class="runbook" data-hash="1"><div class="rb-content"><p>a</p><section class="step"><h2 class="step-title">t</h2><p>b</p><hr></section></div></article><script type="application/json" id="cairn-data">{}</script>`,
		`<article class="runbook" data-hash="2"><div class="rb-content"><p>c</p><section class="step"><h2 class="step-title">t</h2><p>d<br></p><hr></section></div></article><script type="application/json" id="cairn-data">{"a":1}</script>`)
	f.Add(`<div class="rb-content"><script>x</p></script></div>`, `<div class="rb-content"><p>`)
	f.Fuzz(func(t *testing.T, old, next string) {
		p, _ := DiffPage([]byte(old), []byte(next))
		if p == nil {
			return
		}
		a, b := splitPage([]byte(old)), splitPage([]byte(next))
		for _, part := range p.Parts {
			a.parts[part.I] = []byte(part.HTML)
		}
		for i := range a.parts {
			if !bytes.Equal(a.parts[i], b.parts[i]) {
				t.Fatalf("part %d after the patch: %q, want %q", i, a.parts[i], b.parts[i])
			}
		}
	})
}

// htmlTokens is golang.org/x/net/html's tokenizer as a tokenizer: the
// reference the scanner is held to.
type htmlTokens struct {
	z     *html.Tokenizer
	off   int
	attrs map[string]string
}

func (h *htmlTokens) next() (token, bool) {
	tt := h.z.Next()
	if tt == html.ErrorToken {
		return token{}, false
	}
	raw := h.z.Raw()
	tk := token{start: h.off, end: h.off + len(raw)}
	h.off = tk.end
	switch tt {
	case html.TextToken:
		tk.kind = textToken
	case html.StartTagToken:
		tk.kind = startTagToken
	case html.EndTagToken:
		tk.kind = endTagToken
	case html.SelfClosingTagToken:
		tk.kind = selfClosingTagToken
	default:
		tk.kind = otherToken
	}
	if tk.kind != textToken && tk.kind != otherToken {
		name, more := h.z.TagName()
		tk.name = string(name)
		if tk.kind != endTagToken {
			h.attrs = map[string]string{}
			for more {
				var k, v []byte
				k, v, more = h.z.TagAttr()
				if _, seen := h.attrs[string(k)]; !seen {
					h.attrs[string(k)] = string(v)
				}
			}
		}
	}
	return tk, true
}

func (h *htmlTokens) attr(key string) string { return h.attrs[key] }

// TestScannerMatchesHTML: on the pages Cairn renders (the bundled runbooks,
// the patch test's page), the scanner cuts every page into the same parts
// as the x/net/html tokenizer.
func TestScannerMatchesHTML(t *testing.T) {
	b, err := New(Options{Content: "../content"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string][]byte{"patch": renderPatchPage(t, patchBase)}
	for name, f := range res.Files {
		if strings.HasSuffix(name, ".html") {
			pages[name] = f
		}
	}
	cuts := 0
	for name, page := range pages {
		a, b := splitPage(page), cutPage(page, &htmlTokens{z: html.NewTokenizer(bytes.NewReader(page))})
		if (a == nil) != (b == nil) {
			t.Errorf("%s: scanner cut %v, x/net/html's %v", name, a != nil, b != nil)
			continue
		}
		if a == nil {
			continue
		}
		cuts++
		if len(a.parts) != len(b.parts) || !bytes.Equal(a.skeleton, b.skeleton) || a.hash != b.hash || a.data != b.data {
			t.Errorf("%s: the scanner's cut differs: %d parts against %d", name, len(a.parts), len(b.parts))
			continue
		}
		for i := range a.parts {
			if !bytes.Equal(a.parts[i], b.parts[i]) {
				t.Errorf("%s: part %d differs", name, i)
			}
		}
	}
	if cuts < 4 {
		t.Errorf("only %d runbook pages cut", cuts)
	}
}

// FuzzScannerMatchesHTML: on markup made of what Cairn writes (elements with
// quoted attributes, escaped text, void tags, comments, script and style
// text), the scanner's tokens and attributes are x/net/html's; on any input
// its tokens cover it in order.
func FuzzScannerMatchesHTML(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, "a b")
	f.Add([]byte("any bytes at all"), `x"y<z>`)
	f.Fuzz(func(t *testing.T, plan []byte, text string) {
		// Any input: tokens in order, covering it.
		s := newScanner([]byte(text))
		at := 0
		for {
			tk, ok := s.next()
			if !ok {
				break
			}
			if tk.start != at || tk.end <= tk.start {
				t.Fatalf("%q: token %+v after %d", text, tk, at)
			}
			at = tk.end
		}
		if at != len(text) {
			t.Fatalf("%q: tokens end at %d", text, at)
		}
		// Well-formed markup from plan (Cairn's pages hold no NUL: the
		// Markdown parser replaces it).
		text = strings.ReplaceAll(text, "\x00", "")
		esc := html.EscapeString(text)
		var sb strings.Builder
		var open []string
		names := []string{"div", "p", "section", "span", "ul", "li", "code", "pre", "aside"}
		for i, c := range plan {
			switch c % 8 {
			case 0, 1:
				n := names[int(c/8)%len(names)]
				fmt.Fprintf(&sb, `<%s class="%s x%d" id='i%d' data-a=b%d>`, n, esc, i, i, i)
				open = append(open, n)
			case 2:
				if len(open) > 0 {
					sb.WriteString("</" + open[len(open)-1] + ">")
					open = open[:len(open)-1]
				}
			case 3:
				sb.WriteString(esc)
			case 4:
				sb.WriteString(`<br><hr class="h"><input type="checkbox" checked>`)
			case 5:
				sb.WriteString("<!-- " + strings.ReplaceAll(text, "--", "") + " -->")
			case 6:
				sb.WriteString(`<script type="application/json" id="d">` + strings.ReplaceAll(strings.ReplaceAll(text, "<", `\u003c`), "</", "") + "</script>")
			case 7:
				sb.WriteString(`<style>` + strings.ReplaceAll(text, "<", "") + "</style>")
			}
		}
		page := []byte(sb.String())
		a, b := newScanner(page), &htmlTokens{z: html.NewTokenizer(bytes.NewReader(page))}
		for {
			x, okA := a.next()
			y, okB := b.next()
			if okA != okB {
				t.Fatalf("%q: scanner %v (%+v), x/net/html %v (%+v)", page, okA, x, okB, y)
			}
			if !okA {
				break
			}
			if x != y {
				t.Fatalf("%q: scanner %+v (%q), x/net/html %+v (%q)", page, x, page[x.start:x.end], y, page[y.start:y.end])
			}
			if x.kind == startTagToken || x.kind == selfClosingTagToken {
				for _, k := range []string{"class", "id", "data-a", "type"} {
					if a.attr(k) != b.attr(k) {
						t.Fatalf("%q: %s attribute %q: scanner %q, x/net/html %q", page, x.name, k, a.attr(k), b.attr(k))
					}
				}
			}
		}
	})
}
