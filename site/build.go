// Package site renders a set of runbooks into a static, self-contained
// documentation site: one page per runbook, an index, a 404 page, a sitemap,
// a search index and the theme's assets.
package site

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"iter"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/themes"
)

// Options configure a Builder.
type Options struct {
	Content string // content folder
	Theme   fs.FS  // nil: the embedded default theme
	BaseURL string // absolute site URL for sitemap.xml; default http://127.0.0.1:1313/
	Title   string // site title; default "Cairn"
	// EditURL, if set, gives each page an "edit this page" link: {path} is
	// replaced by the runbook's path in the content folder (escaped).
	EditURL string
	// Lang is the language of runbooks whose front matter names none.
	Lang string
	// RawHTML is RawHTMLOmit (default) or RawHTMLRender (see Config).
	RawHTML  string
	Progress io.Writer
	Dev      bool // pages load the live-reload script (cairn serve)
	// NoMinify writes the theme's CSS and JS as they are in the theme
	// (for debugging a theme); by default they are minified.
	NoMinify bool
	// Results gives each block's last verified run, baked into the page.
	// May be nil.
	Results func(rb *runbook.Runbook) map[string]BlockResult
}

// Builder renders a site and keeps what it rendered, so that a change to one
// runbook re-renders only that page (and navigation when it must).
type Builder struct {
	opts  Options
	theme *theme
	md    goldmark.Markdown

	mu       sync.Mutex
	runbooks map[string]*entry // by path
	// parsed is the sha256 of the bytes each file was last parsed from,
	// good or broken, so that the dev server can tell a file it rendered
	// already (a write-back it re-rendered itself) from a new edit.
	parsed map[string][32]byte
	// shared is the last index and 404 page with what they were made from,
	// so that an update which changes no navigation does not redo them.
	shared *sharedPages
	// The search index: each runbook's marshalled entries, and the joined
	// files once assembled (nil until asked for after a change).
	searchOf             [][]byte
	searchJSON, searchJS []byte
	// last is the last site plan and lastPos each of its runbooks' place
	// in it, by path: an update that moves nothing starts from them.
	last    *sitePlan
	lastPos map[string]int
	// code is the highlighted code of the in-memory builds (cairn serve's
	// edits), kept across them.
	code codeCache
}

// entry is one runbook's latest parse and, when it is good, what its page
// is made from.
type entry struct {
	// rb is the parsed runbook; nil once a streaming build has let it go
	// (it is several times the size of its page).
	rb    *runbook.Runbook
	diags runbook.Diagnostics
	sum   [32]byte // of the source bytes
	// good: the runbook parsed and gets a page (its content may be empty:
	// a runbook with front matter and no body still gets one).
	good bool

	// What the site plan and the page need, kept without rb.
	path     string
	weight   int
	summary  RunbookSummary
	warnings runbook.Diagnostics
	// data is the page's runbook part, its body rendered; json is what
	// the page script reads. A streaming build packs both into packed (s2:
	// a fifth of the size) and empties them, so that ten thousand pages
	// wait in a few hundred megabytes for the site plan.
	data   *RunbookData
	json   template.JS
	packed []byte
	// searchJSON is the runbook's search entries marshalled without the
	// enclosing brackets, so that an update marshals only the runbooks
	// that changed.
	searchJSON []byte
	nav        string // navigation fingerprint: title, slug, weight, steps
}

// Result is what a build produced.
type Result struct {
	Files    map[string][]byte  // site-relative path -> content (nil from BuildTo)
	Written  int                // files made
	Runbooks []*runbook.Runbook // the good runbooks, in navigation order (nil from BuildTo)
	Pages    int                // runbook pages (the good runbooks)
	Steps    int
	Rendered int // pages rendered in this build (all on a full build)
	// RenderedNames are the HTML files rendered in this build, runbook
	// pages and the index and 404 page when they were made again.
	RenderedNames []string
	Diagnostics   runbook.Diagnostics
	// Warnings are what the runbooks' parsing read past; they never stop
	// a build (cairn build --strict makes them).
	Warnings runbook.Diagnostics
	Duration time.Duration
	// SearchDeferred means Files lacks search.json and search.js (an
	// incremental update); Builder.SearchFiles makes them when wanted.
	SearchDeferred bool
}

