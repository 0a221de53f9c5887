package site

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/cairn-dev/cairn/internal/httpguard"
	"github.com/cairn-dev/cairn/internal/loopback"
)

// ServerOptions configure the development server.
type ServerOptions struct {
	Addr     string       // host:port to listen on; the port is tried upward if busy
	ThemeDir string       // watched when set (a theme given with --theme)
	Log      io.Writer    // progress and errors
	API      http.Handler // mounted at /api/ (the executor), may be nil
	// Ready, if set, receives the URL once the server listens.
	Ready func(url string)
	// OnUpdate, if set, is called after the first build and every rebuild
	// (the executor takes the runbooks from it; tests and benchmarks wait on it).
	OnUpdate func(res *Result, err error)
}

// Server builds the site into memory, serves it on loopback, watches the
// content (and theme) for changes, rebuilds what changed and tells open
// pages to reload.
type Server struct {
	b    *Builder
	opts ServerOptions

	mu    sync.RWMutex
	files map[string][]byte
	diags []string

	clientsMu sync.Mutex
	clients   map[chan []byte]struct{}

	gz gzipCache

	buildMu sync.Mutex // one rebuild at a time, so builds publish in order

	// cuts are the open pages' last cut into parts (DiffPage), kept for
	// the pages an edit patched, so that the next edit cuts only its new
	// page. Used under buildMu (publishQuiet's callers hold it).
	cuts map[string]*pageCut
}

// NewServer returns a server for the builder's content.
func NewServer(b *Builder, opts ServerOptions) *Server {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:1313"
	}
	return &Server{b: b, opts: opts, clients: map[chan []byte]struct{}{}}
}

// Run builds, serves and watches until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	res, err := s.b.Build(ctx)
	if err != nil {
		return err
	}
	s.publish(res, nil)
	for _, w := range res.Warnings {
		fmt.Fprintln(s.opts.Log, w.String())
	}
	fmt.Fprintf(s.opts.Log, "built %s, %s in %s\n", plural(len(res.Runbooks), "runbook"), plural(res.Steps, "step"), ms(res.Duration))
	if s.opts.OnUpdate != nil {
		s.opts.OnUpdate(res, nil)
	}

	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch content: %w", err)
	}
	defer watcher.Close()
	for _, root := range []string{s.b.opts.Content, s.opts.ThemeDir} {
		if root == "" {
			continue
		}
		if err := watchTree(watcher, root); err != nil {
			return err
		}
	}

	ln, err := listenFrom(s.opts.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler()}
	httpguard.Harden(srv, httpguard.Limits{})
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(s.opts.Log, "serving on %s (Ctrl+C to stop)\n", url)
	if s.opts.Ready != nil {
		s.opts.Ready(url)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch(ctx, watcher)
	}()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	s.closeClients()
	_ = srv.Shutdown(shutdownCtx)
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// listenFrom listens on addr, or on the next free port above it.
func listenFrom(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	var p int
	fmt.Sscanf(port, "%d", &p)
	var lastErr error
	for i := 0; i < 20; i++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(p+i)))
		if err == nil {
			return ln, nil
		}
		lastErr = err
		if p == 0 {
			break
		}
	}
	return nil, fmt.Errorf("listen on %s: %w (try --port)", addr, lastErr)
}

func watchTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if err := w.Add(p); err != nil {
				return fmt.Errorf("watch %s: %w", p, err)
			}
		}
		return nil
	})
}

// debounce gathers events this long before a rebuild, since editors write
// a file in several steps: in place (truncate, write, close) or a new file
// renamed over the old, each within a millisecond. A burst that outlasts it
// costs one more incremental rebuild, not a wrong page: the events that
// follow rebuild again. (A save by rename is whole when its event comes;
// the writes before it were to another name.) It is a tenth of what an edit
// takes to show.
const debounce = 2 * time.Millisecond

