package site

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
