package site_test

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestAccessibility runs axe-core (WCAG 2.1 A and AA) in real Chromium on
// every page of the bundled site: the index, each runbook and the 404
// page, in the light and the dark theme, with the parameters' sandbox
// defaults filled in and with a not-applicable step shown. It must find
// nothing.
func TestAccessibility(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	axe := testrig.Axe(t)
	dir := buildSite(t, filepath.Join("..", "content"))
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	pages := []string{"", "no-such-page/"}
	found, _ := filepath.Glob(filepath.Join(dir, "*", "index.html"))
	for _, p := range found {
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		pages = append(pages, filepath.ToSlash(rel)+"/")
	}
	sort.Strings(pages)
	for _, theme := range []string{"light", "dark"} {
		for _, page := range pages {
			do(t, ctx, chromedp.Navigate(srv.URL+"/"+page))
			waitFor(t, ctx, "document.readyState === 'complete'")
			eval[string](t, ctx, fmt.Sprintf(`(document.documentElement.setAttribute("data-theme", %q), "")`, theme))
			do(t, ctx, chromedp.Sleep(400*time.Millisecond)) // the theme's colour transitions
			vs, err := testrig.RunAxe(ctx, axe)
			if err != nil {
				t.Fatalf("/%s: %v", page, err)
			}
			for _, v := range vs {
				t.Errorf("/%s (%s): %s", page, theme, v)
			}
		}
	}
}

// TestKeyboardBlocks: a skip link leads to the first step; j and k move
// between the blocks that apply (to each one's Run button), outside text
// fields.
func TestKeyboardBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	dir := buildSite(t, filepath.Join("..", "content"))
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	open(t, ctx, srv.URL+"/practice/")
	if got := eval[string](t, ctx, `Array.from(document.querySelectorAll(".skip-link")).map(a => a.textContent + " " + a.getAttribute("href")).join(" | ")`); got != "본문으로 건너뛰기 #main | 첫 단계로 건너뛰기 #"+eval[string](t, ctx, `document.querySelector("section.step").id`) {
		t.Errorf("skip links: %q", got)
	}
	focused := func() string {
		return eval[string](t, ctx, `(function(){var b=document.activeElement.closest(".cb[data-block]"); return b ? b.getAttribute("data-block") + " " + document.activeElement.className : document.activeElement.tagName})()`)
	}
	ids := eval[[]string](t, ctx, `Array.from(document.querySelectorAll(".cb[data-block]")).filter(b => b.offsetParent !== null && !b.closest(".is-na:not(.na-open)")).map(b => b.getAttribute("data-block"))`)
	if len(ids) < 3 {
		t.Fatalf("blocks: %v", ids)
	}
	do(t, ctx, chromedp.KeyEvent("j"))
	if got := focused(); got != ids[0]+" cb-run" {
		t.Errorf("j from the top: %q, want %s's Run", got, ids[0])
	}
	do(t, ctx, chromedp.KeyEvent("j"), chromedp.KeyEvent("j"))
	if got := focused(); got != ids[2]+" cb-run" {
		t.Errorf("j j: %q, want %s's Run", got, ids[2])
	}
	do(t, ctx, chromedp.KeyEvent("k"))
	if got := focused(); got != ids[1]+" cb-run" {
		t.Errorf("k: %q, want %s's Run", got, ids[1])
	}
	// In a text field j is a letter.
	do(t, ctx, chromedp.Focus(chromedp.CSS(`form.params input[type=text], form.params input:not([type])`)), chromedp.KeyEvent("j"))
	if got := focused(); got != "INPUT" {
		t.Errorf("j in a field moved to %q", got)
	}
}
