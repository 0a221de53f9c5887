package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/site"
)

// targetPatch is issue 34 §2: a file write shows in the open page.
const targetPatch = 20 * time.Millisecond

// watchJS runs in every document the tab opens, from its start: it watches
// for the text the bench asked for (localStorage bench:want) and notes the
// wall clock when it is in the page (bench:seen), across a reload too.
const watchJS = `(function () {
  function check() {
    var want = localStorage.getItem("bench:want");
    if (!want || localStorage.getItem("bench:seenFor") === want || !document.body) return;
    if (document.body.textContent.indexOf(want) >= 0) {
      localStorage.setItem("bench:seen", String(Date.now()));
      localStorage.setItem("bench:seenFor", want);
    }
  }
  new MutationObserver(check).observe(document, { subtree: true, childList: true, characterData: true });
})();`

// patchSample is one edit: from the write to the text in the open page.
type patchSample struct {
	d        time.Duration
	reloaded bool
}

// editToVisible edits a prose line of the page's runbook edits times
// under a server (url, serving files from content) and measures, in
// Chromium, from each write to the moment the new words are in the page.
func editToVisible(ctx context.Context, bctx context.Context, url, file string, edits int, out io.Writer, name string) ([]patchSample, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	// The first line of a step's first paragraph that has no code, parameter
	// or attribute in it (not in tabs, an admonition or a list).
	first := regexp.MustCompile(`\n## [^\n]*\n\n(\p{Hangul}[^` + "`" + `${}\n]*)\n`)
	m := first.FindSubmatchIndex(src)
	if m == nil {
		return nil, fmt.Errorf("%s: no plain prose line in a step to edit", file)
	}
	at := m[3]
	tctx, cancel := chromedp.NewContext(bctx)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: watchJS})
		return err
	}), chromedp.Navigate(url)); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // the page settles (scripts, live-reload connection)
	var samples []patchSample
	for i := range edits {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		want := fmt.Sprintf("편집표식%d%d", time.Now().UnixNano()%1e6, i)
		if _, err := chromedp.Run(tctx, chromedp.Evaluate[string](`(localStorage.setItem("bench:want", `+fmt.Sprintf("%q", want)+`), window.__gen = window.__gen || Math.random(), String(window.__gen))`)); err != nil {
			return nil, err
		}
		gen, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`String(window.__gen)`))
		edited := slices.Concat(src[:at], []byte(" "+want), src[at:])
		start := time.Now()
		if err := os.WriteFile(file, edited, 0o644); err != nil {
			return nil, err
		}
		var seen int64
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			v, err := chromedp.Run(tctx, chromedp.Evaluate[string](`localStorage.getItem("bench:seenFor") === `+fmt.Sprintf("%q", want)+` ? localStorage.getItem("bench:seen") : ""`))
			if err == nil && v != "" {
				fmt.Sscan(v, &seen)
				break
			}
		}
		if seen == 0 {
			return nil, fmt.Errorf("%s: edit %d did not show within 15 s", name, i+1)
		}
		d := time.UnixMilli(seen).Sub(start)
		// Let the page settle (a reloaded page runs its scripts) before the next.
		time.Sleep(1500 * time.Millisecond)
		now, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`String(window.__gen)`))
		s := patchSample{d: d, reloaded: now != gen}
		samples = append(samples, s)
		how := "patched in place"
		if s.reloaded {
			how = "reloaded"
			if why, _ := chromedp.Run(tctx, chromedp.Evaluate[string](`sessionStorage.getItem("cairn:patch-miss") || ""`)); why != "" {
				how += ": " + why
			}
		}
		fmt.Fprintf(out, "  edit %d/%d %-6s %s (%s)\n", i+1, edits, name, ms(d), how)
	}
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return nil, err
	}
	return samples, nil
}

