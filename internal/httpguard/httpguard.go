// Package httpguard bounds what connections may cost a server that listens
// on a reader's laptop (the executor and the dev server): timeouts for
// requests that never finish arriving, and a cap on connections that hold
// a file descriptor without doing anything.
//
// Connections that have sent no request yet (new) and connections between
// requests (idle) are each capped; past the cap the oldest is closed. An
// attacker's idle sockets therefore push out each other, never a reader's
// request, which becomes active as soon as its headers arrive. Active
// requests are bounded by the handlers (run and stream caps).
package httpguard

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits for Harden; tests lower them.
type Limits struct {
	New, Idle         int           // connections kept in each state; default 64
	ReadHeaderTimeout time.Duration // default 5s
	ReadTimeout       time.Duration // whole request, body included; default 30s (streams are responses, not bounded)
	IdleTimeout       time.Duration // default 60s
}

func (l *Limits) defaults() {
	if l.New <= 0 {
		l.New = 64
	}
	if l.Idle <= 0 {
		l.Idle = 64
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 5 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 30 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 60 * time.Second
	}
}

// Harden sets srv's timeouts and installs the connection cap. Call it
// before Serve; it chains an existing ConnState hook.
func Harden(srv *http.Server, l Limits) {
	l.defaults()
	srv.ReadHeaderTimeout = l.ReadHeaderTimeout
	srv.ReadTimeout = l.ReadTimeout
	srv.IdleTimeout = l.IdleTimeout
	srv.MaxHeaderBytes = 32 << 10
	t := &tracker{limits: l, conns: map[net.Conn]*entry{}}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		t.state(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
}

type entry struct {
	state http.ConnState
	seq   uint64
}

type tracker struct {
	limits Limits
	mu     sync.Mutex
	seq    uint64
	conns  map[net.Conn]*entry
}

func (t *tracker) state(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	var victim net.Conn
	switch st {
	case http.StateNew, http.StateIdle:
		t.seq++
		t.conns[c] = &entry{state: st, seq: t.seq}
		limit := t.limits.New
		if st == http.StateIdle {
			limit = t.limits.Idle
		}
		n := 0
		var oldest net.Conn
		var oldestSeq uint64
		for cc, e := range t.conns {
			if e.state != st {
				continue
			}
			n++
			if oldest == nil || e.seq < oldestSeq {
				oldest, oldestSeq = cc, e.seq
			}
		}
		if n > limit {
			victim = oldest
			delete(t.conns, oldest)
		}
	case http.StateActive:
		if e := t.conns[c]; e != nil {
			e.state = st
		}
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
	}
	t.mu.Unlock()
	if victim != nil {
		victim.Close()
	}
}