// New loads the theme and returns a Builder.
func New(opts Options) (*Builder, error) {
	if opts.Theme == nil {
		opts.Theme = themes.Default()
	}
	if opts.BaseURL == "" {
		opts.BaseURL = "http://127.0.0.1:1313/"
	}
	if !strings.HasSuffix(opts.BaseURL, "/") {
		opts.BaseURL += "/"
	}
	if opts.Title == "" {
		opts.Title = "Cairn"
	}
	th, err := loadTheme(opts.Theme, !opts.NoMinify)
	if err != nil {
		return nil, err
	}
	return &Builder{
		opts:     opts,
		theme:    th,
		md:       goldmark.New(goldmark.WithExtensions(extension.GFM)),
		runbooks: map[string]*entry{},
		parsed:   map[string][32]byte{},
	}, nil
}

// ReloadTheme re-reads templates and assets (after a theme file changed).
func (b *Builder) ReloadTheme() error {
	th, err := loadTheme(b.opts.Theme, !b.opts.NoMinify)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.theme = th
	b.mu.Unlock()
	return nil
}

// Build parses and renders every runbook of the content folder into
// memory (Result.Files), for the dev server and export.
func (b *Builder) Build(ctx context.Context) (*Result, error) {
	start := time.Now()
	if err := b.loadAll(ctx, false); err != nil {
		return nil, err
	}
	mem := &memSink{files: map[string][]byte{}}
	res, err := b.assemble(ctx, b.plan(nil), mem)
	if err != nil {
		return nil, err
	}
	res.Files = mem.files
	res.Duration = time.Since(start)
	return res, nil
}

// BuildTo parses and renders every runbook and then, unless one has a
// problem (or, with strict, a warning), puts the site into sink page by
// page. Memory holds each page's packed body and the search index while
// the site plan waits for the last runbook, not the parsed runbooks or the
// site: Result.Runbooks is nil. A Result with Diagnostics (or strict
// Warnings) and a nil error means nothing was put into sink.
//
// A Builder that has run BuildTo can Build again, not Update.
func (b *Builder) BuildTo(ctx context.Context, sink Sink, strict bool) (*Result, error) {
	start := time.Now()
	if err := b.loadAll(ctx, true); err != nil {
		return nil, err
	}
	p := b.plan(nil)
	if len(p.res.Diagnostics) > 0 || (strict && len(p.res.Warnings) > 0) {
		p.res.Duration = time.Since(start)
		return p.res, nil
	}
	res, err := b.assemble(ctx, p, sink)
	if err != nil {
		return nil, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// loadAll forgets everything and parses the whole content folder.
func (b *Builder) loadAll(ctx context.Context, pack bool) error {
	paths, err := runbook.ContentFiles(b.opts.Content)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.runbooks = map[string]*entry{}
	b.parsed = map[string][32]byte{}
	b.shared = nil
	b.mu.Unlock()
	return b.parseAll(ctx, paths, pack)
}

// current reports whether path holds exactly the bytes it was last parsed
// from (a file that is gone, or was never parsed, is not current).
func (b *Builder) current(path string) bool {
	src, err := runbook.ReadContent(b.opts.Content, path)
	if err != nil {
		return false
	}
	b.mu.Lock()
	sum, ok := b.parsed[path]
	b.mu.Unlock()
	return ok && sum == sha256.Sum256(src)
}

// Update re-parses the given runbook files (added, changed or removed) and
// re-renders what depends on them. A broken file keeps its last good page;
// its problems are in Result.Diagnostics.
func (b *Builder) Update(ctx context.Context, changed []string) (*Result, error) {
	start := time.Now()
	b.mu.Lock()
	before := make(map[string]*entry, len(changed))
	for _, p := range changed {
		if e, ok := b.runbooks[p]; ok {
			before[p] = e
		}
	}
	b.mu.Unlock()
	var present []string
	for _, p := range changed {
		if fileExists(p) {
			present = append(present, p)
		} else {
			b.mu.Lock()
			delete(b.runbooks, p)
			delete(b.parsed, p)
			b.mu.Unlock()
		}
	}
	if err := b.parseAll(ctx, present, false); err != nil {
		return nil, err
	}
	// Only the changed files can have changed the navigation (their
	// titles, steps, order keys, or being there at all). When none did
	// and each was and is a good runbook with the same tags, the last
	// plan holds as it is: its order, site data, index and 404 page,
	// sitemap and nav.js; only their pages are rendered again, with no
	// pass over the whole site but the diagnostics.
	b.mu.Lock()
	navChanged, same := false, b.last != nil
	for _, p := range changed {
		o, had := before[p]
		n, has := b.runbooks[p]
		if had != has || had && o.nav != n.nav {
			navChanged = true
		}
		if _, planned := b.lastPos[p]; !planned || !had || !has || !o.good || !n.good || !slices.Equal(o.summary.Tags, n.summary.Tags) {
			same = false
		}
	}
	b.mu.Unlock()
	only := map[string]bool{}
	if !navChanged {
		for _, p := range present {
			only[p] = true
		}
	}
	var p *sitePlan
	if same && !navChanged {
		p = b.replan(only)
	} else {
		p = b.plan(only)
	}
	mem := &memSink{files: map[string][]byte{}}
	res, err := b.assemble(ctx, p, mem)
	if err != nil {
		return nil, err
	}
	res.Files = mem.files
	res.Duration = time.Since(start)
	return res, nil
}

// parseAll parses and renders the given files in parallel. A file that
// fails to parse keeps its previous good entry. pack lets each parsed
// runbook go once its page data is packed (streaming builds).
func (b *Builder) parseAll(ctx context.Context, paths []string, pack bool) error {
	type job struct {
		i    int
		path string
	}
	results := make([]*entry, len(paths))
	errs := make([]error, len(paths))
	jobs := make(chan job)
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(1, len(paths)))
	var done int
	var doneMu sync.Mutex
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				results[j.i], errs[j.i] = b.parseOne(j.path, pack)
				doneMu.Lock()
				done++
				if b.opts.Progress != nil && (done%50 == 0 || done == len(paths)) && len(paths) > 20 {
					fmt.Fprintf(b.opts.Progress, "\rparsing %d/%d runbooks", done, len(paths))
					if done == len(paths) {
						fmt.Fprintln(b.opts.Progress)
					}
				}
				doneMu.Unlock()
			}
		}()
	}