func (s *Server) watch(ctx context.Context, w *fsnotify.Watcher) {
	pending := map[string]bool{}
	themeChanged, rescan := false, false
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			fmt.Fprintf(s.opts.Log, "watch: %v\n", err)
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
					_ = watchTree(w, ev.Name)
				}
			}
			switch {
			case s.opts.ThemeDir != "" && within(ev.Name, s.opts.ThemeDir):
				themeChanged = true
			case IsContentFile(ev.Name):
				pending[ev.Name] = true
			case ignoredName(ev.Name):
				// A hidden folder is never served, and a dotfile or a
				// backup~ is never a runbook: the write-back's temporary
				// file renamed into place must not rebuild everything.
				continue
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				// A folder moved or removed as a whole reports only its own
				// name, not the runbooks in it: rebuild everything so that
				// none of them stays served.
				rescan = true
			default:
				continue
			}
			timer.Reset(debounce)
		case <-timer.C:
			var res *Result
			var err error
			var changed []string // nil: everything was rebuilt
			s.buildMu.Lock()
			if !themeChanged && !rescan {
				// A file already rendered as it is now (the executor's
				// write-back, re-rendered by RefreshAfter) needs no build,
				// and open pages no reload: they show that result already.
				for p := range pending {
					if s.b.current(p) {
						delete(pending, p)
					}
				}
				if len(pending) == 0 {
					s.buildMu.Unlock()
					continue
				}
			}
			if themeChanged {
				if err = s.b.ReloadTheme(); err == nil {
					res, err = s.b.Build(ctx)
				}
			} else if rescan {
				res, err = s.b.Build(ctx)
			} else {
				for p := range pending {
					changed = append(changed, p)
				}
				sort.Strings(changed)
				res, err = s.b.Update(ctx, changed)
			}
			pending, themeChanged, rescan = map[string]bool{}, false, false
			if ctx.Err() != nil {
				s.buildMu.Unlock()
				return
			}
			s.publishQuiet(res, err, true, s.contentNames(changed))
			if s.opts.OnUpdate != nil {
				s.opts.OnUpdate(res, err)
			}
			s.buildMu.Unlock()
		}
	}
}

