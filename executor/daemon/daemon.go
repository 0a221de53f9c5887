// Package daemon is the executor's HTTP API: the page (or the CLI) asks it
// to run a block of content it loaded itself, and streams the output back.
// It listens on every reader's laptop, so every request is checked: token,
// Origin, Host, body size, and the block must exist with the hash the page
// showed.
package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/term"
	"github.com/cairn-dev/cairn/internal/loopback"
	"github.com/cairn-dev/cairn/runbook"
)

// MaxBody bounds request bodies; a run request is a few parameters.
const MaxBody = 64 << 10

// replayBytes is how much output a late subscriber is sent first.
const replayBytes = 256 << 10

// subscriberBuffer is how many events a slow subscriber may lag behind
// before output it has no room for is skipped (and counted).
const subscriberBuffer = 512

// keepRuns and keepBytes bound the finished runs kept in memory (for late
// subscribers and GET /api/runs/{id}); older ones are in the journal.
const (
	// maxStreams caps open event streams (each holds a connection).
	maxStreams = 64
	keepRuns   = 200
	keepBytes  = 64 << 20
)

// Content is the loaded runbooks the daemon may run blocks of.
type Content interface {
	Runbooks() []*runbook.Runbook
}

// Server is the executor API.
type Server struct {
	Engine  *executor.Engine
	Content Content
	Token   string
	// AllowOrigins are the page origins (scheme://host[:port]) allowed to
	// call the API from a browser. Requests without an Origin (the CLI,
	// curl) need only the token.
	AllowOrigins []string
	Version      string
	// Where, if set, describes the kube context a runbook's kube blocks
	// will touch (shown on the page before anything runs).
	Where func(rb *runbook.Runbook) (string, error)
	// SandboxValues, if set, gives the values the sandbox in use offers a
	// runbook's parameters (GET /api/runbooks/{slug}/target reports them
	// as sandbox_values; the page offers to fill them in).
	SandboxValues func(rb *runbook.Runbook) map[string]string
	// Targets, if set, reports what blocks would run against now (cluster,
	// SSH hosts, the sandbox's state); GET /api/health includes it so that
	// the page follows a sandbox coming and going.
	Targets func() any
	// AcceptSandbox, if set, makes the sandbox id (offered in Targets'
	// view) the one blocks run against: POST /api/sandbox/accept, the
	// reader's answer on the page. A server never switches to another
	// sandbox on its own.
	AcceptSandbox func(ctx context.Context, id string) error
	// OnRecord, if set, is called with each finished run before it is
	// reported (write-back): what it sets in rec (WriteBack) reaches the
	// page and the API with the run.
	OnRecord func(rb *runbook.Runbook, rec *executor.Record)
	// Terminals, if set, are the page's terminals (cairn serve
	// --terminal); nil answers every terminal request 403 terminal_off.
	Terminals *term.Manager

	streams atomic.Int64
	tickets tickets

	mu    sync.Mutex
	runs  map[string]*liveRun
	order []string
	wg    sync.WaitGroup
	base  context.Context
	stop  context.CancelFunc
}

// NewToken returns a fresh random token for pairing.
func NewToken() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// Close cancels every running block and waits for them to finish, and
// ends every terminal (each is journaled).
func (s *Server) Close() {
	s.init()
	s.stop()
	s.wg.Wait()
	if s.Terminals != nil {
		s.Terminals.CloseAll()
	}
}

func (s *Server) init() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runs == nil {
		s.runs = map[string]*liveRun{}
		s.base, s.stop = context.WithCancel(context.Background())
	}
}