feed:
	for i, p := range paths {
		select {
		case jobs <- job{i, p}:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, p := range paths {
		if errs[i] != nil {
			return errs[i]
		}
		e := results[i]
		b.parsed[p] = e.sum
		if len(e.diags) > 0 {
			if old, ok := b.runbooks[p]; ok && old.good && len(old.diags) == 0 {
				old.diags = e.diags
				continue
			}
		}
		b.runbooks[p] = e
	}
	return nil
}

func (b *Builder) parseOne(path string, pack bool) (*entry, error) {
	src, err := runbook.ReadContent(b.opts.Content, path)
	var ds runbook.Diagnostics
	if errors.As(err, &ds) {
		return &entry{diags: ds}, nil
	} else if err != nil {
		return nil, err
	}
	rb, err := runbook.Parse(path, src)
	if rb.Meta.LangDefaulted && b.opts.Lang != "" {
		rb.Meta.Lang = b.opts.Lang
	}
	e := &entry{rb: rb, sum: sha256.Sum256(src), path: rb.Path, weight: rb.Meta.Weight}
	e.warnings = Warnings(rb.Warnings, b.opts.RawHTML)
	if errors.As(err, &ds) {
		e.diags = ds
		return e, nil
	} else if err != nil {
		return nil, err
	}
	e.good = true
	t := stringsFor(rb.Meta.Lang)
	e.summary = summaryOf(rb, t)
	var results map[string]BlockResult
	if b.opts.Results != nil {
		results = b.opts.Results(rb)
	}
	body := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(body)
	body.Reset()
	var code *codeCache
	if !pack {
		code = &b.code
	}
	if err := renderBodyTo(body, rb, t, results, b.opts.RawHTML == RawHTMLRender, code); err != nil {
		return nil, err
	}
	var content template.HTML
	if !pack {
		content = template.HTML(body.String())
	}
	e.data = b.runbookData(rb, t, content, e.summary.Steps)
	e.json = pageJSON(rb)
	js, err := json.Marshal(searchEntries(rb))
	if err != nil {
		return nil, err
	}
	e.searchJSON = js[1 : len(js)-1]
	var nav strings.Builder
	fmt.Fprintf(&nav, "%s|%s|%d|%s|%s|%s", rb.Slug, rb.Meta.Title, rb.Meta.Weight, rb.Meta.Lang, rb.Meta.Summary, rb.Meta.Duration)
	for _, s := range rb.Steps {
		fmt.Fprintf(&nav, "|%s=%s", s.ID, s.Title)
	}
	e.nav = nav.String()
	if pack {
		e.pack(body.Bytes())
	}
	return e, nil
}

// pack compresses the page's body and script data and lets the parsed
// runbook go.
func (e *entry) pack(body []byte) {
	sc := packPool.Get().(*packScratch)
	defer packPool.Put(sc)
	sc.raw = binary.AppendUvarint(sc.raw[:0], uint64(len(body)))
	sc.raw = append(sc.raw, body...)
	sc.raw = append(sc.raw, e.json...)
	if n := s2.MaxEncodedLen(len(sc.raw)); cap(sc.enc) < n {
		sc.enc = make([]byte, n)
	}
	// Encode's output sits in a buffer of the worst-case size, larger
	// than the input: keep an exact copy, or nothing was saved.
	e.packed = bytes.Clone(s2.Encode(sc.enc[:cap(sc.enc)], sc.raw))
	e.data.Content, e.json, e.rb = "", "", nil
}

type packScratch struct{ raw, enc []byte }

var packPool = sync.Pool{New: func() any { return new(packScratch) }}

// unpack is the page data of a packed entry: its body and script data are
// views of buf's bytes (valid while buf is).
func (e *entry) unpack(buf []byte) (content template.HTML, js template.JS, _ []byte, err error) {
	buf, err = s2.Decode(buf[:cap(buf)], e.packed)
	if err != nil {
		return "", "", buf, fmt.Errorf("%s: unpack page: %w", e.path, err)
	}
	n, k := binary.Uvarint(buf)
	if k <= 0 || uint64(len(buf)-k) < n {
		return "", "", buf, fmt.Errorf("%s: unpack page: bad length", e.path)
	}
	body := buf[k:]
	// The page is executed before buf is reused: no copy.
	return template.HTML(unsafe.String(unsafe.SliceData(body), int(n))), template.JS(unsafe.String(unsafe.SliceData(body[n:]), len(body)-int(n))), buf, nil
}

// sitePlan is what a build will make: the good runbooks in navigation
// order, the site data their pages share, and the diagnostics so far.
type sitePlan struct {
	res  *Result
	good []*entry
	site *SiteData
	only map[string]bool
	// same: the order and site data are the previous plan's (replan), so
	// the pages made from them alone are not made again.
	same bool
}

// plan orders the good runbooks and gathers every diagnostic. only, when
// not empty, limits runbook pages to those files.
func (b *Builder) plan(only map[string]bool) *sitePlan {
	b.mu.Lock()
	var good []*entry
	res := &Result{}
	for _, e := range b.runbooks {
		res.Diagnostics = append(res.Diagnostics, e.diags...)
		res.Warnings = append(res.Warnings, e.warnings...)
		if e.good {
			good = append(good, e)
		}
	}
	b.mu.Unlock()
	res.Diagnostics.Sort()
	res.Warnings.Sort()
	sort.Slice(good, func(i, j int) bool {
		a, c := good[i], good[j]
		if a.weight != c.weight {
			return a.weight < c.weight
		}
		if a.summary.Title != c.summary.Title {
			return a.summary.Title < c.summary.Title
		}
		return a.path < c.path
	})
	// Two good runbooks may not share a slug.
	seen := map[string]string{}
	kept := good[:0]
	for _, e := range good {
		if prev, dup := seen[e.summary.Slug]; dup {
			res.Diagnostics = append(res.Diagnostics, runbook.Diagnostic{File: e.path, Pos: runbook.Pos{Line: 1},
				Msg: fmt.Sprintf("slug %q is already used by %s; set another slug in the front matter", e.summary.Slug, prev)})
			continue
		}
		seen[e.summary.Slug] = e.path
		kept = append(kept, e)
	}
	good = kept
	site := &SiteData{Title: b.opts.Title, Lang: siteLang(good), NavCompact: len(good) > NavInlineMax}
	site.Runbooks = make([]RunbookSummary, 0, len(good))
	for _, e := range good {
		site.Runbooks = append(site.Runbooks, e.summary)
		if e.rb != nil {
			res.Runbooks = append(res.Runbooks, e.rb)
		}
		res.Pages++
		res.Steps += len(e.summary.Steps)
	}
	p := &sitePlan{res: res, good: good, site: site, only: only}
	b.mu.Lock()
	b.last, b.lastPos = p, make(map[string]int, len(good))
	for i, e := range good {
		b.lastPos[e.path] = i
	}
	b.mu.Unlock()
	return p
}

// replan is plan for an update that changed no runbook's place or summary
// (Update says when): the last plan's order and site data, the changed
// files' new entries in their places.
func (b *Builder) replan(only map[string]bool) *sitePlan {
	b.mu.Lock()
	defer b.mu.Unlock()
	res := &Result{}
	for _, e := range b.runbooks {
		res.Diagnostics = append(res.Diagnostics, e.diags...)
		res.Warnings = append(res.Warnings, e.warnings...)
	}
	res.Diagnostics.Sort()
	res.Warnings.Sort()
	good := slices.Clone(b.last.good)
	for path := range only {
		good[b.lastPos[path]] = b.runbooks[path]
	}
	for _, e := range good {
		if e.rb != nil {
			res.Runbooks = append(res.Runbooks, e.rb)
		}
		res.Pages++
		res.Steps += len(e.summary.Steps)
	}
	p := &sitePlan{res: res, good: good, site: b.last.site, only: only, same: true}
	b.last = p
	return p
}

// assemble runs the templates of p's pages, putting each into sink as it
// is done, then the files made from all of them (search index, sitemap)
// and the assets. The index, search index and sitemap are always redone.
func (b *Builder) assemble(ctx context.Context, p *sitePlan, sink Sink) (*Result, error) {
	res, good, site := p.res, p.good, p.site
	b.mu.Lock()
	th := b.theme
	shared := b.shared
	b.mu.Unlock()
	var written atomic.Int64
	put := func(name string, data []byte) error {
		written.Add(1)
		return sink.Put(name, data)
	}
	if site.NavCompact && !p.same {
		if err := put("nav.js", navJS(site)); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	if p.same && len(b.searchOf) == len(good) {
		for path := range p.only {
			i := b.lastPos[path]
			b.searchOf[i] = good[i].searchJSON
		}
	} else {
		b.searchOf = make([][]byte, len(good))
		for i, e := range good {
			b.searchOf[i] = e.searchJSON
		}
	}
	b.searchJSON, b.searchJS = nil, nil
	b.mu.Unlock()
	// An edit under the dev server: the multi-megabyte index of a big site
	// is assembled when a page asks for it (SearchFiles), not on every
	// keystroke's rebuild.
	res.SearchDeferred = len(p.only) > 0
	// The files made from the whole site and the assets are written beside
	// the last pages, not after them: the search index of a thousand
	// runbooks is two files of 14 MB, and writing them alone at the end
	// left a core idle. Not from the start either: held through the whole
	// render, they raised the peak heap by as much (GC lets the heap grow
	// to twice what is live). Started once nine tenths of the pages are
	// handed out (or after the render, for a site of a few pages), and
	// waited for on every path, so that nothing writes into a sink its
	// caller has aborted.
	rest := make(chan error, 1)
	var restStarted atomic.Bool
	startRest := func() {
		if restStarted.CompareAndSwap(false, true) {
			go func() { rest <- b.putSiteFiles(p, th, put) }()
		}
	}
	restAt := len(good) * 9 / 10
	if len(p.only) > 0 {
		restAt = len(good) + 1 // an update renders a few pages: after them
	}
	// A plan that is the last one's (same) has its site data: the shared
	// pages made from that, or from equal data, still hold.
	reuse := shared != nil && shared.theme == th && (p.same || reflect.DeepEqual(shared.site, site))
	// The workers run the templates, each page put into the sink and let
	// go as soon as it is done.
	pages := func(yield func(pageJob) bool) {
		// The index and 404 pages depend only on the theme and the site
		// data. They go first: the index of a big site lists every
		// runbook (a megabyte at a thousand), and made last it was one
		// worker's alone while the other had nothing left.
		if !reuse {
			t := stringsFor(site.Lang)
			for _, kind := range []string{"index", "404"} {
				page := &Page{Site: site, Lang: site.Lang, T: t, TJSON: stringsJSONFor(site.Lang), Root: "./", Kind: kind, Dev: b.opts.Dev, Title: site.Title}
				name := "index.html"
				if kind == "404" {
					// Served for any missing path, so links must be absolute.
					page.Root = "/"
					page.Title = t["page_not_found"]
					name = "404.html"
				}
				if !yield(pageJob{name: name, kind: kind, page: page, errPrefix: "template " + kind + ".html"}) {
					return
				}
			}
		}
		for i, e := range good {
			if i == restAt {
				startRest()
			}
			if len(p.only) > 0 && !p.only[e.path] {
				continue
			}
			if !yield(pageJob{name: e.summary.Slug + "/index.html", kind: "runbook", page: b.runbookPage(site, i, e), e: e,
				errPrefix: e.path + ": template runbook.html"}) {
				return
			}
		}
	}
	var index, notFound []byte // each set by the one job that makes it
	var rendered atomic.Int64
	var namesMu sync.Mutex
	err := renderPages(ctx, th, pages, func(j *pageJob, out []byte) error {
		namesMu.Lock()
		res.RenderedNames = append(res.RenderedNames, j.name)
		namesMu.Unlock()
		switch j.kind {
		case "runbook":
			rendered.Add(1)
		case "index":
			index = bytes.Clone(out)
		case "404":
			notFound = bytes.Clone(out)
		}
		return put(j.name, out)
	})
	if err == nil {
		startRest()
	}
	if restStarted.Load() {
		err = cmp.Or(err, <-rest)
	}
	if err != nil {
		return nil, err
	}
	res.Rendered = int(rendered.Load())
	sort.Strings(res.RenderedNames)
	if reuse {
		index, notFound = shared.index, shared.notFound
		if err := cmp.Or(put("index.html", index), put("404.html", notFound)); err != nil {
			return nil, err
		}
	} else {
		b.mu.Lock()
		b.shared = &sharedPages{theme: th, site: site, index: index, notFound: notFound}
		b.mu.Unlock()
	}
	res.Written = int(written.Load())
	return res, nil
}

// putSiteFiles puts the search index (unless deferred), the sitemap (when
// the slugs changed) and the theme's assets.
func (b *Builder) putSiteFiles(p *sitePlan, th *theme, put func(string, []byte) error) error {
	if len(p.only) == 0 {
		js, jsFile := b.SearchFiles()
		if err := cmp.Or(put("search.json", js), put("search.js", jsFile)); err != nil {
			return err
		}
	}
	if !p.same { // the same slugs in the same order
		if err := put("sitemap.xml", sitemap(b.opts.BaseURL, p.good)); err != nil {
			return err
		}
	}
	for name, data := range th.assets {
		if err := put(path.Join("assets", name), data); err != nil {
			return err
		}
	}
	return put("assets/chroma.css", th.chromaCSS)
}

// runbookData is the runbook part of its page, its body rendered; steps
// are stepsOf(rb), made once for the page and the navigation.
func (b *Builder) runbookData(rb *runbook.Runbook, t Strings, content template.HTML, steps []StepData) *RunbookData {
	rd := &RunbookData{
		Slug: rb.Slug, Title: rb.Meta.Title, Summary: rb.Meta.Summary, Tags: rb.Meta.Tags,
		Duration: durationText(rb.Meta.Duration, t), Hash: rb.Hash, Content: content, Requires: rb.Meta.Requires,
		Path: rb.Path, Extra: rb.Meta.Extra,
	}
	for _, p := range rb.Meta.Prerequisites {
		rd.Prerequisites = append(rd.Prerequisites, template.HTML(inlineMarkdown(b.md, p)))
	}
	for _, p := range rb.Params {
		pd := ParamData{Name: p.Name, Label: p.Label(), Description: p.Description, Type: string(p.Type),
			Default: p.Default, Values: p.Values, Secret: p.Secret, Required: p.Required, Group: p.Group}
		if p.Pattern != nil {
			pd.Pattern = p.Pattern.String()
		}
		rd.Params = append(rd.Params, pd)
	}
	rd.Steps = steps
	return rd
}

// runbookPage is the page of good[i], e, of the site. A packed entry's
// body and script data are filled in by the worker that runs its template.
func (b *Builder) runbookPage(site *SiteData, i int, e *entry) *Page {
	rd := *e.data
	page := &Page{Site: site, Lang: e.summary.Lang, T: stringsFor(e.summary.Lang), TJSON: stringsJSONFor(e.summary.Lang), Root: "../", Kind: "runbook", Runbook: &rd,
		Dev: b.opts.Dev, Title: rd.Title, JSON: e.json, Current: &site.Runbooks[i]}
	if i > 0 {
		page.Prev = &site.Runbooks[i-1]
	}
	if i+1 < len(site.Runbooks) {
		page.Next = &site.Runbooks[i+1]
	}
	if b.opts.EditURL != "" {
		if rel, err := filepath.Rel(b.opts.Content, e.path); err == nil && !strings.HasPrefix(rel, "..") {
			var segs []string
			for _, s := range strings.Split(filepath.ToSlash(rel), "/") {
				segs = append(segs, url.PathEscape(s))
			}
			page.EditURL = strings.ReplaceAll(b.opts.EditURL, "{path}", strings.Join(segs, "/"))
		}
	}
	return page
}

func siteLang(good []*entry) string {
	if len(good) == 0 {
		return "en"
	}
	for _, e := range good {
		if e.summary.Lang != good[0].summary.Lang {
			return "en"
		}
	}
	return good[0].summary.Lang
}

func durationText(d time.Duration, t Strings) string {
	if d <= 0 {
		return ""
	}
	return fmt.Sprintf("%d%s", int(d.Minutes()+0.5), t["minutes"])
}

func stepsOf(rb *runbook.Runbook) []StepData {
	out := make([]StepData, len(rb.Steps))
	for i, s := range rb.Steps {
		out[i] = StepData{ID: s.ID, Number: s.Number, Title: s.Title}
		if s.When != nil {
			out[i].When = s.When.Src
		}
	}
	return out
}

func summaryOf(rb *runbook.Runbook, t Strings) RunbookSummary {
	return RunbookSummary{Slug: rb.Slug, Title: rb.Meta.Title, Summary: rb.Meta.Summary, Tags: rb.Meta.Tags,
		Lang: rb.Meta.Lang, Duration: durationText(rb.Meta.Duration, t), Steps: stepsOf(rb)}
}

// pageJSON is what the page script needs to know about the runbook.
func pageJSON(rb *runbook.Runbook) template.JS {
	type blockJSON struct {
		Hash     string        `json:"hash"`
		Target   string        `json:"target"`
		Step     string        `json:"step,omitempty"`
		Refs     []string      `json:"refs,omitempty"`
		Confirm  bool          `json:"confirm,omitempty"`
		When     *runbook.Cond `json:"when,omitempty"`
		Captures []string      `json:"captures,omitempty"`
		Mute     []string      `json:"mute,omitempty"` // RE2, one line each (the page turns them into RegExps)
		MuteWhy  string        `json:"mute_why,omitempty"`
	}
	type paramJSON struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Default string   `json:"default,omitempty"`
		Values  []string `json:"values,omitempty"`
		Pattern string   `json:"pattern,omitempty"`
		Secret  bool     `json:"secret,omitempty"`
		Req     bool     `json:"required,omitempty"`
	}
	out := struct {
		Slug   string               `json:"slug"`
		Hash   string               `json:"hash"`
		Lang   string               `json:"lang"`
		Params []paramJSON          `json:"params"`
		Blocks map[string]blockJSON `json:"blocks"`
	}{Slug: rb.Slug, Hash: rb.Hash, Lang: rb.Meta.Lang, Params: []paramJSON{}, Blocks: map[string]blockJSON{}}
	for _, p := range rb.Params {
		pj := paramJSON{Name: p.Name, Type: string(p.Type), Default: p.Default, Values: p.Values, Secret: p.Secret, Req: p.Required}
		if p.Pattern != nil {
			pj.Pattern = p.Pattern.String()
		}
		out.Params = append(out.Params, pj)
	}
	for _, b := range rb.Blocks {
		if !b.Executable() {
			continue
		}
		bj := blockJSON{Hash: b.Hash, Target: string(b.Target), Refs: b.Refs, Confirm: b.Confirm, When: b.When}
		if b.Step != nil {
			bj.Step = b.Step.ID
		}
		for _, c := range b.Captures {
			bj.Captures = append(bj.Captures, c.Name)
		}
		for _, re := range b.Mute {
			bj.Mute = append(bj.Mute, strings.TrimPrefix(re.String(), "(?m)"))
		}
		bj.MuteWhy = b.MuteWhy
		out.Blocks[b.ID] = bj
	}
	j, _ := json.Marshal(out)
	return template.JS(j)
}

func sitemap(base string, good []*entry) []byte {
	var buf bytes.Buffer
	buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	buf.WriteString(`<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + "\n")
	fmt.Fprintf(&buf, "  <url><loc>%s</loc></url>\n", template.HTMLEscapeString(base))
	for _, e := range good {
		fmt.Fprintf(&buf, "  <url><loc>%s%s/</loc></url>\n", template.HTMLEscapeString(base), template.HTMLEscapeString(e.summary.Slug))
	}
	buf.WriteString("</urlset>\n")
	return buf.Bytes()
}

// theme is a loaded theme: parsed templates per page kind and asset bytes.
type theme struct {
	pages     map[string]*template.Template
	assets    map[string][]byte
	chromaCSS []byte
}

func loadTheme(fsys fs.FS, minify bool) (*theme, error) {
	th := &theme{pages: map[string]*template.Template{}, assets: map[string][]byte{}}
	base, err := fs.ReadFile(fsys, "layouts/base.html")
	if err != nil {
		return nil, fmt.Errorf("theme: %w (a theme needs layouts/base.html)", err)
	}
	for _, kind := range []string{"runbook", "index", "404"} {
		body, err := fs.ReadFile(fsys, "layouts/"+kind+".html")
		if err != nil {
			return nil, fmt.Errorf("theme: %w", err)
		}
		t, err := template.New("base.html").Funcs(templateFuncs).Parse(string(base))
		if err != nil {
			return nil, fmt.Errorf("theme: layouts/base.html: %w", err)
		}
		if _, err := t.New(kind + ".html").Parse(string(body)); err != nil {
			return nil, fmt.Errorf("theme: layouts/%s.html: %w", kind, err)
		}
		th.pages[kind] = t
	}
	err = fs.WalkDir(fsys, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == "assets" {
				return fs.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		if minify {
			if data, err = minifyAsset(name, data); err != nil {
				return err
			}
		}
		th.assets[name] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("theme assets: %w", err)
	}
	th.chromaCSS, err = chromaCSS()
	if err != nil {
		return nil, err
	}
	if minify {
		if th.chromaCSS, err = minifyAsset("chroma.css", th.chromaCSS); err != nil {
			return nil, err
		}
	}
	return th, nil
}

// sharedPages are the pages made from the site data alone.
type sharedPages struct {
	theme           *theme
	site            *SiteData
	index, notFound []byte
}

// pageJob is one page to render.
type pageJob struct {
	name, kind string
	page       *Page
	e          *entry // a runbook page's entry; nil for the others
	errPrefix  string
}

// bufPool holds page buffers between pages: a page is tens to hundreds of
// kilobytes, and a fresh buffer per page grew through every size on the
// way and was garbage at once.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// renderPages renders the pages jobs yields on GOMAXPROCS goroutines (the
// templates and finished page data are only read) and hands each to done,
// which may be called from several goroutines at once (so that files are
// written in parallel too), with output valid only during the call. The
// first error in job order wins; it stops the feed.
func renderPages(ctx context.Context, th *theme, jobs iter.Seq[pageJob], done func(*pageJob, []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type numbered struct {
		i int
		pageJob
	}
	workers := runtime.GOMAXPROCS(0)
	next := make(chan numbered, workers)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // the errors
		firstI = -1
		first  error
	)
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstI < 0 || i < firstI {
			firstI, first = i, err
		}
		cancel()
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bufPool.Get().(*bytes.Buffer)
			defer bufPool.Put(buf)
			var unpacked []byte
			for j := range next {
				if j.e != nil && j.e.packed != nil {
					var err error
					j.page.Runbook.Content, j.page.JSON, unpacked, err = j.e.unpack(unpacked)
					if err != nil {
						fail(j.i, err)
						continue
					}
				}
				buf.Reset()
				err := th.pages[j.kind].ExecuteTemplate(buf, "base.html", j.page)
				if err != nil {
					err = fmt.Errorf("%s: %w", j.errPrefix, err)
				}
				if err == nil && ctx.Err() == nil {
					err = done(&j.pageJob, buf.Bytes())
				}
				if err != nil {
					fail(j.i, err)
				}
			}
		}()
	}
	i := 0
	for j := range jobs {
		select {
		case next <- numbered{i, j}:
			i++
			continue
		case <-ctx.Done():
		}
		break
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return context.Cause(ctx)
}

var templateFuncs = template.FuncMap{
	"add": func(a, b int) int { return a + b },
	"join": func(sep string, s []string) string {
		return strings.Join(s, sep)
	},
}

// navJS lists every runbook for the page script (compact navigation).
func navJS(site *SiteData) []byte {
	type item struct {
		Slug  string `json:"slug"`
		Title string `json:"title"`
	}
	items := make([]item, len(site.Runbooks))
	for i, r := range site.Runbooks {
		items[i] = item{r.Slug, r.Title}
	}
	j, _ := json.Marshal(items)
	return append(append([]byte("window.CAIRN_NAV="), j...), ";\nif (window.Cairn && window.Cairn.fillNav) window.Cairn.fillNav();\n"...)
}

// SearchFiles returns search.json and search.js for the last build or
// update, assembling them once per change.
func (b *Builder) SearchFiles() (jsonData, jsData []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.searchJS == nil {
		b.searchJSON, b.searchJS = assembleSearch(b.searchOf)
	}
	return b.searchJSON, b.searchJS
}

// assembleSearch joins the runbooks' marshalled entries into the same bytes
// as json.Marshal of all entries: "null" when there are none, else the
// entries' elements joined with commas. search.json is a capped slice of search.js (both are only read),
// so the index, which is megabytes on a big site, is allocated once.
func assembleSearch(parts [][]byte) ([]byte, []byte) {
	const jsPrefix, jsSuffix = "window.CAIRN_SEARCH=", ";\n"
	n := len("null")
	if len(parts) > 0 {
		n = 1
		for _, e := range parts {
			n += len(e) + 1 // element and ',' or ']'
		}
	}
	buf := make([]byte, 0, len(jsPrefix)+n+len(jsSuffix))
	buf = append(buf, jsPrefix...)
	if len(parts) == 0 {
		buf = append(buf, "null"...)
	}
	sep := byte('[')
	for _, e := range parts {
		buf = append(buf, sep)
		buf = append(buf, e...)
		sep = ','
	}
	if len(parts) > 0 {
		buf = append(buf, ']')
	}
	js := buf[len(jsPrefix):len(buf):len(buf)]
	buf = append(buf, jsSuffix...)
	return js, buf
}
