package site_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/site"
)

func build(t *testing.T, dir string) *site.Result {
	t.Helper()
	b, err := site.New(site.Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBuildBundled builds the bundled runbooks: every page is there, the
// build is deterministic and nothing refers to another host.
func TestBuildBundled(t *testing.T) {
	res := build(t, "../content")
	if len(res.Diagnostics) > 0 {
		t.Fatalf("bundled content has problems:\n%v", res.Diagnostics)
	}
	if len(res.Runbooks) < 3 {
		t.Fatalf("built %d runbooks, want the 3 bundled ones", len(res.Runbooks))
	}
	for _, name := range []string{"index.html", "404.html", "sitemap.xml", "search.json", "search.js", "assets/chroma.css",
		"kubeadm-ha/index.html", "ccm-leader-migration/index.html", "cilium-multipool/index.html"} {
		if _, ok := res.Files[name]; !ok {
			t.Errorf("missing %s", name)
		}
	}
	again := build(t, "../content")
	if len(again.Files) != len(res.Files) {
		t.Fatalf("second build has %d files, first %d", len(again.Files), len(res.Files))
	}
	for name, data := range res.Files {
		if !bytes.Equal(data, again.Files[name]) {
			t.Errorf("%s differs between two builds", name)
		}
	}
	assertSelfContained(t, res.Files)
	if sm := string(res.Files["sitemap.xml"]); !strings.Contains(sm, "<loc>http://127.0.0.1:1313/kubeadm-ha/</loc>") {
		t.Errorf("sitemap lacks the kubeadm page:\n%s", sm)
	}
	if !bytes.Contains(res.Files["search.json"], []byte("kubeadm")) {
		t.Error("search index lacks kubeadm")
	}
}

// resourceRe finds attributes and CSS that load something.
var resourceRe = regexp.MustCompile(`(?i)(?:src|href|action|poster|data)\s*=\s*["']?([^"'\s>]+)|url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)`)

// assertSelfContained fails when any page, script or stylesheet loads or
// links to another host: the site must work air-gapped.
func assertSelfContained(t *testing.T, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		switch filepath.Ext(name) {
		case ".html", ".css", ".js":
		default:
			continue
		}
		for _, m := range resourceRe.FindAllStringSubmatch(string(data), -1) {
			u := m[1] + m[2] + m[3]
			if strings.HasPrefix(u, "//") || regexp.MustCompile(`^(?i)[a-z][a-z0-9+.-]*:`).MatchString(u) &&
				!strings.HasPrefix(u, "data:") && !strings.HasPrefix(u, "#") && !strings.HasPrefix(u, "mailto:") && !strings.HasPrefix(u, "javascript:") {
				if strings.HasPrefix(u, "http://www.w3.org/") {
					continue // SVG/XML namespaces are names, not requests
				}
				t.Errorf("%s refers to an external URL: %s", name, u)
			}
		}
		if filepath.Ext(name) != ".html" && regexp.MustCompile(`https?://[a-z]`).Match(bytes.ReplaceAll(data, []byte("http://www.w3.org/"), nil)) {
			t.Errorf("%s contains an absolute URL", name)
		}
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func runbookMD(title, body string) string {
	return "---\ntitle: " + title + "\nlang: ko\nparams:\n  - name: X\n    default: a\n---\n" + body
}

// TestBuildExecutorStatusUnderServe: cairn serve's pages carry the
// executor's status line, which the executor client fills in, at the top of
// the runbook (made later, it pushed the page down); a published page has
// none (its client makes one only when a reader reaches for Run).
func TestBuildExecutorStatusUnderServe(t *testing.T) {
	for _, dev := range []bool{false, true} {
		b, err := site.New(site.Options{Content: "../content", Dev: dev})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		page := string(res.Files["kubeadm-ha/index.html"])
		status, title := strings.Index(page, `id="cairn-exec-status"`), strings.Index(page, `class="rb-title"`)
		if dev && (status < 0 || status > title) {
			t.Errorf("cairn serve's page: executor status at %d, title at %d; want it before the title", status, title)
		}
		if !dev && status >= 0 {
			t.Errorf("a published page carries the executor status")
		}
	}
}

func TestBuildReportsProblemsWithPositions(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.md"), runbookMD("좋음", "## 하나 {#one}\n\n```bash {target=local}\necho $X\n```\n"))
	writeFile(t, filepath.Join(dir, "bad.md"), runbookMD("나쁨", "## 하나 {#one}\n\n```bash {target=local timeout=soon}\necho $Y\n```\n"))
	res := build(t, dir)
	got := res.Diagnostics.Error()
	for _, want := range []string{"bad.md:10:23: block \"one-1\": timeout \"soon\"", "bad.md:11:6: block \"one-1\": $Y is not a declared parameter"} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
	if _, ok := res.Files["good/index.html"]; !ok {
		t.Error("the good runbook was not built")
	}
	if _, ok := res.Files["bad/index.html"]; ok {
		t.Error("a broken runbook was rendered")
	}
}

func TestUpdateRendersOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	a, c := filepath.Join(dir, "a.md"), filepath.Join(dir, "c.md")
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n본문\n"))
	writeFile(t, c, runbookMD("다", "## 하나 {#one}\n\n본문\n"))
	b, err := site.New(site.Options{Content: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Build(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n바뀐 본문\n"))
	res, err := b.Update(ctx, []string{a})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rendered != 1 || !strings.Contains(string(res.Files["a/index.html"]), "바뀐 본문") {
		t.Fatalf("body change: rendered %d pages", res.Rendered)
	}
	writeFile(t, a, runbookMD("가나", "## 하나 {#one}\n\n바뀐 본문\n"))
	if res, err = b.Update(ctx, []string{a}); err != nil || res.Rendered != 2 {
		t.Fatalf("title change must re-render navigation everywhere: rendered %d, %v", res.Rendered, err)
	}
	// A broken edit keeps the last good page and reports the problem.
	writeFile(t, a, runbookMD("가나", "## 하나 {#one}\n\n```bash {target=nowhere}\n```\n"))
	if res, err = b.Update(ctx, []string{a}); err != nil || len(res.Diagnostics) != 1 || len(res.Runbooks) != 2 {
		t.Fatalf("broken edit: diags=%v runbooks=%d err=%v", res.Diagnostics, len(res.Runbooks), err)
	}
	os.Remove(c)
	if res, err = b.Update(ctx, []string{c}); err != nil || len(res.Runbooks) != 1 {
		t.Fatalf("removal: %d runbooks, %v", len(res.Runbooks), err)
	}
}

func TestWriteDirReplacesWhole(t *testing.T) {
	out := filepath.Join(t.TempDir(), "public")
	if err := site.WriteDir(out, map[string][]byte{"index.html": []byte("1"), "old/index.html": []byte("o")}); err != nil {
		t.Fatal(err)
	}
	if err := site.WriteDir(out, map[string][]byte{"index.html": []byte("2")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "index.html")); string(b) != "2" {
		t.Errorf("index.html = %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "old")); !os.IsNotExist(err) {
		t.Error("a file from the previous build survived")
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("temporary folders left behind: %v", entries)
	}
}

// TestServeLiveReload runs the dev server on loopback, edits a runbook and
// expects the new page and a reload notice; a broken edit shows errors and
// keeps the old page; a foreign Host header is refused.
func TestServeLiveReload(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.md")
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n처음\n"))
	base, updates := devServer(t, dir)
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.String()
	}
	if code, body := get("a/"); code != 200 || !strings.Contains(body, "처음") {
		t.Fatalf("GET a/: %d", code)
	}
	if code, _ := get("nope/"); code != 404 {
		t.Errorf("GET nope/: %d, want 404", code)
	}
	// Another site's page asking for the event stream (which carries the
	// pages' prose) is refused, and nothing says it may read it.
	for _, origin := range []string{"http://evil.example", "null", strings.Replace(base, "127.0.0.1", "localhost", 1)} {
		oreq, _ := http.NewRequest("GET", base+"_cairn/events", nil)
		oreq.Header.Set("Origin", strings.TrimSuffix(origin, "/"))
		oresp, err := http.DefaultClient.Do(oreq)
		if err != nil {
			t.Fatal(err)
		}
		oresp.Body.Close()
		if oresp.StatusCode != http.StatusForbidden || oresp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("events from Origin %s: %d, Access-Control-Allow-Origin %q; want 403 and none", origin, oresp.StatusCode, oresp.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	// The server's own pages may send their own origin.
	sreq, _ := http.NewRequestWithContext(t.Context(), "GET", base+"_cairn/events", nil)
	sreq.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	if sresp, err := http.DefaultClient.Do(sreq); err != nil {
		t.Fatal(err)
	} else {
		sresp.Body.Close()
		if sresp.StatusCode != http.StatusOK {
			t.Errorf("events from the server's own origin: %d, want 200", sresp.StatusCode)
		}
	}
	events := liveEvents(t, base) // subscribed before editing
	wait := func(what string) string {
		select {
		case <-updates:
		case <-time.After(10 * time.Second):
			t.Fatalf("no rebuild after %s", what)
		}
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("no event after %s", what)
		}
		return ""
	}
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n두번째\n"))
	if ev := wait("edit"); !strings.Contains(ev, `"reload"`) || !strings.Contains(ev, `"changed":["a.md"]`) {
		t.Errorf("event = %s", ev)
	}
	if _, body := get("a/"); !strings.Contains(body, "두번째") {
		t.Error("page not updated")
	}
	if code, body := get("search.json"); code != 200 || !strings.Contains(body, "두번째") {
		t.Errorf("search index not updated: %d", code)
	}
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n```bash {target=local when='X = 1'}\n```\n"))
	if ev := wait("broken edit"); !strings.Contains(ev, `"errors"`) || !strings.Contains(ev, "a.md:10") {
		t.Errorf("event = %s", ev)
	}
	if _, body := get("a/"); !strings.Contains(body, "두번째") {
		t.Error("the last good page was not kept")
	}
	hreq, _ := http.NewRequest("GET", base+"a/", nil)
	hreq.Host = "evil.example:1313"
	hresp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", hresp.StatusCode)
	}
}

// liveEvents subscribes to the dev server's live-reload stream (until t
// ends) and returns its data lines.
func liveEvents(t *testing.T, base string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", base+"_cairn/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan string, 8)
	connected := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == ": connected" {
				close(connected)
			}
			if strings.HasPrefix(sc.Text(), "data: ") {
				events <- sc.Text()
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("live-reload stream did not connect")
	}
	return events
}

// TestDevServerWriteBackReloadsNoPage: a runbook the server re-rendered
// itself after changing it (RefreshAfter: the executor writing a verified
// output back) reloads no open page, since a reload would cut the streams
// of blocks still running there (CI stop 25: "Failed to fetch"); an edit
// by hand right after still reloads, naming only its own file.
func TestDevServerWriteBackReloadsNoPage(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")
	writeFile(t, a, runbookMD("가", "## 하나 {#one}\n\n처음\n"))
	writeFile(t, b, runbookMD("나", "## 하나 {#one}\n\n처음\n"))
	srv, base, updates := startDevServer(t, dir)
	events := liveEvents(t, base)
	srv.RefreshAfter(t.Context(), []string{a}, func() {
		// As the executor writes: a hidden temporary file renamed over it.
		tmp := filepath.Join(dir, ".a.md.tmp-1")
		writeFile(t, tmp, runbookMD("가", "## 하나 {#one}\n\n기록된 출력\n"))
		if err := os.Rename(tmp, a); err != nil {
			t.Fatal(err)
		}
	})
	select {
	case <-updates:
	case <-time.After(10 * time.Second):
		t.Fatal("RefreshAfter did not re-render")
	}
	resp, err := http.Get(base + "a/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "기록된 출력") {
		t.Error("the page does not show what RefreshAfter wrote")
	}
	writeFile(t, b, runbookMD("나", "## 하나 {#one}\n\n고침\n"))
	select {
	case ev := <-events:
		var m struct {
			Type    string
			Changed []string
			Pages   []string
			Patches map[string]json.RawMessage
		}
		err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &m)
		if err != nil || m.Type != "reload" || !slices.Equal(m.Changed, []string{"b.md"}) || !slices.Equal(m.Pages, []string{"b/index.html"}) ||
			len(m.Patches) != 1 || m.Patches["b/index.html"] == nil {
			t.Errorf("first live-reload event after a write-back and an edit: %s (want a reload for b.md only, with its patch)", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after an edit by hand")
	}
}

// devServer serves dir with live reload (as cairn serve does) until t ends
// and returns its URL, once the first build is done, and its rebuilds.
func devServer(t *testing.T, dir string) (string, <-chan *site.Result) {
	t.Helper()
	_, base, updates := startDevServer(t, dir)
	return base, updates
}

// startDevServer is devServer that also returns the server.
func startDevServer(t *testing.T, dir string) (*site.Server, string, <-chan *site.Result) {
	t.Helper()
	b, err := site.New(site.Options{Content: dir, Dev: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urlc := make(chan string, 1)
	updates := make(chan *site.Result, 8)
	srv := site.NewServer(b, site.ServerOptions{Addr: "127.0.0.1:0", Ready: func(u string) { urlc <- u },
		OnUpdate: func(r *site.Result, err error) { updates <- r }})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var base string
	select {
	case base = <-urlc:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	<-updates // the first build
	return srv, base, updates
}

// TestDevServerDropsRemovedFolder: a folder of runbooks moved out of the
// content tree (one rename event, for the folder only) stops being served.
func TestDevServerDropsRemovedFolder(t *testing.T) {
	dir := t.TempDir()
	content := filepath.Join(dir, "content")
	os.MkdirAll(filepath.Join(content, "team"), 0o755)
	os.WriteFile(filepath.Join(content, "keep.md"), []byte("---\ntitle: Keep\n---\n## one {#one}\n\ntext\n"), 0o644)
	os.WriteFile(filepath.Join(content, "team", "gone.md"), []byte("---\ntitle: Gone\n---\n## one {#one}\n\ntext\n"), 0o644)
	base, updates := devServer(t, content)
	status := func(p string) int {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status("gone/") != 200 {
		t.Fatal("gone/ not served at first")
	}
	if err := os.Rename(filepath.Join(content, "team"), filepath.Join(dir, "team-moved")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for status("gone/") != 404 {
		select {
		case <-updates:
		case <-deadline:
			t.Fatal("gone/ still served after its folder was moved away")
		}
	}
	if status("keep/") != 200 {
		t.Error("keep/ no longer served")
	}
}