// Handler returns the API handler, to be mounted at /api/.
func (s *Server) Handler() http.Handler {
	s.init()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/health", s.health)
	mux.HandleFunc("GET /api/runbooks", s.listRunbooks)
	mux.HandleFunc("GET /api/runbooks/{slug}/results", s.results)
	mux.HandleFunc("GET /api/runbooks/{slug}/target", s.target)
	mux.HandleFunc("POST /api/runs", s.startRun)
	mux.HandleFunc("POST /api/plans", s.startPlan)
	mux.HandleFunc("POST /api/plans/preview", s.previewPlan)
	mux.HandleFunc("GET /api/runs", s.listRuns)
	mux.HandleFunc("GET /api/runs/{id}", s.getRun)
	mux.HandleFunc("GET /api/runs/{id}/events", s.events)
	mux.HandleFunc("POST /api/runs/{id}/cancel", s.cancelRun)
	mux.HandleFunc("POST /api/sandbox/accept", s.acceptSandbox)
	mux.HandleFunc("POST /api/terminals", s.startTerminal)
	mux.HandleFunc("GET /api/terminals", s.listTerminals)
	mux.HandleFunc("POST /api/terminals/{id}/attach", s.attachTerminal)
	mux.HandleFunc("POST /api/terminals/{id}/done", s.terminalDone)
	mux.HandleFunc("POST /api/terminals/{id}/close", s.closeTerminal)
	// The WebSocket carries no token (a browser cannot send one there):
	// it has a guard of its own, with the ticket instead.
	outer := http.NewServeMux()
	outer.Handle("GET /api/terminals/{id}/ws", s.wsGuard(s.terminalWS))
	outer.Handle("/", s.guard(mux))
	return outer
}

// apiError is the JSON error body; Code is stable for scripts and the page.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	// Missing details missing_capture, for a page to say it in its own
	// language.
	Missing *MissingCapture `json:"missing,omitempty"`
}

// MissingCapture is what a plan lacks: the block that reads a value no
// block before it captures, the value, whether it is secret, and the steps
// that capture it (with the condition that keeps one off, if any).
type MissingCapture struct {
	Block  string        `json:"block"`
	Line   int           `json:"line"`
	Name   string        `json:"name"`
	Secret bool          `json:"secret,omitempty"`
	Steps  []CaptureStep `json:"steps,omitempty"`
}

// CaptureStep is a step that captures a missing value.
type CaptureStep struct {
	Step string `json:"step"`
	When string `json:"when,omitempty"` // set when the capturing block's condition is false now
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...), Code: code})
}

// guard applies the checks every request must pass, before any handler.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Vary", "Origin")
		// DNS rebinding: a page on evil.example that resolves to 127.0.0.1
		// still sends Host: evil.example.
		if !loopback.IsHost(r.Host) {
			fail(w, http.StatusForbidden, "bad_host", "Host %q is not a loopback name", r.Host)
			return
		}
		origin := r.Header.Get("Origin")
		if origin != "" {
			if !s.originAllowed(origin) {
				fail(w, http.StatusForbidden, "bad_origin", "origin %q is not allowed; start the executor with --allow-origin %s", origin, origin)
				return
			}
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.Header().Set("Access-Control-Max-Age", "600")
		}
		if r.Method == http.MethodOptions {
			if origin == "" {
				fail(w, http.StatusForbidden, "bad_origin", "preflight without an Origin")
				return
			}
			// Chrome's Private Network Access: a public page asking for a
			// loopback address must be answered explicitly, and only for
			// origins we allow (checked above).
			if r.Header.Get("Access-Control-Request-Private-Network") == "true" {
				w.Header().Set("Access-Control-Allow-Private-Network", "true")
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !s.tokenOK(r) {
			fail(w, http.StatusUnauthorized, "bad_token", "missing or wrong token; open the pairing URL the executor printed")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) tokenOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || s.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) == 1
}

func (s *Server) originAllowed(origin string) bool {
	for _, o := range s.AllowOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{"ok": true, "version": s.Version, "terminals": s.Terminals != nil}
	if s.Targets != nil {
		out["targets"] = s.Targets()
	}
	writeJSON(w, http.StatusOK, out)
}

var slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,127}$`)

// runbook finds a loaded runbook by slug. The slug is only compared, never
// used as a path, so traversal is impossible.
func (s *Server) runbook(slug string) *runbook.Runbook {
	if !slugRe.MatchString(slug) {
		return nil
	}
	for _, rb := range s.Content.Runbooks() {
		if rb.Slug == slug {
			return rb
		}
	}
	return nil
}

// loaded finds a loaded runbook by slug, or answers 404 unknown_runbook
// and returns nil.
func (s *Server) loaded(w http.ResponseWriter, slug string) *runbook.Runbook {
	rb := s.runbook(slug)
	if rb == nil {
		fail(w, http.StatusNotFound, "unknown_runbook", "no runbook %q in the loaded content", slug)
	}
	return rb
}

type blockInfo struct {
	ID      string `json:"id"`
	Hash    string `json:"hash"`
	Target  string `json:"target"`
	Step    string `json:"step,omitempty"`
	Confirm bool   `json:"confirm,omitempty"`
}

func (s *Server) listRunbooks(w http.ResponseWriter, r *http.Request) {
	type rbInfo struct {
		Slug   string      `json:"slug"`
		Title  string      `json:"title"`
		Hash   string      `json:"hash"`
		Blocks []blockInfo `json:"blocks"`
	}
	out := []rbInfo{}
	for _, rb := range s.Content.Runbooks() {
		ri := rbInfo{Slug: rb.Slug, Title: rb.Meta.Title, Hash: rb.Hash, Blocks: []blockInfo{}}
		for _, b := range rb.Blocks {
			if !b.Executable() {
				continue
			}
			bi := blockInfo{ID: b.ID, Hash: b.Hash, Target: string(b.Target), Confirm: b.Confirm}
			if b.Step != nil {
				bi.Step = b.Step.ID
			}
			ri.Blocks = append(ri.Blocks, bi)
		}
		out = append(out, ri)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) results(w http.ResponseWriter, r *http.Request) {
	rb := s.loaded(w, r.PathValue("slug"))
	if rb == nil {
		return
	}
	latest, last := map[string]executor.Record{}, map[string]executor.Record{}
	if j := s.Engine.Journal; j != nil {
		hashes := rb.BlockHashes()
		var err error
		if latest, err = j.Latest(rb.Slug, hashes); err == nil {
			last, err = j.Last(rb.Slug, hashes)
		}
		if err != nil {
			fail(w, http.StatusInternalServerError, "journal", "%v", err)
			return
		}
	}
	// Runs of this runbook still going, so that a reloaded page follows them.
	live := []map[string]any{}
	s.mu.Lock()
	for _, id := range s.order {
		if lr := s.runs[id]; lr != nil && lr.runbook == rb.Slug && !lr.finished() {
			live = append(live, map[string]any{"id": lr.id, "block": lr.block, "started": lr.started})
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"results": latest, "last": last, "captures": s.Engine.Captures(rb), "live": live})
}

func (s *Server) target(w http.ResponseWriter, r *http.Request) {
	rb := s.loaded(w, r.PathValue("slug"))
	if rb == nil {
		return
	}
	out := map[string]any{}
	if s.Where != nil {
		where, err := s.Where(rb)
		out["kube"] = where
		if err != nil {
			out["kube_error"] = err.Error()
		}
	}
	if s.SandboxValues != nil {
		if v := s.SandboxValues(rb); len(v) > 0 {
			out["sandbox_values"] = v
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// RunRequest is the body of POST /api/runs.
type RunRequest struct {
	Runbook string            `json:"runbook"`
	Block   string            `json:"block"`
	Hash    string            `json:"hash"`
	Params  map[string]string `json:"params"`
	Confirm bool              `json:"confirm"`
}

// DecodeRunRequest reads and checks a run request strictly: unknown fields,
// trailing data and oversized values are errors.
func DecodeRunRequest(body io.Reader) (*RunRequest, error) {
	var req RunRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.Runbook == "" || req.Block == "" || req.Hash == "" {
		return nil, errors.New("bad request body: runbook, block and hash are required")
	}
	if err := checkParams(req.Params); err != nil {
		return nil, err
	}
	return &req, nil
}

// decodeStrict decodes one JSON object into v: an unknown field or data
// after it is an error.
func decodeStrict(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %v", err)
	}
	if dec.More() {
		return errors.New("bad request body: data after the JSON object")
	}
	return nil
}

// checkParams bounds a request's parameters: how many, and how long.
func checkParams(params map[string]string) error {
	if len(params) > 256 {
		return errors.New("bad request body: too many params")
	}
	for k, v := range params {
		if len(k) > 128 || len(v) > 8<<10 {
			return fmt.Errorf("bad request body: param %.40q is too long", k)
		}
	}
	return nil
}

// jsonBody refuses a request whose body is not declared JSON, answering
// it; it also keeps "simple" cross-site form posts out: they cannot send
// JSON.
func jsonBody(w http.ResponseWriter, r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		fail(w, http.StatusUnsupportedMediaType, "bad_content_type", "Content-Type must be application/json")
		return false
	}
	return true
}

// acceptSandbox takes {"id": "..."}: the reader accepts the other sandbox
// the page showed.
func (s *Server) acceptSandbox(w http.ResponseWriter, r *http.Request) {
	if !jsonBody(w, r) {
		return
	}
	if s.AcceptSandbox == nil {
		fail(w, http.StatusNotFound, "no_sandbox", "this executor does not follow a sandbox")
		return
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var req struct {
		ID string `json:"id"`
	}
	if err := dec.Decode(&req); err != nil || dec.More() || req.ID == "" || len(req.ID) > 64 {
		fail(w, http.StatusBadRequest, "bad_request", "bad request body: want {\"id\": \"<the offered sandbox>\"}")
		return
	}
	if err := s.AcceptSandbox(r.Context(), req.ID); err != nil {
		fail(w, http.StatusConflict, "not_offered", "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	if !jsonBody(w, r) {
		return
	}
	req, err := DecodeRunRequest(r.Body)
	if err != nil {
		badBody(w, err)
		return
	}
	rb := s.loaded(w, req.Runbook)
	if rb == nil {
		return
	}
	run, err := s.Engine.Prepare(executor.Request{Runbook: rb, BlockID: req.Block, Hash: req.Hash, Params: req.Params, Confirmed: req.Confirm})
	if err != nil {
		status, code := http.StatusBadRequest, "refused"
		switch {
		case errors.Is(err, executor.ErrUnknownBlock):
			status, code = http.StatusNotFound, "unknown_block"
		case errors.Is(err, executor.ErrHashMismatch):
			status, code = http.StatusConflict, "hash_mismatch"
		case errors.Is(err, executor.ErrBusy):
			status, code = http.StatusConflict, "busy"
		case errors.Is(err, executor.ErrTooManyRuns):
			status, code = http.StatusTooManyRequests, "too_many_runs"
		case errors.Is(err, executor.ErrNeedsConfirm):
			status, code = http.StatusPreconditionRequired, "needs_confirm"
		case errors.Is(err, executor.ErrBadParam):
			code = "bad_param"
		case errors.Is(err, executor.ErrConditionFalse):
			code = "condition_false"
		case errors.Is(err, executor.ErrContextRefused):
			status, code = http.StatusForbidden, "context_refused"
		case errors.Is(err, executor.ErrNoRunner):
			status, code = http.StatusServiceUnavailable, "target_off"
		}
		fail(w, status, code, "%v", err)
		return
	}
	lr := s.launch(rb, run)
	writeJSON(w, http.StatusAccepted, map[string]any{"id": lr.id, "where": run.Where})
}

// launch starts a prepared run in the background.
func (s *Server) launch(rb *runbook.Runbook, run *executor.Run) *liveRun {
	ctx, cancel := context.WithCancel(s.base)
	lr := s.register(run.ID, rb.Slug, run.Job.Block.ID, cancel)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		rec := run.Execute(ctx, lr)
		if s.OnRecord != nil {
			s.OnRecord(rb, rec)
		}
		lr.finish(rec)
	}()
	return lr
}

// register keeps a new run (or plan) for its stream and GET /api/runs/{id}.
func (s *Server) register(id, slug, block string, cancel context.CancelFunc) *liveRun {
	lr := &liveRun{id: id, runbook: slug, block: block, cancel: cancel, done: make(chan struct{}),
		subs: map[*subscriber]struct{}{}, started: time.Now().UTC()}
	s.mu.Lock()
	s.runs[lr.id] = lr
	s.order = append(s.order, lr.id)
	s.trim()
	s.mu.Unlock()
	return lr
}

// trim forgets the oldest finished runs beyond keepRuns or keepBytes of
// output held in memory; live runs are never forgotten and never stop the
// trimming (the journal has every finished run). Called with s.mu held.
func (s *Server) trim() {
	total := 0
	for _, id := range s.order {
		total += s.runs[id].size()
	}
	kept := s.order[:0]
	n := len(s.order)
	for i, id := range s.order {
		lr := s.runs[id]
		if lr.finished() && (n-i > keepRuns || total > keepBytes) && n > 1 {
			total -= lr.size()
			delete(s.runs, id)
			n--
			continue
		}
		kept = append(kept, id)
	}
	s.order = kept
}

func (s *Server) lookup(id string) *liveRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	lr := s.lookup(r.PathValue("id"))
	if lr == nil {
		fail(w, http.StatusNotFound, "unknown_run", "no run %q", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, lr.snapshot())
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	lr := s.lookup(r.PathValue("id"))
	if lr == nil {
		fail(w, http.StatusNotFound, "unknown_run", "no run %q", r.PathValue("id"))
		return
	}
	lr.cancel()
	<-lr.done
	writeJSON(w, http.StatusOK, lr.snapshot())
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	slug := r.URL.Query().Get("runbook")
	if slug != "" && s.loaded(w, slug) == nil {
		return
	}
	var recs []executor.Record
	if s.Engine.Journal != nil {
		var err error
		if recs, err = s.Engine.Journal.Records(slug, 100); err != nil {
			fail(w, http.StatusInternalServerError, "journal", "%v", err)
			return
		}
	}
	if recs == nil {
		recs = []executor.Record{}
	}
	writeJSON(w, http.StatusOK, recs)
}

// events streams a run as Server-Sent Events: output, event, done. A late
// subscriber first gets the last replayBytes of output.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	lr := s.lookup(r.PathValue("id"))
	if lr == nil {
		fail(w, http.StatusNotFound, "unknown_run", "no run %q", r.PathValue("id"))
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		fail(w, http.StatusInternalServerError, "no_stream", "streaming unsupported")
		return
	}
	if n := s.streams.Add(1); n > maxStreams {
		s.streams.Add(-1)
		fail(w, http.StatusTooManyRequests, "too_many_streams", "%d event streams are open; close a page or tab first", maxStreams)
		return
	}
	defer s.streams.Add(-1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	replay, sub, rec := lr.subscribe()
	defer lr.unsubscribe(sub)
	for _, ev := range replay {
		writeEvent(w, ev)
	}
	if rec != nil {
		writeEvent(w, event{name: "done", data: rec})
		fl.Flush()
		return
	}
	fl.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			io.WriteString(w, ": keepalive\n\n")
			fl.Flush()
		case ev := <-sub.ch:
			writeEvent(w, ev)
			// Flush when nothing else is queued, so bursts go out together.
			if len(sub.ch) == 0 {
				fl.Flush()
			}
		case <-lr.done:
			rest, skipped := lr.drain(sub)
			for _, ev := range rest {
				writeEvent(w, ev)
			}
			if skipped > 0 {
				writeEvent(w, event{name: "skipped", data: map[string]int{"bytes": skipped}})
			}
			lr.mu.Lock()
			rec := lr.record
			lr.mu.Unlock()
			writeEvent(w, event{name: "done", data: rec})
			fl.Flush()
			return
		}
	}
}

func writeEvent(w io.Writer, ev event) {
	data, _ := json.Marshal(ev.data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
}

type event struct {
	name string
	data any
	size int
}

// liveRun is a run in progress or recently finished; it is the Sink the
// engine writes to and fans output out to subscribers.
type liveRun struct {
	id, runbook, block string
	started            time.Time
	cancel             context.CancelFunc
	done               chan struct{}

	mu      sync.Mutex
	replay  []event
	replayN int
	subs    map[*subscriber]struct{}
	record  *executor.Record
}

// subscriber is one stream. A subscriber that cannot keep up is not cut off
// and not buffered without bound: output it has no room for is counted and
// reported as a "skipped" event, and the run's full (tail of) output is in
// the final record.
type subscriber struct {
	ch      chan event
	skipped int
}

// outputData is an output event's data.
type outputData struct {
	Host string `json:"host"`
	Data string `json:"data"`
}

// outChunk is output kept for replay. Consecutive writes of one host
// coalesce into one chunk of up to chunkBytes, so that a run printing
// short lines one write at a time holds a few large objects, not one per
// line, and the memory it holds is what its size counts.
type outChunk struct {
	host string
	data []byte
}

const (
	chunkBytes = 16 << 10
	// eventOverhead is counted per kept event beside its bytes: the event,
	// its chunk and their headers.
	eventOverhead = 96
)

func (lr *liveRun) Output(host string, p []byte) {
	ev := event{name: "output", data: outputData{Host: host, Data: string(p)}, size: len(p) + eventOverhead}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if n := len(lr.replay); n > 0 {
		if c, ok := lr.replay[n-1].data.(*outChunk); ok && c.host == host && len(c.data)+len(p) <= chunkBytes {
			old := cap(c.data)
			c.data = append(c.data, p...)
			lr.replay[n-1].size += cap(c.data) - old
			lr.replayN += cap(c.data) - old
			lr.fanOut(ev)
			return
		}
	}
	c := &outChunk{host: host, data: append(make([]byte, 0, max(len(p), 512)), p...)}
	lr.keep(event{name: "output", data: c, size: cap(c.data) + eventOverhead})
	lr.fanOut(ev)
}

func (lr *liveRun) Event(ev executor.Event) {
	lr.publish(event{name: "progress", data: ev, size: len(ev.Message) + eventOverhead})
}

func (lr *liveRun) publish(ev event) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.keep(ev)
	lr.fanOut(ev)
}

// keep adds ev to the replay and drops the oldest events beyond
// replayBytes. Called with lr.mu held.
func (lr *liveRun) keep(ev event) {
	lr.replay = append(lr.replay, ev)
	lr.replayN += ev.size
	for lr.replayN > replayBytes && len(lr.replay) > 1 {
		lr.replayN -= lr.replay[0].size
		lr.replay[0] = event{} // the backing array must not keep it alive
		lr.replay = lr.replay[1:]
	}
}

// fanOut sends ev to every subscriber that has room. Called with lr.mu
// held.
func (lr *liveRun) fanOut(ev event) {
	// skipped counts output bytes a subscriber missed.
	n := 0
	if d, ok := ev.data.(outputData); ok {
		n = len(d.Data)
	}
	for s := range lr.subs {
		if s.skipped > 0 {
			select {
			case s.ch <- event{name: "skipped", data: map[string]int{"bytes": s.skipped}}:
				s.skipped = 0
			default:
				s.skipped += n
				continue
			}
		}
		select {
		case s.ch <- ev:
		default:
			s.skipped += n
		}
	}
}

func (lr *liveRun) subscribe() ([]event, *subscriber, *executor.Record) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	// Chunks keep growing while the run goes on: a subscriber gets copies.
	replay := make([]event, len(lr.replay))
	for i, ev := range lr.replay {
		if c, ok := ev.data.(*outChunk); ok {
			ev.data = outputData{Host: c.host, Data: string(c.data)}
		}
		replay[i] = ev
	}
	if lr.record != nil {
		return replay, nil, lr.record
	}
	s := &subscriber{ch: make(chan event, subscriberBuffer)}
	lr.subs[s] = struct{}{}
	return replay, s, nil
}

func (lr *liveRun) unsubscribe(s *subscriber) {
	if s == nil {
		return
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	delete(lr.subs, s)
}

// drain returns what a subscriber still has queued, and what it missed.
func (lr *liveRun) drain(s *subscriber) ([]event, int) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var out []event
	for {
		select {
		case ev := <-s.ch:
			out = append(out, ev)
		default:
			return out, s.skipped
		}
	}
}

func (lr *liveRun) finish(rec *executor.Record) {
	lr.mu.Lock()
	lr.record = rec
	lr.mu.Unlock()
	close(lr.done)
}

// size is roughly the memory a run holds: its replay and its record.
func (lr *liveRun) size() int {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	n := lr.replayN
	if lr.record != nil {
		n += len(lr.record.Output)
		for _, h := range lr.record.Hosts {
			n += len(h.Output)
		}
	}
	return n
}

func (lr *liveRun) finished() bool {
	select {
	case <-lr.done:
		return true
	default:
		return false
	}
}

func (lr *liveRun) snapshot() map[string]any {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	out := map[string]any{"id": lr.id, "runbook": lr.runbook, "block": lr.block, "started": lr.started, "status": executor.StatusRunning}
	if lr.record != nil {
		out["status"] = lr.record.Status
		out["record"] = lr.record
	}
	return out
}

// HeldBytes is what the limit on kept runs counts for the runs held now
// (for the memory benchmark).
func (s *Server) HeldBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, lr := range s.runs {
		n += lr.size()
	}
	return n
}
