package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/klauspost/compress/gzip"
)

// Targets from issue 34 §3: the biggest bundled page's first load.
const (
	targetDCL    = 100 * time.Millisecond
	targetWeight = 120 << 10 // bytes over the wire
)

// loadSample is one cold load of a page in Chromium.
type loadSample struct {
	dcl, load   time.Duration // navigation start → DOMContentLoaded end, load end
	transferred int64         // bytes over the wire: the document and every resource
	decoded     int64         // the same, uncompressed
	requests    int
}

type loadJS struct {
	DCL, Load        float64
	Transfer, Decode int64
	Requests         int
}

// firstLoad measures a cold load (cache off) of page in Chromium, from
// Cairn's build and from Hugo's build of the same Markdown, each served as
// a static site with gzip (as a host such as Netlify serves them), runs
// times each, alternating. It returns the two sample sets.
func firstLoad(ctx context.Context, cairnOut, hugoOut, page string, runs int, out io.Writer) (cairn, hugo []loadSample, err error) {
	type site struct {
		name, url string
		samples   *[]loadSample
	}
	var sites []site
	for _, s := range []struct {
		name, dir string
		samples   *[]loadSample
	}{{"cairn", cairnOut, &cairn}, {"hugo", hugoOut, &hugo}} {
		if s.dir == "" {
			continue
		}
		url, stop, err := serveStatic(s.dir)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		sites = append(sites, site{s.name, url + "/" + page + "/", s.samples})
	}

	bctx, stop, err := benchBrowser(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	once := func(url, page string) (loadSample, error) {
		tctx, cancel := chromedp.NewContext(bctx)
		defer cancel()
		tctx, cancelT := context.WithTimeout(tctx, 30*time.Second)
		defer cancelT()
		err := chromedp.Do(tctx,
			chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
				if _, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{}); err != nil {
					return err
				}
				_, err := cdp.Call(ctx, t, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
				return err
			}),
			// The same origin first, so that the renderer process this
			// origin gets is running: its start is Chromium's, not the page's.
			chromedp.Navigate(strings.TrimSuffix(url, "/"+page+"/")+"/sitemap.xml"),
			chromedp.Navigate(url),
		)
		if err == nil {
			_, err = chromedp.Run(tctx, chromedp.Poll[bool](`document.readyState === "complete" && performance.getEntriesByType("navigation")[0].loadEventEnd > 0`,
				chromedp.WithPollingTimeout(20*time.Second)))
		}
		if err != nil {
			return loadSample{}, err
		}
		m, err := chromedp.Run(tctx, chromedp.Evaluate[loadJS](`(function () {
  var n = performance.getEntriesByType("navigation")[0], t = n.transferSize, d = n.decodedBodySize, r = 1;
  performance.getEntriesByType("resource").forEach(function (e) { t += e.transferSize; d += e.decodedBodySize; r++; });
  return {DCL: n.domContentLoadedEventEnd, Load: n.loadEventEnd, Transfer: t, Decode: d, Requests: r};
})()`))
		if err != nil {
			return loadSample{}, err
		}
		ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
		return loadSample{dcl: ms(m.DCL), load: ms(m.Load), transferred: m.Transfer, decoded: m.Decode, requests: m.Requests}, nil
	}
	// One warm-up each: Chromium's own first-start work is not the page's.
	for _, s := range sites {
		if _, err := once(s.url, page); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.url, err)
		}
	}
	for r := range runs {
		for _, s := range sites {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			ls, err := once(s.url, page)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", s.url, err)
			}
			*s.samples = append(*s.samples, ls)
			fmt.Fprintf(out, "  run %d/%d %-6s DOMContentLoaded %s, load %s, %s over the wire (%s decoded, %d requests)\n",
				r+1, runs, s.name, ms(ls.dcl), ms(ls.load), kib(ls.transferred), kib(ls.decoded), ls.requests)
		}
	}
	return cairn, hugo, nil
}

