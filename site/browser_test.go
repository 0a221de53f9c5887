package site_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cairn-dev/cairn/sandbox/testrig"
	"github.com/cairn-dev/cairn/site"
)

var writeScreenshots = flag.Bool("screenshots", false, "write docs/screenshot.png and docs/screenshot-phone.png from the browser test")

// browserContent is a small site written for this test: a Korean runbook with
// every page feature and an English one.
const browserContent = "testdata/browser/content"

// pageWatch collects what a page must not do: console errors, uncaught
// exceptions, browser log errors, and requests to anything but the test
// server (or data: URLs, which are not requests).
type pageWatch struct {
	mu       sync.Mutex
	allowed  []string // URL prefixes
	problems []string
	requests []string
}

func (w *pageWatch) listen(t *testing.T, ctx context.Context) {
	t.Helper()
	err := chromedp.Listen(ctx, func(ev any) {
		w.mu.Lock()
		defer w.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				w.problems = append(w.problems, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			w.problems = append(w.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				w.problems = append(w.problems, "browser log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			w.requests = append(w.requests, ev.Request.URL)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// check fails t for every problem and every request that left the allowed
// prefixes, then forgets them.
func (w *pageWatch) check(t *testing.T, when string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		t.Errorf("%s: %s", when, p)
	}
	for _, u := range w.requests {
		ok := strings.HasPrefix(u, "data:")
		for _, a := range w.allowed {
			ok = ok || strings.HasPrefix(u, a)
		}
		if !ok {
			t.Errorf("%s: request to %s, which is not the local test server", when, u)
		}
	}
	w.problems, w.requests = nil, nil
}

func (w *pageWatch) sawRequest(suffix string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, u := range w.requests {
		if strings.HasSuffix(u, suffix) {
			return true
		}
	}
	return false
}

// buildSite builds content into a fresh folder and returns it.
func buildSite(t *testing.T, content string) string {
	t.Helper()
	b, err := site.New(site.Options{Content: content})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diagnostics) > 0 {
		t.Fatalf("%s has problems:\n%v", content, res.Diagnostics.Error())
	}
	dir := filepath.Join(t.TempDir(), "public")
	if err := site.WriteDir(dir, res.Files); err != nil {
		t.Fatal(err)
	}
	return dir
}

// serve serves dir on 127.0.0.1 (httptest's default) with the site's 404 page.
func serve(t *testing.T, dir string) *httptest.Server {
	t.Helper()
	fileServer := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := filepath.Join(dir, filepath.FromSlash(r.URL.Path))
		if _, err := os.Stat(p); err != nil {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusNotFound)
			data, _ := os.ReadFile(filepath.Join(dir, "404.html"))
			w.Write(data)
			return
		}
		fileServer.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	if u, _ := url.Parse(srv.URL); u.Hostname() != "127.0.0.1" {
		t.Fatalf("test server listens on %s, want 127.0.0.1", u.Host)
	}
	return srv
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(actx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	run(t, ctx, chromedp.Steps(steps...))
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	return run(t, ctx, chromedp.Evaluate[T](js))
}

// open navigates and waits until the page script has started.
func open(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(u))
	waitFor(t, ctx, "window.Cairn && window.Cairn.ready === true")
}

func waitFor(t *testing.T, ctx context.Context, js string) {
	t.Helper()
	run(t, ctx, chromedp.Poll[bool]("!!("+js+")", chromedp.WithPollingTimeout(10*time.Second)))
}

func typeText(t *testing.T, ctx context.Context, sel, text string) {
	t.Helper()
	do(t, ctx, chromedp.Focus(chromedp.CSS(sel)))
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
		t.Fatal(err)
	}
}

func press(t *testing.T, ctx context.Context, key string) {
	t.Helper()
	do(t, ctx, chromedp.KeyEvent(key))
}

// typeChar presses a printable key as a browser does: one keyDown that
// carries the text, so a handler that cancels the keydown also cancels the
// character (chromedp.KeyEvent sends the character as a separate event).
func typeChar(t *testing.T, ctx context.Context, ch, code string) {
	t.Helper()
	for _, p := range []input.DispatchKeyEventParams{
		{Type: input.DispatchKeyEventTypeKeyDown, Key: ch, Code: code, Text: ch, UnmodifiedText: ch},
		{Type: input.DispatchKeyEventTypeKeyUp, Key: ch, Code: code},
	} {
		if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserRunbookPage drives a built runbook page in headless Chromium:
// parameters, substitution, copy, progress, tabs, conditions, search, dark
// mode, and the phone layout, with no console error and no request that
// leaves the local test server.
func TestBrowserRunbookPage(t *testing.T) {
	dir := buildSite(t, browserContent)
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	w := &pageWatch{allowed: []string{srv.URL + "/"}}
	w.listen(t, ctx)
	// Let the page use the real clipboard, so the test can read it back.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: srv.URL,
		}); err != nil {
			t.Fatal(err)
		}
	}
	do(t, ctx, chromedp.EmulateViewport(1280, 900))
	page := srv.URL + "/kubeadm-ha/"
	open(t, ctx, page)
	// Start from a clean browser profile state for this origin.
	eval[chromedp.Void](t, ctx, "localStorage.clear()")
	open(t, ctx, page)

	// Defaults are prefilled; a reference without a value keeps $NAME.
	if got := eval[string](t, ctx, `document.querySelector('#block-nc-lb pre code').textContent`); got != "nc -zv \"$LOAD_BALANCER_DNS\" \"6443\"\n" {
		t.Errorf("command before input = %q", got)
	}

	t.Run("parameter substitution and copy", func(t *testing.T) {
		typeText(t, ctx, "#p-LOAD_BALANCER_DNS", "lb.example.com")
		got := eval[string](t, ctx, `document.querySelector('#block-nc-lb pre code').textContent`)
		if got != "nc -zv \"lb.example.com\" \"6443\"\n" {
			t.Errorf("substituted command = %q", got)
		}
		spans := eval[[]string](t, ctx, `[...document.querySelectorAll('span.prm[data-p="LOAD_BALANCER_DNS"]')].map(s => s.textContent + "|" + s.dataset.orig)`)
		if len(spans) < 3 {
			t.Fatalf("only %d references to LOAD_BALANCER_DNS", len(spans))
		}
		for _, s := range spans {
			if s != "lb.example.com|$LOAD_BALANCER_DNS" {
				t.Errorf("reference shows %q, want lb.example.com (orig $LOAD_BALANCER_DNS)", s)
			}
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#block-nc-lb .cb-copy")))
		waitFor(t, ctx, `window.Cairn.lastCopied !== null`)
		// The paste form (runbook/paste): the values as assignments, the body
		// as written, run as the executor runs it.
		got = eval[string](t, ctx, `window.Cairn.lastCopied`)
		for _, want := range []string{"LOAD_BALANCER_DNS='lb.example.com'\n", "LOAD_BALANCER_PORT='6443'\n", "\nnc -zv \"$LOAD_BALANCER_DNS\" \"$LOAD_BALANCER_PORT\"\n", "bash --noprofile --norc -euo pipefail -c \"$CAIRN_BODY\" </dev/null"} {
			if !strings.Contains(got, want) {
				t.Errorf("copied %q, want it to hold %q", got, want)
			}
		}
		clip := run(t, ctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
		if clip != got {
			t.Errorf("clipboard holds %q", clip)
		}
		waitFor(t, ctx, `document.querySelector('#block-nc-lb .cb-copy').textContent === '복사됨'`)

		// A multi-line block with ${NAME}: the copy has every value.
		do(t, ctx, chromedp.Click(chromedp.CSS("#block-init .cb-copy")))
		copied := eval[string](t, ctx, `window.Cairn.lastCopied`)
		for _, want := range []string{`LOAD_BALANCER_DNS='lb.example.com'`, `POD_NETWORK_CIDR='10.244.0.0/16'`, "--upload-certs"} {
			if !strings.Contains(copied, want) {
				t.Errorf("init copy lacks %s:\n%s", want, copied)
			}
		}

		// Clearing the value restores the reference, highlighter markup included.
		do(t, ctx, chromedp.Focus(chromedp.CSS("#p-LOAD_BALANCER_DNS")))
		eval[chromedp.Void](t, ctx, `(() => { const i = document.querySelector('#p-LOAD_BALANCER_DNS'); i.select(); })()`)
		press(t, ctx, "\b")
		if got := eval[string](t, ctx, `document.querySelector('#block-nc-lb span.prm[data-p="LOAD_BALANCER_DNS"]').innerHTML`); !strings.Contains(got, "$LOAD_BALANCER_DNS") {
			t.Errorf("cleared reference shows %q", got)
		}
		// Required and empty: an inline message after the field was touched.
		do(t, ctx, chromedp.Focus(chromedp.CSS("#p-LOAD_BALANCER_PORT")))
		if got := eval[string](t, ctx, `document.querySelector('#e-LOAD_BALANCER_DNS').hidden ? '' : document.querySelector('#e-LOAD_BALANCER_DNS').textContent`); !strings.Contains(got, "필수") {
			t.Errorf("required message = %q", got)
		}
		// Pattern check: '_' is not allowed by the runbook's pattern.
		typeText(t, ctx, "#p-LOAD_BALANCER_DNS", "bad_name")
		do(t, ctx, chromedp.Focus(chromedp.CSS("#p-LOAD_BALANCER_PORT")))
		if got := eval[string](t, ctx, `document.querySelector('#p-LOAD_BALANCER_DNS').getAttribute('aria-invalid')`); got != "true" {
			t.Errorf("aria-invalid = %q for a value against the pattern", got)
		}
		// Said in words, and the invalid value is not put into the commands.
		if got := eval[string](t, ctx, `document.querySelector('#e-LOAD_BALANCER_DNS').textContent`); !strings.Contains(got, "형식이 맞지 않아요") {
			t.Errorf("pattern message = %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#block-nc-lb pre').textContent`); strings.Contains(got, "bad_name") || !strings.Contains(got, "$LOAD_BALANCER_DNS") {
			t.Errorf("an invalid value was substituted:\n%s", got)
		}
		eval[chromedp.Void](t, ctx, `document.querySelector('#p-LOAD_BALANCER_DNS').select()`)
		typeText(t, ctx, "#p-LOAD_BALANCER_DNS", "lb.example.com")
		if got := eval[string](t, ctx, `String(document.querySelector('#p-LOAD_BALANCER_DNS').getAttribute('aria-invalid'))`); got != "null" {
			t.Errorf("aria-invalid = %q for a good value", got)
		}

		// A secret value is neither shown in commands nor stored.
		typeText(t, ctx, "#p-REGISTRY_PASSWORD", "hunter2-secret")
		shown := eval[string](t, ctx, `document.querySelector('#block-join pre').textContent`)
		if strings.Contains(shown, "hunter2") || !strings.Contains(shown, "$REGISTRY_PASSWORD") {
			t.Errorf("secret shows in the command:\n%s", shown)
		}
		stored := eval[string](t, ctx, `JSON.stringify(localStorage)`)
		if strings.Contains(stored, "hunter2") || strings.Contains(stored, "REGISTRY_PASSWORD") {
			t.Errorf("localStorage holds the secret: %s", stored)
		}
		if !strings.Contains(stored, "lb.example.com") {
			t.Errorf("localStorage lacks the parameter value: %s", stored)
		}
	})

	t.Run("manual step text", func(t *testing.T) {
		if got := eval[string](t, ctx, `document.querySelector('#block-lb-console pre').textContent`); !strings.Contains(got, "관리 화면에서 cp0 노드가") {
			t.Errorf("manual block = %q, want FIRST_CP filled in", got)
		}
	})

	t.Run("conditions", func(t *testing.T) {
		// REFRESH_JOIN is false: its block is greyed out; ticking the box applies it.
		if !eval[bool](t, ctx, `document.querySelector('#block-refresh-join').classList.contains('is-na')`) {
			t.Error("block with a false condition is not greyed out")
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#p-REFRESH_JOIN")))
		if eval[bool](t, ctx, `document.querySelector('#block-refresh-join').classList.contains('is-na')`) {
			t.Error("block stays greyed out after its condition became true")
		}
		do(t, ctx, chromedp.Click(chromedp.CSS("#p-REFRESH_JOIN")))
		if !eval[bool](t, ctx, `document.querySelector('section.step#copy-etcd-certs').classList.contains('is-na')`) {
			t.Error("external-etcd step is not greyed out for stacked")
		}
	})

	t.Run("progress survives reload", func(t *testing.T) {
		do(t, ctx, chromedp.Click(chromedp.CSS(`input.step-done[data-step="check-lb"]`)))
		// 6 steps, one not applicable (external etcd) for stacked.
		if got := eval[string](t, ctx, `document.querySelector('.progress-toc [data-progress-count]').textContent`); got != "1/5" {
			t.Errorf("progress = %q, want 1/5", got)
		}
		open(t, ctx, page)
		if !eval[bool](t, ctx, `document.querySelector('input.step-done[data-step="check-lb"]').checked`) {
			t.Error("ticked step is not ticked after reload")
		}
		if !eval[bool](t, ctx, `document.querySelector('section.step#check-lb').classList.contains('is-done')`) {
			t.Error("ticked step is not marked done after reload")
		}
		if got := eval[string](t, ctx, `document.querySelector('#p-LOAD_BALANCER_DNS').value`); got != "lb.example.com" {
			t.Errorf("parameter after reload = %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('#p-REGISTRY_PASSWORD').value`); got != "" {
			t.Errorf("secret parameter came back after reload: %q", got)
		}
		if got := eval[string](t, ctx, `document.querySelector('.toc-list li[data-step="check-lb"]').className`); !strings.Contains(got, "done") {
			t.Errorf("TOC entry class = %q, want done", got)
		}
	})

	t.Run("tabs bound to a parameter", func(t *testing.T) {
		tabsel := `.tabs[data-param="ETCD_TOPOLOGY"]`
		do(t, ctx, chromedp.Click(chromedp.CSS(tabsel+` .tab[data-value="external"]`)))
		if got := eval[string](t, ctx, `document.querySelector('#p-ETCD_TOPOLOGY').value`); got != "external" {
			t.Errorf("select after choosing the tab = %q", got)
		}
		hidden := eval[[]bool](t, ctx, `[...document.querySelectorAll('`+tabsel+` > .tab-panel')].map(p => p.hidden)`)
		if len(hidden) != 2 || !hidden[0] || hidden[1] {
			t.Errorf("panel hidden states = %v, want [true false]", hidden)
		}
		if eval[bool](t, ctx, `document.querySelector('section.step#copy-etcd-certs').classList.contains('is-na')`) {
			t.Error("external-etcd step still greyed out for external")
		}
		if got := eval[string](t, ctx, `document.querySelector('.progress-toc [data-progress-count]').textContent`); got != "1/6" {
			t.Errorf("progress = %q, want 1/6", got)
		}
		// The tab row scrolls sideways when it must, never up and down (a
		// tab hanging over the row's edge gave it a vertical scrollbar).
		if got := eval[[]int](t, ctx, `[...document.querySelectorAll('.tab-list')].filter(l => l.scrollHeight > l.clientHeight).map(l => l.scrollHeight - l.clientHeight)`); len(got) > 0 {
			t.Errorf("tab rows overflow vertically by %v px", got)
		}
		// Keyboard: arrow keys move the selection, with roving tabindex.
		press(t, ctx, kb.ArrowLeft)
		if got := eval[string](t, ctx, `document.activeElement.dataset.value + ' ' + document.activeElement.tabIndex + ' ' + document.querySelector('#p-ETCD_TOPOLOGY').value`); got != "stacked 0 stacked" {
			t.Errorf("after ArrowLeft: focused tab, tabindex, select = %q", got)
		}
		if got := eval[int](t, ctx, `document.querySelector('`+tabsel+` .tab[data-value="external"]').tabIndex`); got != -1 {
			t.Errorf("unselected tab tabindex = %d", got)
		}
		// And the other way: the select drives the tabs.
		do(t, ctx, chromedp.Focus(chromedp.CSS("#p-ETCD_TOPOLOGY")))
		press(t, ctx, kb.ArrowDown)
		waitFor(t, ctx, `document.querySelector('#p-ETCD_TOPOLOGY').value === 'external'`)
		if got := eval[string](t, ctx, `document.querySelector('`+tabsel+` .tab[aria-selected="true"]').dataset.value`); got != "external" {
			t.Errorf("tab after changing the select = %q", got)
		}
		eval[chromedp.Void](t, ctx, `Cairn.setParam('ETCD_TOPOLOGY', 'stacked')`)
	})

	t.Run("korean search", func(t *testing.T) {
		do(t, ctx, chromedp.Click(chromedp.CSS("h1")))
		typeChar(t, ctx, "/", "Slash")
		if got := eval[string](t, ctx, `document.activeElement.id + '|' + document.activeElement.value`); got != "search-input|" {
			t.Fatalf("after '/': focus|value = %q, want the empty search box", got)
		}
		typeText(t, ctx, "#search-input", "인증서")
		waitFor(t, ctx, `document.querySelectorAll('#search-results .sr-item').length > 0`)
		if !w.sawRequest("/search.json") {
			t.Error("the index did not come from search.json")
		}
		marks := eval[[]string](t, ctx, `[...document.querySelectorAll('#search-results mark')].map(m => m.textContent)`)
		if len(marks) == 0 || marks[0] != "인증서" {
			t.Errorf("highlighted fragments = %q", marks)
		}
		first := eval[string](t, ctx, `document.querySelector('#search-results .sr-item').getAttribute('href')`)
		if !strings.HasSuffix(first, "kubeadm-ha/#copy-etcd-certs") {
			t.Errorf("first result links to %q", first)
		}
		press(t, ctx, kb.ArrowDown)
		if got := eval[string](t, ctx, `document.querySelector('#search-input').getAttribute('aria-activedescendant')`); got != "sr-0" {
			t.Errorf("aria-activedescendant after ArrowDown = %q", got)
		}
		press(t, ctx, kb.Escape)
		if !eval[bool](t, ctx, `document.querySelector('#search-results').hidden`) {
			t.Error("Esc does not close the results")
		}
		// Decomposed Hangul (NFD) finds the same text.
		eval[chromedp.Void](t, ctx, `Cairn.search('인증서'.normalize('NFD'))`)
		waitFor(t, ctx, `document.querySelectorAll('#search-results .sr-item').length > 0`)
		eval[chromedp.Void](t, ctx, `Cairn.search('zzzz-nothing')`)
		waitFor(t, ctx, `document.querySelector('#search-results .sr-empty')`)
		press(t, ctx, kb.Escape)
	})

	t.Run("dark mode", func(t *testing.T) {
		if got := eval[string](t, ctx, `document.documentElement.dataset.theme`); got != "light" {
			t.Errorf("initial theme = %q", got)
		}
		do(t, ctx, chromedp.Click(chromedp.CSS(".theme-toggle")))
		if got := eval[string](t, ctx, `document.documentElement.dataset.theme + ' ' + localStorage.getItem('cairn:theme')`); got != "dark dark" {
			t.Errorf("theme after toggle = %q", got)
		}
		bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
		if bg != "rgb(15, 19, 24)" {
			t.Errorf("dark background = %s", bg)
		}
		open(t, ctx, page)
		if got := eval[string](t, ctx, `document.documentElement.dataset.theme`); got != "dark" {
			t.Errorf("theme after reload = %q", got)
		}
		do(t, ctx, chromedp.Click(chromedp.CSS(".theme-toggle")))
	})

	t.Run("run button is inert with a reason", func(t *testing.T) {
		got := eval[string](t, ctx, `(() => { const b = document.querySelector('#block-nc-lb .cb-run'); return b.getAttribute('aria-disabled') + '|' + b.title; })()`)
		if !strings.HasPrefix(got, "true|") || len(got) < 10 {
			t.Errorf("run button aria-disabled|title = %q", got)
		}
		called := eval[bool](t, ctx, `(() => { let called = false; window.Cairn.enableRun(() => { called = true; }); window.confirm = () => true;
			document.querySelector('#block-nc-lb .cb-run').click(); return called; })()`)
		if !called {
			t.Error("Cairn.enableRun does not wire the run button")
		}
	})

	t.Run("reset progress", func(t *testing.T) {
		eval[chromedp.Void](t, ctx, `window.confirm = () => true`)
		do(t, ctx, chromedp.Click(chromedp.CSS(".progress-toc .progress-reset")))
		if got := eval[string](t, ctx, `document.querySelector('.progress-toc [data-progress-count]').textContent + ' ' + localStorage.getItem('cairn:kubeadm-ha:done')`); got != "0/5 null" {
			t.Errorf("after reset: %q", got)
		}
	})

	t.Run("phone layout", func(t *testing.T) {
		do(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
		open(t, ctx, page)
		if eval[bool](t, ctx, `document.querySelector('#sidebar').getBoundingClientRect().right > 0`) {
			t.Error("sidebar is on screen on a phone before the menu opens")
		}
		do(t, ctx, chromedp.Click(chromedp.CSS(".menu-toggle")))
		waitFor(t, ctx, `document.querySelector('#sidebar').getBoundingClientRect().left >= 0`)
		if got := eval[string](t, ctx, `document.querySelector('.menu-toggle').getAttribute('aria-expanded')`); got != "true" {
			t.Errorf("menu aria-expanded = %q", got)
		}
		press(t, ctx, kb.Escape)
		if got := eval[string](t, ctx, `document.querySelector('.menu-toggle').getAttribute('aria-expanded')`); got != "false" {
			t.Errorf("menu aria-expanded after Esc = %q", got)
		}
		if got := eval[int](t, ctx, `document.documentElement.scrollWidth`); got > 390 {
			t.Errorf("page is %dpx wide on a 390px phone", got)
		}
		do(t, ctx, chromedp.EmulateViewport(1280, 900))
	})

	t.Run("other pages", func(t *testing.T) {
		open(t, ctx, srv.URL+"/")
		if n := eval[int](t, ctx, `document.querySelectorAll('.card').length`); n != 2 {
			t.Errorf("index shows %d runbooks", n)
		}
		open(t, ctx, srv.URL+"/scale-guide/")
		if got := eval[string](t, ctx, `document.querySelector('.cb-copy').textContent`); got != "Copy" {
			t.Errorf("English page copy button = %q", got)
		}
		do(t, ctx, chromedp.Navigate(srv.URL+"/no/such/page/"))
		waitFor(t, ctx, "window.Cairn && window.Cairn.ready")
		if got := eval[string](t, ctx, `document.querySelector('.notfound-title').textContent`); got == "" {
			t.Error("404 page has no title")
		}
	})

	w.mu.Lock()
	// The 404 page is requested on purpose, and Chromium logs its status.
	var kept []string
	for _, p := range w.problems {
		if !strings.Contains(p, "404") {
			kept = append(kept, p)
		}
	}
	w.problems = kept
	w.mu.Unlock()
	w.check(t, "runbook page")

	t.Run("screenshots", func(t *testing.T) {
		shots := map[string][2]int64{"screenshot.png": {1280, 900}, "screenshot-phone.png": {390, 844}}
		for name, size := range shots {
			opts := []chromedp.EmulateViewportOption{}
			if size[0] < 500 {
				opts = append(opts, chromedp.EmulateMobile)
			}
			do(t, ctx, chromedp.EmulateViewport(size[0], size[1], opts...))
			open(t, ctx, page)
			eval[chromedp.Void](t, ctx, `(() => {
				localStorage.setItem('cairn:kubeadm-ha:done', JSON.stringify(['check-lb']));
				Cairn.setParam('LOAD_BALANCER_DNS', 'lb.example.com');
			})()`)
			open(t, ctx, page)
			// Show the end of the form and the first steps: filled values in commands.
			scroll := `document.querySelector('.rb-content').getBoundingClientRect().top + scrollY - 84`
			if size[0] < 500 {
				scroll = `document.querySelector('#check-lb').getBoundingClientRect().top + scrollY - 120`
			}
			eval[chromedp.Void](t, ctx, `window.scrollTo(0, `+scroll+`)`)
			waitFor(t, ctx, `!document.documentElement.classList.contains('cairn-init')`)
			img := run(t, ctx, chromedp.CaptureScreenshot())
			cfg, err := png.DecodeConfig(bytes.NewReader(img))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if int64(cfg.Width) != size[0] || int64(cfg.Height) != size[1] {
				t.Errorf("%s is %dx%d, want %dx%d", name, cfg.Width, cfg.Height, size[0], size[1])
			}
			out := filepath.Join(t.TempDir(), name)
			if *writeScreenshots {
				out = filepath.Join("..", "docs", name)
			}
			if err := os.WriteFile(out, img, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		w.check(t, "screenshots")
	})
}

// TestBrowserFileURL opens the built site from file://, where fetch cannot
// read search.json: search falls back to search.js, links get index.html.
func TestBrowserFileURL(t *testing.T) {
	dir := buildSite(t, browserContent)
	ctx := testrig.Browser(t)
	base := "file://" + filepath.ToSlash(dir) + "/"
	w := &pageWatch{allowed: []string{base}}
	w.listen(t, ctx)
	open(t, ctx, base+"kubeadm-ha/index.html")
	typeText(t, ctx, "#search-input", "워커")
	waitFor(t, ctx, `document.querySelectorAll('#search-results .sr-item').length > 0`)
	if !w.sawRequest("/search.js") {
		t.Error("search did not load search.js")
	}
	href := eval[string](t, ctx, `document.querySelector('#search-results .sr-item').getAttribute('href')`)
	if !strings.Contains(href, "/index.html#") {
		t.Errorf("result link on file:// = %q, want …/index.html#step", href)
	}
	nav := eval[string](t, ctx, `document.querySelector('.nav-runbook a').getAttribute('href')`)
	if !strings.HasSuffix(nav, "/index.html") {
		t.Errorf("sidebar link on file:// = %q", nav)
	}
	// Copy falls back to execCommand outside a secure context; the text is the same.
	typeText(t, ctx, "#p-LOAD_BALANCER_DNS", "lb.file.test")
	do(t, ctx, chromedp.Click(chromedp.CSS("#block-nc-lb .cb-copy")))
	waitFor(t, ctx, `(window.Cairn.lastCopied || "").indexOf("LOAD_BALANCER_DNS='lb.file.test'") >= 0`)
	w.check(t, "file:// page")
}

// TestBrowserBundledContent opens every page built from the bundled content/
// and fails on any console error or outside request, so the theme keeps
// working with the real runbooks.
func TestBrowserBundledContent(t *testing.T) {
	dir := buildSite(t, filepath.Join("..", "content"))
	srv := serve(t, dir)
	ctx := testrig.Browser(t)
	w := &pageWatch{allowed: []string{srv.URL + "/"}}
	w.listen(t, ctx)
	pages, _ := filepath.Glob(filepath.Join(dir, "*", "index.html"))
	if len(pages) == 0 {
		t.Fatal("no runbook pages built from content/")
	}
	for _, p := range append([]string{filepath.Join(dir, "index.html")}, pages...) {
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		u := srv.URL + "/"
		if rel != "." {
			u += filepath.ToSlash(rel) + "/"
		}
		open(t, ctx, u)
		n := eval[int](t, ctx, `document.querySelectorAll('span.prm.prm-set').length`)
		if rel != "." && strings.Contains(rel, "kubeadm") && n == 0 {
			t.Errorf("%s: no parameter reference shows its default value", rel)
		}
		w.check(t, rel)
	}
}
