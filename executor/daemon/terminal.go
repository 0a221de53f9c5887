package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/term"
	"github.com/cairn-dev/cairn/internal/loopback"
	"github.com/cairn-dev/cairn/runbook"
)

// The page's terminals (cairn serve --terminal). Opening one is a guarded
// request like a run (token, Origin, Host) for a host the runbook names;
// the page then connects a WebSocket with a ticket that request returned:
// a browser cannot put the token on a WebSocket, and a ticket is good once,
// for one terminal, for ticketLife.

// ticketLife is how long a ticket may wait for its WebSocket.
const ticketLife = 30 * time.Second

// TerminalRequest is the body of POST /api/terminals.
type TerminalRequest struct {
	Runbook string            `json:"runbook"`
	Block   string            `json:"block,omitempty"` // the manual block it is for
	Hash    string            `json:"hash,omitempty"`  // that block's hash, as the page showed it
	Host    string            `json:"host,omitempty"`  // "" is this machine
	Params  map[string]string `json:"params,omitempty"`
	Cols    uint16            `json:"cols,omitempty"`
	Rows    uint16            `json:"rows,omitempty"`
}

// TerminalInfo describes an open terminal.
type TerminalInfo struct {
	ID      string    `json:"id"`
	Runbook string    `json:"runbook"`
	Block   string    `json:"block,omitempty"`
	Host    string    `json:"host"` // "" is this machine
	Where   string    `json:"where"`
	Started time.Time `json:"started"`
	Ticket  string    `json:"ticket,omitempty"` // for GET /api/terminals/{id}/ws, once, within 30s
}

type ticket struct {
	id      string
	expires time.Time
}

// tickets are the WebSocket tickets not yet used.
type tickets struct {
	mu sync.Mutex
	m  map[string]ticket
}

func (ts *tickets) issue(id string) string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	t := hex.EncodeToString(b[:])
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.m == nil {
		ts.m = map[string]ticket{}
	}
	now := time.Now()
	for k, v := range ts.m {
		if now.After(v.expires) {
			delete(ts.m, k)
		}
	}
	ts.m[t] = ticket{id: id, expires: now.Add(ticketLife)}
	return t
}

// use spends t; it names the terminal it was issued for.
func (ts *tickets) use(t, id string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	v, ok := ts.m[t]
	delete(ts.m, t)
	return ok && v.id == id && time.Now().Before(v.expires)
}

func info(t *term.Terminal) TerminalInfo {
	return TerminalInfo{ID: t.ID, Runbook: t.Spec.Runbook, Block: t.Spec.Block, Host: t.Spec.Host, Where: t.Spec.Where, Started: t.Started}
}

// terminalsOn answers 403 terminal_off when the server has no terminals.
func (s *Server) terminalsOn(w http.ResponseWriter) bool {
	if s.Terminals == nil {
		fail(w, http.StatusForbidden, "terminal_off", "terminals are off; start the executor with --terminal to open one from the page")
		return false
	}
	return true
}

func decodeTerminalRequest(body io.Reader) (*TerminalRequest, error) {
	var req TerminalRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.Runbook == "" {
		return nil, errors.New("bad request body: runbook is required")
	}
	if err := checkParams(req.Params); err != nil {
		return nil, err
	}
	if req.Cols > 1000 || req.Rows > 1000 {
		return nil, fmt.Errorf("bad request body: a %dx%d terminal", req.Cols, req.Rows)
	}
	return &req, nil
}

