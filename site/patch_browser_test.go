package site_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestBrowserEditPatchesPage: under the dev server, an edit of a runbook's
// prose patches the open page in place (no reload: a value typed into the
// form, the scroll position and a mark left on the window stay); an edit
// of another runbook leaves the page alone; an edit of a code block, which
// the page's scripts bring to life, reloads it.
func TestBrowserEditPatchesPage(t *testing.T) {
	dir := t.TempDir()
	page := func(prose, code string) string {
		return "---\ntitle: 패치\nparams:\n  - name: NAME\n    default: world\n---\n\n" +
			"## 첫 단계 {#one}\n\n" + prose + "\n\n```bash {#hello target=local}\necho " + code + " $NAME\n```\n\n" +
			strings.Repeat("긴 설명 문단이에요. 화면을 넘길 만큼 길어요.\n\n", 60) +
			"## 둘째 단계 {#two}\n\n끝 문단이에요.\n"
	}
	a, other := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	writeFile(t, a, page("처음 문장이에요.", "hello"))
	writeFile(t, other, runbookMD("다른 것", "## 하나 {#x}\n\n다른 문서.\n"))
	base, updates := devServer(t, dir)
	wait := func(what string) {
		t.Helper()
		select {
		case <-updates:
		case <-time.After(10 * time.Second):
			t.Fatalf("no rebuild after %s", what)
		}
	}
	bctx := testrig.Browser(t)
	pg := testrig.NewPage(t, bctx, 2*time.Minute, &strings.Builder{},
		`document.documentElement.getAttribute("data-patched") + " " + sessionStorage.getItem("cairn:patch-miss")`)
	// reloaded waits until a new page (the mark gone) is set up and js is
	// true: the reload cuts a poll short, so it asks again until the new
	// page answers.
	reloaded := func(what, js string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`!window.__mark && !!window.Cairn && !!Cairn.ready && (`+js+`)`))
			if err == nil && v {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page did not reload %s: %v", what, err)
			}
		}
	}
	pg.Run("open the page", chromedp.Navigate(base+"a/"))
	pg.Poll("the page is set up", `window.Cairn && Cairn.ready`, 20*time.Second)
	pg.Eval(`(Cairn.setParam("NAME", "typed"), window.scrollTo(0, 900), window.__mark = "kept", "")`)
	pg.Poll("scrolled", `window.scrollY > 800`, 5*time.Second)

	writeFile(t, a, page("고친 문장이에요.", "hello"))
	wait("the prose edit")
	pg.Poll("the edit shows", `document.querySelector("#one").textContent.indexOf("고친 문장이에요.") >= 0`, 10*time.Second)
	if why := pg.Eval(`String(sessionStorage.getItem("cairn:patch-miss"))`); why != "null" {
		t.Errorf("the page reloaded instead of patching: %s", why)
	}
	if got := pg.Eval(`[document.documentElement.getAttribute("data-patched"), document.documentElement.getAttribute("data-patched-via"), window.__mark, Cairn.values().NAME, String(window.scrollY > 800)].join(" ")`); got != "1 event kept typed true" {
		t.Errorf("after a prose edit: patched, via, mark, value, scrolled = %q; want the page patched in place from the event (1 event kept typed true)", got)
	}
	// A page that is not the one the server worked its patch out from (its
	// hash differs) fetches itself and patches from that.
	pg.Eval(`(document.querySelector("main article[data-hash]").setAttribute("data-hash", "stale"), "")`)
	writeFile(t, a, page("다시 고친 문장이에요.", "hello"))
	wait("the second prose edit")
	pg.Poll("the second edit shows", `document.querySelector("#one").textContent.indexOf("다시 고친 문장이에요.") >= 0`, 10*time.Second)
	if got := pg.Eval(`[document.documentElement.getAttribute("data-patched"), document.documentElement.getAttribute("data-patched-via"), window.__mark].join(" ")`); got != "2 fetch kept" {
		t.Errorf("after an edit the page's hash does not match: patched, via, mark = %q; want 2 fetch kept", got)
	}
	if got := pg.Eval(`document.querySelector("#block-hello pre").textContent`); !strings.Contains(got, "typed") {
		t.Errorf("the code block no longer shows the typed value: %q", got)
	}

	writeFile(t, other, runbookMD("다른 것", "## 하나 {#x}\n\n다른 문서, 고침.\n"))
	wait("the other runbook's edit")
	time.Sleep(500 * time.Millisecond) // a reload would have begun
	if got := pg.Eval(`String(window.__mark) + " " + document.documentElement.getAttribute("data-patched")`); got != "kept 2" {
		t.Errorf("after another runbook's edit: %q, want the page untouched (kept 2)", got)
	}

	// Another runbook's new title changes the navigation on this page too.
	writeFile(t, other, runbookMD("다른 이름", "## 하나 {#x}\n\n다른 문서, 고침.\n"))
	wait("the other runbook's new title")
	reloaded("with the new navigation", `document.getElementById("sidebar").textContent.indexOf("다른 이름") >= 0`)
	// (The pager names the neighbour too, so either reason may come first.)
	if why := pg.Eval(`String(sessionStorage.getItem("cairn:patch-miss"))`); why != "the navigation" && why != "outside the content" {
		t.Errorf("the reload's reason: %q, want the navigation (or the pager)", why)
	}
	pg.Eval(`(window.__mark = "kept", "")`)

	writeFile(t, a, page("고친 문장이에요.", "goodbye"))
	wait("the code edit")
	reloaded("with the new code", `document.querySelector("#block-hello pre").textContent.indexOf("goodbye") >= 0`)
	if why := pg.Eval(`String(sessionStorage.getItem("cairn:patch-miss"))`); why != "blocks or parameters" {
		t.Errorf("the reload's reason: %q, want the blocks changed (the code block's hash)", why)
	}
}