// measurePatch runs editToVisible against cairn's dev server (in this
// process) and `hugo server`, each on its own copy of the content.
func measurePatch(ctx context.Context, c config, work, hugoBin string, out io.Writer) (cairn, hugo []patchSample, err error) {
	content, err := filepath.Abs(c.loadContent)
	if err != nil {
		return nil, nil, err
	}
	paths, err := filepath.Glob(filepath.Join(content, "*.md"))
	if err != nil || len(paths) == 0 {
		return nil, nil, fmt.Errorf("no runbooks in %s", content)
	}
	bctx, stop, err := benchBrowser(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer stop()

	// Cairn: the dev server on a copy of the content.
	cdir := filepath.Join(work, "patch-cairn")
	_ = os.RemoveAll(cdir)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(cdir, filepath.Base(p)), b, 0o644); err != nil {
			return nil, nil, err
		}
	}
	b, err := site.New(site.Options{Content: cdir, Dev: true})
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	srv := site.NewServer(b, site.ServerOptions{Addr: "127.0.0.1:0", Ready: func(u string) { ready <- u }})
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	defer func() { cancel(); <-done }()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		return nil, nil, err
	case <-time.After(time.Minute):
		return nil, nil, fmt.Errorf("cairn serve: not ready in a minute")
	}
	cairn, err = editToVisible(ctx, bctx, strings.TrimSuffix(base, "/")+"/"+c.loadPage+"/", filepath.Join(cdir, c.loadPage+".md"), c.patchEdits, out, "cairn")
	if err != nil {
		return nil, nil, err
	}
	if hugoBin == "" {
		return cairn, nil, nil
	}

	// Hugo: hugo server on its copy of the same Markdown.
	hdir := filepath.Join(work, "patch-hugo")
	if err := hugoSite(hdir, paths); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()
	cmd := exec.CommandContext(hctx, hugoBin, "server", "--source", hdir, "--bind", "127.0.0.1", "--port", fmt.Sprint(port),
		"--cacheDir", filepath.Join(work, "hugo-cache"), "--disableFastRender=false")
	var hout strings.Builder
	cmd.Stdout, cmd.Stderr = &hout, &hout
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	defer func() { hcancel(); _ = cmd.Wait() }()
	hurl := fmt.Sprintf("http://127.0.0.1:%d/%s/", port, c.loadPage)
	for deadline := time.Now().Add(time.Minute); !strings.Contains(hout.String(), "Web Server is available"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("hugo server: not ready in a minute:\n%s", tail(hout.String(), 800))
		}
	}
	hugo, err = editToVisible(ctx, bctx, hurl, filepath.Join(hdir, "content", c.loadPage+".md"), c.patchEdits, out, "hugo")
	return cairn, hugo, err
}

// reportPatch prints the edit rows and returns the target missed.
func reportPatch(out io.Writer, cairn, hugo []patchSample) []string {
	if len(cairn) == 0 {
		return []string{"MISSED: edit → visible in the page was not measured"}
	}
	row := func(name string, s []patchSample) time.Duration {
		ds := make([]time.Duration, len(s))
		re := 0
		for i, x := range s {
			ds[i] = x.d
			if x.reloaded {
				re++
			}
		}
		m := median(ds)
		fmt.Fprintf(out, "%-26s %5d %10s %10s %10s   %d of %d by a reload\n", name, len(s), ms(m), ms(slices.Min(ds)), ms(slices.Max(ds)), re, len(s))
		return m
	}
	fmt.Fprintf(out, "\nedit → visible in Chromium       runs     median        min        max\n")
	m := row("cairn serve", cairn)
	if len(hugo) > 0 {
		h := row("hugo server", hugo)
		fmt.Fprintf(out, "%-26s %5s %9.2f×\n", "ratio cairn/hugo", "", float64(m)/float64(h))
	}
	if m >= targetPatch {
		return []string{fmt.Sprintf("MISSED: edit → visible takes %s (median); target < %s", ms(m), ms(targetPatch))}
	}
	return nil
}