// benchBrowser starts a headless Chromium with a fresh profile.
func benchBrowser(ctx context.Context) (context.Context, func(), error) {
	chromium, err := chromiumPath()
	if err != nil {
		return nil, nil, err
	}
	profile, err := os.MkdirTemp("", "cairn-bench-chromium-")
	if err != nil {
		return nil, nil, err
	}
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium), chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900),
		chromedp.Flag("host-resolver-rules", hostResolverRules)}
	for _, f := range []string{"headless", "no-sandbox", "disable-gpu", "no-first-run", "disable-background-networking",
		"disable-component-update", "disable-sync", "disable-extensions"} {
		opts = append(opts, chromedp.Flag(f, true))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancel := chromedp.NewContext(allocCtx)
	stop := func() { cancel(); cancelAlloc(); os.RemoveAll(profile) }
	if err := chromedp.Do(bctx); err != nil {
		stop()
		return nil, nil, fmt.Errorf("chromium: %w", err)
	}
	return bctx, stop, nil
}

// chromiumPath is the Chromium the bench's browsers run.
func chromiumPath() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on PATH (apt-get install -y chromium)")
}

func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/1024) }

// publishedHost is the name the static sites are loaded by: the bench's
// browsers map it to loopback (hostResolverRules). Loaded by 127.0.0.1 a
// Cairn page takes itself for one that cairn serve serves (its executor
// client loads and shows the executor's state at the top); by a name it is
// what a reader of a published site gets.
const publishedHost = "published.cairn-bench.test"

var hostResolverRules = "MAP " + publishedHost + " 127.0.0.1"

// serveStatic serves dir on a loopback port as a static host does: files,
// index.html for folders, gzip for text when the browser takes it. The URL
// names publishedHost.
func serveStatic(dir string) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	fs := http.FileServer(http.Dir(dir))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Join(dir, filepath.FromSlash(r.URL.Path))
		if strings.HasSuffix(r.URL.Path, "/") {
			name = filepath.Join(name, "index.html")
		}
		data, err := os.ReadFile(name)
		if err != nil || !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") || len(data) < 1024 || !compressibleName(name) {
			fs.ServeHTTP(w, r)
			return
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
		zw.Write(data)
		zw.Close()
		w.Header().Set("Content-Type", contentType(name))
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		w.Write(buf.Bytes())
	})}
	go srv.Serve(ln)
	return fmt.Sprintf("http://%s:%d", publishedHost, ln.Addr().(*net.TCPAddr).Port), func() { srv.Close() }, nil
}

func compressibleName(name string) bool {
	return slices.Contains([]string{".html", ".css", ".js", ".json", ".svg", ".xml"}, filepath.Ext(name))
}

func contentType(name string) string {
	switch filepath.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/xml"
}

// medianLoad is the sample with the median DOMContentLoaded.
func medianLoad(s []loadSample) loadSample {
	c := slices.Clone(s)
	slices.SortFunc(c, func(a, b loadSample) int { return int(a.dcl - b.dcl) })
	return c[len(c)/2]
}

type loadResult struct {
	cairn, hugo []loadSample
	hugoName    string
	lh          map[string]map[string][]lhSample // site → preset → runs
}

