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

// TestBrowserReaderAids: on the bundled kubeadm runbook, the parameters and
// steps the chosen topology does not use are hidden and collapsed (and can
// be shown); long lines can be wrapped with one click, kept across pages;
// prev/next, "edit this page" and tag chips lead where they say.
func TestBrowserReaderAids(t *testing.T) {
	b, err := site.New(site.Options{Content: filepath.Join("..", "content"), EditURL: "https://git.example/edit/main/content/{path}"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "public")
	if err := site.WriteDir(dir, res.Files); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	do(t, ctx, chromedp.EmulateViewport(1280, 900))
	open(t, ctx, srv.URL+"/kubeadm-ha/")

	// Stacked etcd (the default): ETCD_HOSTS is not used, so it is hidden
	// behind one line; the external-etcd step is collapsed to its title.
	if got := eval[string](t, ctx, `getComputedStyle(document.querySelector('.param[data-name="ETCD_HOSTS"]')).display`); got != "none" {
		t.Errorf("ETCD_HOSTS is shown (display %q) though stacked etcd does not use it", got)
	}
	if got := eval[string](t, ctx, `document.querySelector(".params-na:not([hidden])") ? document.querySelector(".params-na").textContent : ""`); !strings.Contains(got, "숨겼어요") {
		t.Errorf("no note about hidden parameters: %q", got)
	}
	step := `document.getElementById("prepare-external-etcd")`
	if h := eval[float64](t, ctx, step+`.getBoundingClientRect().height`); h > 120 {
		t.Errorf("the external-etcd step is not collapsed: %.0fpx high", h)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`#prepare-external-etcd .step-title button.na-badge`)))
	if h := eval[float64](t, ctx, step+`.getBoundingClientRect().height`); h < 200 {
		t.Errorf("the collapsed step does not open: %.0fpx high", h)
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`.params-na-toggle`)))
	if got := eval[string](t, ctx, `getComputedStyle(document.querySelector('.param[data-name="ETCD_HOSTS"]')).display`); got == "none" {
		t.Error("Show does not show the hidden parameters")
	}
	// Choosing external etcd brings ETCD_HOSTS back by itself.
	eval[string](t, ctx, `(document.querySelector('.params').classList.remove("show-na"), "")`)
	do(t, ctx, chromedp.Click(chromedp.CSS(`.tabs[data-param="ETCD_TOPOLOGY"] .tab[data-value="external"]`)))
	if got := eval[string](t, ctx, `getComputedStyle(document.querySelector('.param[data-name="ETCD_HOSTS"]')).display`); got == "none" {
		t.Error("ETCD_HOSTS stays hidden with external etcd")
	}

	// Long lines: some blocks scroll sideways at 1280 px until ↵ wraps them
	// all; the choice holds on the next page.
	const scrolling = `Array.from(document.querySelectorAll(".cb > pre")).filter(p => p.offsetParent && p.scrollWidth > p.clientWidth + 1).length`
	if n := eval[int](t, ctx, scrolling); n == 0 {
		t.Log("no block scrolls sideways at 1280 px")
	}
	do(t, ctx, chromedp.Click(chromedp.CSS(`.cb-wrap`)))
	if n := eval[int](t, ctx, scrolling); n != 0 {
		t.Errorf("%d blocks still scroll sideways with wrapping on", n)
	}
	open(t, ctx, srv.URL+"/cilium-multipool/")
	if n := eval[int](t, ctx, scrolling); n != 0 || !eval[bool](t, ctx, `document.documentElement.classList.contains("code-wrap")`) {
		t.Errorf("wrapping did not hold on the next page (%d blocks scroll)", n)
	}

	// Previous/next, edit, tags.
	if got := eval[string](t, ctx, `document.querySelector(".edit-link a").href`); got != "https://git.example/edit/main/content/cilium-multipool.md" {
		t.Errorf("edit link %q", got)
	}
	next := eval[string](t, ctx, `(document.querySelector(".pager-next")||{}).href || ""`)
	prev := eval[string](t, ctx, `(document.querySelector(".pager-prev")||{}).href || ""`)
	if next == "" && prev == "" {
		t.Error("no previous/next link")
	}
	tag := eval[string](t, ctx, `document.querySelector(".meta-tags a.chip").textContent`)
	open(t, ctx, eval[string](t, ctx, `document.querySelector(".meta-tags a.chip").href`)) // what a click follows
	waitFor(t, ctx, `document.querySelector(".tag-filter")`)
	shown := eval[string](t, ctx, `Array.from(document.querySelectorAll(".cards > .card:not([hidden]) .card-title")).map(e => e.textContent.trim()).join("|")`)
	all := eval[int](t, ctx, `document.querySelectorAll(".cards > .card").length`)
	if shown == "" || strings.Count(shown, "|")+1 >= all && all > 1 {
		t.Errorf("tag %q: cards shown %q of %d", tag, shown, all)
	}
}