// ignoredName: a name whose removal or rename cannot take a runbook away.
func ignoredName(p string) bool {
	base := filepath.Base(p)
	return strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~")
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// Refresh re-renders the given runbook files now (after a run, so that the
// page bakes in its result). Open pages are not reloaded: they already show
// the result live, and a reload would lose the reader's place (and cut the
// streams of blocks still running).
func (s *Server) Refresh(ctx context.Context, paths []string) { s.RefreshAfter(ctx, paths, nil) }

// RefreshAfter runs write, which changes the given runbook files (the
// executor writing a verified output back), and re-renders them as Refresh
// does. The file watcher then sees them already rendered and reloads no page.
func (s *Server) RefreshAfter(ctx context.Context, paths []string, write func()) {
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if write != nil {
		write()
	}
	res, err := s.b.Update(ctx, paths)
	s.publishQuiet(res, err, false, nil)
	if s.opts.OnUpdate != nil {
		s.opts.OnUpdate(res, err)
	}
}

// maxPatches: an edit that made more pages again than this (a title that
// is in every page's navigation) sends no patches; each open page fetches
// itself instead.
const maxPatches = 8

// publish swaps in a new build and notifies pages.
func (s *Server) publish(res *Result, err error) { s.publishQuiet(res, err, true, nil) }

// contentNames are paths relative to the content folder, slash-separated.
func (s *Server) contentNames(paths []string) []string {
	var out []string
	for _, p := range paths {
		if rel, err := filepath.Rel(s.b.opts.Content, p); err == nil {
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out
}

// publishQuiet swaps in a new build; with notify it tells open pages to
// reload (naming the changed content files when only some changed).
func (s *Server) publishQuiet(res *Result, err error, notify bool, changed []string) {
	var msgs []string
	if err != nil {
		msgs = []string{err.Error()}
	}
	if res != nil {
		for _, d := range res.Diagnostics {
			msgs = append(msgs, d.String())
		}
	}
	s.mu.Lock()
	first := s.files == nil
	// The pages an edit made again, as open pages have them now: a page
	// that changed only in prose gets a patch in the event.
	var before map[string][]byte
	if notify && changed != nil && res != nil && s.files != nil && len(res.RenderedNames) <= maxPatches {
		before = map[string][]byte{}
		for _, name := range res.RenderedNames {
			if old, ok := s.files[name]; ok && strings.HasSuffix(name, "/index.html") {
				before[name] = old
			}
		}
	}
	if res != nil {
		if s.files == nil || res.Rendered == len(res.Runbooks) {
			s.files = res.Files
		} else {
			// Incremental: keep the pages that were not re-rendered.
			merged := make(map[string][]byte, len(s.files))
			for k, v := range s.files {
				if !strings.HasSuffix(k, "/index.html") || k == "index.html" {
					continue
				}
				merged[k] = v
			}
			for k, v := range res.Files {
				merged[k] = v
			}
			if res.SearchDeferred {
				// Made on the next request for them (serveFile).
				delete(merged, "search.json")
				delete(merged, "search.js")
			}
			// Drop pages of runbooks that are gone.
			live := map[string]bool{}
			for _, rb := range res.Runbooks {
				live[rb.Slug+"/index.html"] = true
			}
			for k := range merged {
				if strings.HasSuffix(k, "/index.html") && !live[k] {
					delete(merged, k)
				}
			}
			s.files = merged
		}
	}
	s.diags = msgs
	s.mu.Unlock()
	// The first build is reported by Run.
	if res != nil && !(notify && first) {
		fmt.Fprintf(s.opts.Log, "rebuilt %d page(s) in %s\n", res.Rendered, ms(res.Duration))
	}
	for _, m := range msgs {
		fmt.Fprintln(s.opts.Log, m)
	}
	if !notify && len(msgs) == 0 {
		return
	}
	ev := map[string]any{"type": "reload"}
	if changed != nil {
		ev["changed"] = changed
		if res != nil {
			// The pages made again: an open page that is not one of them
			// stays as it is, and one that is patches what changed.
			ev["pages"] = res.RenderedNames
			patches := map[string]*PagePatch{}
			if s.cuts == nil {
				s.cuts = map[string]*pageCut{}
			}
			for name, old := range before {
				a := s.cuts[name]
				if a == nil || !bytes.Equal(a.src, old) {
					a = splitPage(old)
				}
				b := splitPage(res.Files[name])
				if p, _ := diffCuts(a, b); p != nil {
					patches[name] = p
				}
				s.cuts[name] = b
			}
			if len(patches) > 0 {
				ev["patches"] = patches
			}
		}
	}
	if len(msgs) > 0 {
		ev = map[string]any{"type": "errors", "errors": msgs}
	}
	data, _ := json.Marshal(ev)
	s.broadcast(data)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// Handler serves the in-memory site, the live-reload endpoints and the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	if s.opts.API != nil {
		mux.Handle("/api/", s.opts.API)
	}
	mux.HandleFunc("/_cairn/events", s.events)
	mux.HandleFunc("/_cairn/live.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		io.WriteString(w, liveJS)
	})
	mux.HandleFunc("/", s.serveFile)
	return loopbackOnly(mux)
}

// loopbackOnly refuses requests whose Host is not a loopback name, so a web
// page cannot reach the server through DNS rebinding, and forbids framing.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopback.IsHost(r.Host) {
			http.Error(w, "forbidden host", http.StatusForbidden)
			return
		}
		// The pages carry the executor's token and Run buttons: no other
		// site may frame them (clickjacking).
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if name == "search.json" || name == "search.js" {
		s.mu.RLock()
		_, ok := s.files[name]
		s.mu.RUnlock()
		if !ok {
			js, jsFile := s.b.SearchFiles()
			s.mu.Lock()
			s.files["search.json"], s.files["search.js"] = js, jsFile
			s.mu.Unlock()
		}
	}
	s.mu.RLock()
	data, ok := s.files[name]
	if !ok && (name == "" || !strings.Contains(path.Base(name), ".")) {
		if strings.HasSuffix(r.URL.Path, "/") || name == "" {
			data, ok = s.files[path.Join(name, "index.html")]
		} else if _, isDir := s.files[name+"/index.html"]; isDir {
			s.mu.RUnlock()
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
			return
		}
	}
	notFound := s.files["404.html"]
	s.mu.RUnlock()
	w.Header().Set("Cache-Control", "no-cache")
	if !ok {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		w.Write(notFound)
		return
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" || strings.HasSuffix(name, "/index.html") || name == "index.html" {
		ct = "text/html; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.gz.write(w, r, name, ct, data)
}

// events streams reload and error notices to open pages (Server-Sent Events).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	// The stream carries the pages' changed prose (patches): only the
	// pages of this server read it. A browser sends no Origin on a
	// same-origin EventSource, or this server's own; another site's page
	// (one that reaches a loopback port) is refused before anything is
	// sent, as well as left without CORS headers.
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, "forbidden origin", http.StatusForbidden)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ch := make(chan []byte, 4)
	s.clientsMu.Lock()
	s.clients[ch] = struct{}{}
	s.clientsMu.Unlock()
	defer func() {
		s.clientsMu.Lock()
		if _, ok := s.clients[ch]; ok {
			delete(s.clients, ch)
		}
		s.clientsMu.Unlock()
	}()
	s.mu.RLock()
	if len(s.diags) > 0 {
		data, _ := json.Marshal(map[string]any{"type": "errors", "errors": s.diags})
		fmt.Fprintf(w, "data: %s\n\n", data)
	}
	s.mu.RUnlock()
	fmt.Fprint(w, ": connected\n\n")
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case msg, ok := <-ch:
			if !ok {
				return
			}
			fmt.Fprintf(w, "data: %s\n\n", msg)
			fl.Flush()
		}
	}
}