// measureFirstLoad builds the first-load content with cairn (and Hugo, when
// there is one) into work and loads the page in Chromium.
func measureFirstLoad(ctx context.Context, c config, work, cairnBin, hugoBin string, out io.Writer) (*loadResult, error) {
	content, err := filepath.Abs(c.loadContent)
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(content, "*.md"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no runbooks in %s", content)
	}
	cairnOut := filepath.Join(work, "firstload-cairn")
	if b, err := exec.CommandContext(ctx, cairnBin, "build", "--quiet", "--content", content, "--out", cairnOut).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cairn build: %v\n%s", err, b)
	}
	res := &loadResult{}
	hugoOut := ""
	if hugoBin != "" {
		src := filepath.Join(work, "firstload-hugo")
		if err := hugoSite(src, paths); err != nil {
			return nil, err
		}
		hugoOut = filepath.Join(work, "firstload-hugo-out")
		if b, err := exec.CommandContext(ctx, hugoBin, "--quiet", "--source", src, "--destination", hugoOut,
			"--cacheDir", filepath.Join(work, "hugo-cache")).CombinedOutput(); err != nil {
			fmt.Fprintf(out, "  hugo could not build the bundled content (%v: %s); cairn only\n", err, tail(string(b), 400))
			hugoOut = ""
		} else {
			res.hugoName = filepath.Base(hugoBin)
		}
	}
	res.cairn, res.hugo, err = firstLoad(ctx, cairnOut, hugoOut, c.loadPage, c.loadRuns, out)
	if err != nil {
		return nil, err
	}
	if c.lhRuns > 0 {
		if err := res.measureLighthouse(ctx, c, cairnOut, hugoOut, out); err != nil {
			fmt.Fprintf(out, "lighthouse: not measured: %v\n", err)
		}
	}
	return res, nil
}

// measureLighthouse scores the first-load page of both static builds.
func (r *loadResult) measureLighthouse(ctx context.Context, c config, cairnOut, hugoOut string, out io.Writer) error {
	cli, err := ensureLighthouse(ctx, out)
	if err != nil {
		return err
	}
	sites := map[string]string{}
	for name, dir := range map[string]string{"cairn": cairnOut, "hugo": hugoOut} {
		if dir == "" {
			continue
		}
		url, stop, err := serveStatic(dir)
		if err != nil {
			return err
		}
		defer stop()
		sites[name] = url
	}
	fmt.Fprintf(out, "lighthouse %s on %s: %d runs per site and preset, alternating\n", lighthouseVersion, c.loadPage, c.lhRuns)
	r.lh, err = lighthouse(ctx, cli, lhURLs(sites, c.loadPage), c.lhRuns, out)
	return err
}

// report prints the first-load rows and returns the targets missed.
func (r *loadResult) report(out io.Writer, page string) []string {
	if r == nil || len(r.cairn) == 0 {
		return []string{"MISSED: the first load was not measured"}
	}
	row := func(name string, s []loadSample) loadSample {
		m := medianLoad(s)
		fmt.Fprintf(out, "%-26s %5d %10s %10s   load %s, %s over the wire (%s decoded), %d requests\n", name, len(s), ms(m.dcl),
			ms(slices.MinFunc(s, func(a, b loadSample) int { return int(a.dcl - b.dcl) }).dcl), ms(m.load), kib(m.transferred), kib(m.decoded), m.requests)
		return m
	}
	fmt.Fprintf(out, "\nfirst load of /%s/ (cold, Chromium)  runs  DCL median   DCL min\n", page)
	c := row("cairn", r.cairn)
	if len(r.hugo) > 0 {
		h := row("hugo (minimal layouts)", r.hugo)
		fmt.Fprintf(out, "%-26s %5s %9.2f×   (same Markdown; Hugo's page has no parameters, runs or scripts)\n", "ratio cairn/hugo", "", float64(c.dcl)/float64(h.dcl))
	}
	fmt.Fprintf(out, "%-26s targets: DOMContentLoaded ≤ %s, ≤ %s over the wire\n", "", ms(targetDCL), kib(targetWeight))
	var missed []string
	if c.dcl > targetDCL {
		missed = append(missed, fmt.Sprintf("MISSED: first load of %s: DOMContentLoaded %s (median); target ≤ %s", page, ms(c.dcl), ms(targetDCL)))
	}
	if c.transferred > targetWeight {
		missed = append(missed, fmt.Sprintf("MISSED: first load of %s: %s over the wire; target ≤ %s", page, kib(c.transferred), kib(targetWeight)))
	}
	return append(missed, reportLighthouse(out, page, r.lh)...)
}
