package site_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox/testrig"
	"github.com/cairn-dev/cairn/site"
)

// TestBrowserCompactNav: on a site with more than site.NavInlineMax
// runbooks, a page carries only its own runbook in the sidebar and the page
// script fills in the rest from nav.js, in order, over HTTP and from file://.
func TestBrowserCompactNav(t *testing.T) {
	content := t.TempDir()
	n := site.NavInlineMax + 5
	for i := 0; i < n; i++ {
		md := fmt.Sprintf("---\ntitle: Runbook %03d\nweight: %d\n---\n## Step one {#one}\n\ntext\n\n## Step two {#two}\n\ntext\n", i, i)
		if err := os.WriteFile(filepath.Join(content, fmt.Sprintf("r%03d.md", i)), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := buildSite(t, content)
	page, _ := os.ReadFile(filepath.Join(dir, "r010", "index.html"))
	if strings.Count(string(page), `<li class="nav-runbook`) > 2 {
		t.Fatalf("a compact page lists other runbooks itself")
	}
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	w := &pageWatch{allowed: []string{srv.URL + "/", "file://" + dir + "/"}}
	w.listen(t, ctx)
	for _, u := range []string{srv.URL + "/r010/", "file://" + filepath.Join(dir, "r010", "index.html")} {
		open(t, ctx, u)
		waitFor(t, ctx, `document.querySelector("#sidebar ul[data-filled]")`)
		got := eval[string](t, ctx, `Array.from(document.querySelectorAll("#sidebar .nav-runbook > a")).map(a => a.textContent).join("|")`)
		items := strings.Split(got, "|")
		if len(items) != n || items[0] != "Runbook 000" || items[10] != "Runbook 010" || items[n-1] != fmt.Sprintf("Runbook %03d", n-1) {
			t.Errorf("%s: sidebar = %d items %q…", u, len(items), items[:min(3, len(items))])
		}
		if steps := eval[int](t, ctx, `document.querySelectorAll("#sidebar .nav-runbook.current .nav-steps li").length`); steps != 2 {
			t.Errorf("%s: the current runbook shows %d steps", u, steps)
		}
		if strings.HasPrefix(u, "file://") {
			if href := eval[string](t, ctx, `document.querySelector("#sidebar .nav-runbook:not(.current) a").getAttribute("href")`); !strings.HasSuffix(href, "/index.html") {
				t.Errorf("file:// link %q", href)
			}
		}
		w.check(t, u)
	}
}

// TestBrowserErrorOverlay: a broken edit under serve shows the problems in
// a compact panel that can be closed and that leaves the page usable; it
// stays closed until the problems change.
func TestBrowserErrorOverlay(t *testing.T) {
	ctx := testrig.Browser(t)
	dir := t.TempDir()
	a := filepath.Join(dir, "a.md")
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n처음\n"))
	base, _ := devServer(t, dir)
	open(t, ctx, base+"a/")
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n```bash {target=local when='X = 1'}\n```\n"))
	waitFor(t, ctx, `document.getElementById("cairn-errors") && !document.getElementById("cairn-errors").hidden`)
	if h := eval[float64](t, ctx, `document.getElementById("cairn-errors").getBoundingClientRect().height / window.innerHeight`); h > 0.34 {
		t.Errorf("the panel covers %.0f%% of the window", h*100)
	}
	if got := eval[string](t, ctx, `document.getElementById("cairn-errors").textContent`); !strings.Contains(got, "1 problem") || !strings.Contains(got, "a.md:") {
		t.Errorf("panel: %q", got)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(".cairn-errors-close")))
	waitFor(t, ctx, `document.getElementById("cairn-errors").hidden`)
	// Nothing of it takes clicks any more.
	if hit := eval[string](t, ctx, `(document.elementFromPoint(window.innerWidth/2, window.innerHeight-20)||{}).id||""`); hit == "cairn-errors" {
		t.Error("the closed panel still takes clicks")
	}
	// Another broken edit: new problems, shown again.
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n```bash {target=lcoal}\n```\n"))
	waitFor(t, ctx, `!document.getElementById("cairn-errors").hidden`)
}