func (s *Server) broadcast(msg []byte) {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	for ch := range s.clients {
		select {
		case ch <- msg:
		default: // a slow page misses a notice; it reloads on the next one
		}
	}
}

func (s *Server) closeClients() {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	for ch := range s.clients {
		close(ch)
		delete(s.clients, ch)
	}
}

// liveJS reloads the page when the server rebuilt it and shows build errors
// in an overlay, so a broken runbook is visible in the browser too.
const liveJS = `(function () {
  if (!window.EventSource) return;
  // A compact panel at the bottom: the problems, a count, and a close
  // button; closed, it stays closed until the problems change. It covers at
  // most a third of the window and only its own area takes clicks.
  var box, list, title, closedFor = null, last = '';
  function show(errors) {
    last = errors.join('\n');
    if (!box) {
      box = document.createElement('section');
      box.id = 'cairn-errors';
      box.setAttribute('role', 'alert');
      box.style.cssText = 'position:fixed;left:12px;right:12px;bottom:12px;max-height:33vh;display:flex;flex-direction:column;z-index:9999;' +
        'background:#2d0b0b;color:#ffd7d7;font:13px/1.5 ui-monospace,monospace;border:1px solid #e5484d;border-radius:8px;box-shadow:0 6px 24px rgba(0,0,0,.35)';
      var head = document.createElement('div');
      head.style.cssText = 'display:flex;align-items:center;gap:8px;padding:6px 12px;border-bottom:1px solid #5c1d1d;font-weight:700';
      title = document.createElement('span');
      title.style.flex = '1';
      var close = document.createElement('button');
      close.type = 'button';
      close.className = 'cairn-errors-close';
      close.setAttribute('aria-label', 'Close');
      close.textContent = '×';
      close.style.cssText = 'background:none;border:0;color:inherit;font:inherit;font-size:18px;line-height:1;cursor:pointer;padding:0 4px';
      close.onclick = function () { closedFor = last; box.hidden = true; };
      head.appendChild(title);
      head.appendChild(close);
      list = document.createElement('pre');
      list.style.cssText = 'margin:0;padding:8px 12px;overflow:auto;white-space:pre-wrap';
      box.appendChild(head);
      box.appendChild(list);
      document.body.appendChild(box);
    }
    title.textContent = errors.length === 1 ? '1 problem (the page shows the last good build)' : errors.length + ' problems (the page shows the last good build)';
    list.textContent = last;
    box.hidden = errors.length === 0 || closedFor === last;
  }
  // Patching. This script runs before the page's own (they are deferred),
  // so what it sees now is the page as served: it notes, for the runbook's
  // content, each top-level part and each part of a step as HTML. When an
  // edit changes only parts that hold nothing the page's scripts bring to
  // life (code blocks, tabs, conditions, parameters, controls), those parts
  // are swapped in place: the scroll, the form's values, open results and
  // running blocks' streams stay. Anything else reloads the page.
  var LIVE = '.cb, .tabs, [data-when], .prm, .step-title, form, input, button, select, textarea, script, dialog';
  function parts(main) {
    var content = main && main.querySelector('.rb-content');
    if (!content) return null;
    var list = [], shape = [];
    Array.prototype.forEach.call(content.children, function (c) {
      if (c.matches('section.step')) {
        shape.push(c.cloneNode(false).outerHTML);
        Array.prototype.forEach.call(c.children, function (k) { list.push(k); shape.push(k.tagName); });
        shape.push('/section');
      } else { list.push(c); shape.push(c.tagName); }
    });
    // The page data (compared on its own) and the runbook's hash change
    // with every edit; both are carried over below.
    var rest = main.innerHTML.replace(content.outerHTML, '').replace(/(<article[^>]*?) data-hash="[^"]*"/, '$1')
      .replace(/<script type="application\/json" id="cairn-data">[\s\S]*?<\/script>/, '');
    return { list: list, html: list.map(function (n) { return n.outerHTML; }), shape: shape.join(' '), rest: rest };
  }
  // same: the script data id is the same in both, apart from the runbook's
  // hash.
  function same(id, a, b) {
    function data(d) {
      var x = d.getElementById(id);
      if (!x) return null;
      try { var v = JSON.parse(x.textContent); if (v && typeof v === 'object') delete v.hash; return JSON.stringify(v); } catch (e) { return x.textContent; }
    }
    return data(a) === data(b);
  }
  // The navigation lies outside main: another runbook's new title or
  // steps change it on every page.
  function navOf(d) { var n = d.getElementById('sidebar'); return n ? n.outerHTML : ''; }
  var served = parts(document.querySelector('main')), servedNav = navOf(document);
  function here() {
    var p = location.pathname.replace(/^\//, '');
    return (p === '' || /\/$/.test(p)) ? p + 'index.html' : p;
  }
  function patch() {
    return fetch(location.pathname, { cache: 'no-store' }).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.text();
    }).then(function (text) {
      var doc = new DOMParser().parseFromString(text, 'text/html');
      var next = parts(doc.querySelector('main'));
      // Why a page reloaded instead stays for the reloaded page to tell
      // (sessionStorage cairn:patch-miss), for whoever wonders.
      function miss(why) { try { sessionStorage.setItem('cairn:patch-miss', why); } catch (e) {} return false; }
      if (!served || !next) return miss('not a runbook page');
      if (next.shape !== served.shape) return miss('parts added, removed or moved');
      if (next.rest !== served.rest || doc.title !== document.title) return miss('outside the content');
      if (navOf(doc) !== servedNav) return miss('the navigation');
      if (!same('cairn-data', doc, document) || !same('cairn-copy', doc, document)) return miss('blocks or parameters');
      var swaps = [];
      for (var i = 0; i < next.list.length; i++) {
        if (next.html[i] === served.html[i]) continue;
        if (served.list[i].matches(LIVE) || served.list[i].querySelector(LIVE) || next.list[i].matches(LIVE) || next.list[i].querySelector(LIVE)) return miss('a live part: ' + next.list[i].tagName);
        swaps.push(i);
      }
      swaps.forEach(function (i) { swap(i, document.importNode(next.list[i], true), next.html[i]); });
      var nart = doc.querySelector('main article[data-hash]'), ndt = doc.getElementById('cairn-data');
      settle(nart && nart.getAttribute('data-hash'), ndt && ndt.textContent, 'fetch');
      return true;
    });
  }
  // swap puts node n in place of part i (html: what parts() notes for it).
  function swap(i, n, html) {
    served.list[i].replaceWith(n);
    served.list[i] = n;
    served.html[i] = html;
  }
  // settle carries over the runbook's new hash and page data (when the new
  // page has them), counts the patch and notes how it came.
  function settle(hash, data, via) {
    var art = document.querySelector('main article[data-hash]'), dt = document.getElementById('cairn-data');
    if (art && hash != null) art.setAttribute('data-hash', hash);
    if (dt && data != null) dt.textContent = data;
    var d = document.documentElement;
    d.setAttribute('data-patched', String((+d.getAttribute('data-patched') || 0) + 1));
    d.setAttribute('data-patched-via', via);
  }
  // apply: the server's patch for this page (site.PagePatch), when the
  // page is the one it was worked out from; false sends the page to fetch
  // itself.
  function apply(p) {
    var art = document.querySelector('main article[data-hash]');
    if (!served || !art || art.getAttribute('data-hash') !== p.base || served.list.length !== p.n) return false;
    p.parts.forEach(function (part) {
      var t = document.createElement('template');
      t.innerHTML = part.html;
      var n = t.content.firstElementChild;
      swap(part.i, n, n.outerHTML);
    });
    settle(p.hash, p.data, 'event');
    return true;
  }
  var es = new EventSource('/_cairn/events');
  es.onmessage = function (e) {
    var m = JSON.parse(e.data);
    if (m.type === 'reload') {
      if (m.pages && m.pages.indexOf(here()) < 0) return; // this page was not made again
      if (!m.pages) { location.reload(); return; }
      if (m.patches && m.patches[here()] && apply(m.patches[here()])) return;
      patch().then(function (ok) { if (!ok) location.reload(); }, function () { location.reload(); });
    }
    else if (m.type === 'errors') { show(m.errors); }
  };
})();
`

// plural is "1 runbook", "2 runbooks".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