func (s *Server) startTerminal(w http.ResponseWriter, r *http.Request) {
	if !s.terminalsOn(w) || !jsonBody(w, r) {
		return
	}
	req, err := decodeTerminalRequest(r.Body)
	if err != nil {
		badBody(w, err)
		return
	}
	rb := s.loaded(w, req.Runbook)
	if rb == nil {
		return
	}
	var b *runbook.Block
	if req.Block != "" {
		b = rb.BlockByID(req.Block)
		if b == nil || !b.Executable() {
			fail(w, http.StatusNotFound, "unknown_block", "runbook %q has no block %q", rb.Slug, req.Block)
			return
		}
		if b.Target != runbook.TargetManual {
			fail(w, http.StatusBadRequest, "refused", "block %q is not a manual step; a terminal is for what a person does by hand", b.ID)
			return
		}
		if req.Hash != b.Hash {
			fail(w, http.StatusConflict, "hash_mismatch", "block %q changed since the page was loaded; reload the page", b.ID)
			return
		}
	}
	// A terminal needs no parameter; the values given only say which hosts
	// the runbook names and which secrets to mask.
	vals := map[string]string{}
	for _, p := range rb.Params {
		vals[p.Name] = p.Default
	}
	for k, v := range req.Params {
		if rb.ParamByName(k) == nil {
			fail(w, http.StatusBadRequest, "bad_param", "runbook %q has no parameter %q", rb.Slug, k)
			return
		}
		vals[k] = v
	}
	spec, err := term.NewSpec(rb, b, req.Host, executor.HostsNamed(rb, vals), s.Engine.Redactor(rb, vals))
	if err != nil {
		fail(w, http.StatusForbidden, "host_not_in_runbook", "%v", err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	t, err := s.Terminals.Start(ctx, spec, req.Cols, req.Rows)
	switch {
	case errors.Is(err, term.ErrTooMany):
		fail(w, http.StatusTooManyRequests, "too_many_terminals", "%v", err)
		return
	case err != nil:
		fail(w, http.StatusBadGateway, "terminal_failed", "open a terminal on %s: %v", spec.Where, err)
		return
	}
	ti := info(t)
	ti.Ticket = s.tickets.issue(t.ID)
	writeJSON(w, http.StatusCreated, ti)
}

func (s *Server) listTerminals(w http.ResponseWriter, r *http.Request) {
	if !s.terminalsOn(w) {
		return
	}
	out := []TerminalInfo{}
	for _, t := range s.Terminals.List() {
		out = append(out, info(t))
	}
	slices.SortFunc(out, func(a, b TerminalInfo) int { return a.Started.Compare(b.Started) })
	writeJSON(w, http.StatusOK, out)
}

// terminal looks up {id}, answering 404 when it is not open.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request) *term.Terminal {
	if !s.terminalsOn(w) {
		return nil
	}
	t := s.Terminals.Get(r.PathValue("id"))
	if t == nil {
		fail(w, http.StatusNotFound, "unknown_terminal", "no open terminal %q", r.PathValue("id"))
	}
	return t
}

// attachTerminal issues a new ticket for an open terminal (a reloaded page
// attaching again).
func (s *Server) attachTerminal(w http.ResponseWriter, r *http.Request) {
	if t := s.terminal(w, r); t != nil {
		ti := info(t)
		ti.Ticket = s.tickets.issue(t.ID)
		writeJSON(w, http.StatusOK, ti)
	}
}

// terminalDone records the terminal's manual step as done by hand there,
// with the transcript, and ends the terminal.
func (s *Server) terminalDone(w http.ResponseWriter, r *http.Request) {
	t := s.terminal(w, r)
	if t == nil {
		return
	}
	if t.Spec.Block == "" {
		fail(w, http.StatusBadRequest, "refused", "terminal %s was not opened from a manual step; close it instead", t.ID)
		return
	}
	t.MarkDone()
	writeJSON(w, http.StatusOK, map[string]any{"id": t.ID, "status": executor.StatusByHand})
}

func (s *Server) closeTerminal(w http.ResponseWriter, r *http.Request) {
	if t := s.terminal(w, r); t != nil {
		t.Close()
		writeJSON(w, http.StatusOK, map[string]any{"id": t.ID, "status": executor.StatusTerminal})
	}
}

// wsGuard is the guard of the WebSocket route: Host and Origin as for every
// request (a cross-site page cannot attach: its Origin is not allowed),
// and, instead of the token a browser cannot send there, the ticket.
func (s *Server) wsGuard(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if !loopback.IsHost(r.Host) {
			fail(w, http.StatusForbidden, "bad_host", "Host %q is not a loopback name", r.Host)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
			fail(w, http.StatusForbidden, "bad_origin", "origin %q is not allowed", origin)
			return
		}
		if !s.terminalsOn(w) {
			return
		}
		if !s.tickets.use(r.URL.Query().Get("ticket"), r.PathValue("id")) {
			fail(w, http.StatusUnauthorized, "bad_ticket", "missing, used, expired or wrong ticket; ask POST /api/terminals/{id}/attach for one")
			return
		}
		next(w, r)
	})
}

var upgrader = websocket.Upgrader{
	ReadBufferSize: 32 << 10, WriteBufferSize: 32 << 10,
	// wsGuard has checked the Origin against the allowed ones.
	CheckOrigin: func(*http.Request) bool { return true },
}

// wsConn is an attached page: output as binary messages, the exit status
// as a text one.
type wsConn struct {
	c  *websocket.Conn
	mu sync.Mutex
}

func (c *wsConn) Output(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	return c.c.WriteMessage(websocket.BinaryMessage, b)
}

func (c *wsConn) Exit(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	msg, _ := json.Marshal(map[string]int{"exit": code})
	_ = c.c.WriteMessage(websocket.TextMessage, msg)
	_ = c.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "the shell ended"))
	_ = c.c.Close()
}

func (c *wsConn) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = c.c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "attached elsewhere"))
	_ = c.c.Close()
}

// maxInput bounds one message from the page (a paste).
const maxInput = 1 << 20

// terminalWS connects a page to a terminal: binary messages are what is
// typed, text ones {"resize":[cols,rows]}.
func (s *Server) terminalWS(w http.ResponseWriter, r *http.Request) {
	t := s.Terminals.Get(r.PathValue("id"))
	if t == nil {
		fail(w, http.StatusNotFound, "unknown_terminal", "no open terminal %q", r.PathValue("id"))
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c.SetReadLimit(maxInput)
	conn := &wsConn{c: c}
	detach, err := t.Attach(conn)
	if err != nil {
		conn.Exit(-1)
		return
	}
	defer detach()
	for {
		kind, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		switch kind {
		case websocket.BinaryMessage:
			if _, err := t.Write(msg); err != nil {
				return
			}
		case websocket.TextMessage:
			var ctl struct {
				Resize []uint16 `json:"resize"`
			}
			if json.Unmarshal(msg, &ctl) == nil && len(ctl.Resize) == 2 {
				_ = t.Resize(ctl.Resize[0], ctl.Resize[1])
			}
		}
	}
}
