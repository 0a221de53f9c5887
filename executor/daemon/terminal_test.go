package daemon_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/executor/term"
	"github.com/cairn-dev/cairn/runbook"
)

const termMD = "---\ntitle: t\nslug: ops\nparams:\n  - name: CP\n    type: hosts\n    default: \"cp0 cp1\"\n  - name: TOKEN\n    secret: true\n---\n## s {#s}\n\n" +
	"```text {#edit-by-hand target=manual}\nEdit the manifest on each node.\n```\n\n" +
	"```bash {#auto target=local}\ntrue\n```\n"

type termFixture struct {
	srv   *httptest.Server
	rb    *runbook.Runbook
	d     *daemon.Server
	mu    sync.Mutex
	hosts []string // the hosts the manager was asked to open on
	recs  []executor.Record
}

func newTermFixture(t *testing.T, on bool, max int, grace time.Duration) *termFixture {
	t.Helper()
	rb, err := runbook.Parse("ops.md", []byte(termMD))
	if err != nil {
		t.Fatal(err)
	}
	j, err := executor.OpenJournal(filepath.Join(t.TempDir(), "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	eng := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{}}, Journal: j}
	f := &termFixture{rb: rb}
	d := &daemon.Server{Engine: eng, Content: content{rb}, Token: token, AllowOrigins: []string{"http://127.0.0.1:1313"}}
	if on {
		// Every terminal is a real bash on a pseudo-terminal of this
		// machine; a named host's too (the SSH terminal is tested on real
		// sshd in executor/ssh): what is checked here is whether the
		// daemon lets it open at all.
		d.Terminals = &term.Manager{Max: max, Grace: grace,
			Open: func(ctx context.Context, host string, cols, rows uint16) (term.Shell, error) {
				f.mu.Lock()
				f.hosts = append(f.hosts, host)
				f.mu.Unlock()
				return (&local.Runner{}).Terminal([]string{"bash", "--noprofile", "--norc", "-i"}, []string{"PATH=/usr/bin:/bin", "PS1=$ "}, cols, rows)
			},
			OnEnd: func(rec executor.Record) {
				_ = j.Append(rec)
				f.mu.Lock()
				f.recs = append(f.recs, rec)
				f.mu.Unlock()
			}}
	}
	f.d = d
	f.srv = httptest.NewServer(d.Handler())
	t.Cleanup(func() { f.srv.Close(); d.Close(); j.Close() })
	return f
}

func (f *termFixture) post(t *testing.T, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	hr, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
	for k, v := range header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (f *termFixture) open(t *testing.T, body string) (int, map[string]any) {
	t.Helper()
	return f.post(t, "/api/terminals", body, auth(nil))
}

func (f *termFixture) manualBody(extra string) string {
	return `{"runbook":"ops","block":"edit-by-hand","hash":"` + f.rb.BlockByID("edit-by-hand").Hash + `"` + extra + `}`
}

// dial connects the terminal's WebSocket as a page of origin would.
func (f *termFixture) dial(id, ticket, origin string) (*websocket.Conn, int, error) {
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/api/terminals/" + id + "/ws?ticket=" + ticket
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.DefaultDialer.Dial(u, h)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	return c, code, err
}

// screen reads a terminal's WebSocket until want shows (or it ends).
func screen(t *testing.T, c *websocket.Conn, want string) string {
	t.Helper()
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	for !strings.Contains(got.String(), want) {
		kind, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("the terminal never showed %q (%v):\n%s", want, err, got.String())
		}
		if kind == websocket.BinaryMessage {
			got.Write(msg)
		} else {
			got.WriteString("\n[control " + string(msg) + "]\n")
		}
	}
	return got.String()
}

// TestTerminalGuards: a terminal opens only when the executor was started
// with terminals on, with the token, from an allowed origin, on this
// machine or a host the runbook names; its WebSocket needs a ticket that
// works once, for that terminal, from an allowed origin. None of the
// refused requests opens a shell.
func TestTerminalGuards(t *testing.T) {
	off := newTermFixture(t, false, 0, 0)
	if code, out := off.open(t, `{"runbook":"ops"}`); code != 403 || out["code"] != "terminal_off" {
		t.Errorf("terminals off: %d %v", code, out)
	}

	f := newTermFixture(t, true, 4, time.Minute)
	for _, tc := range []struct {
		name   string
		body   string
		header map[string]string
		code   int
		want   string
	}{
		{"no token", `{"runbook":"ops"}`, map[string]string{"Content-Type": "application/json"}, 401, "bad_token"},
		{"foreign origin", `{"runbook":"ops"}`, auth(map[string]string{"Origin": "https://evil.example"}), 403, "bad_origin"},
		{"host outside the runbook", `{"runbook":"ops","host":"evil.example"}`, auth(nil), 403, "host_not_in_runbook"},
		{"host outside the runbook's values", `{"runbook":"ops","host":"cp9","params":{"CP":"cp0"}}`, auth(nil), 403, "host_not_in_runbook"},
		{"option as a host", `{"runbook":"ops","host":"-oProxyCommand=touch /tmp/x"}`, auth(nil), 403, "host_not_in_runbook"},
		{"not a manual block", `{"runbook":"ops","block":"auto","hash":"` + f.rb.BlockByID("auto").Hash + `"}`, auth(nil), 400, "refused"},
		{"stale hash", `{"runbook":"ops","block":"edit-by-hand","hash":"old"}`, auth(nil), 409, "hash_mismatch"},
		{"unknown runbook", `{"runbook":"../etc"}`, auth(nil), 404, "unknown_runbook"},
		{"unknown field", `{"runbook":"ops","shell":"/bin/sh"}`, auth(nil), 400, "bad_request"},
		{"huge terminal", `{"runbook":"ops","cols":60000,"rows":60000}`, auth(nil), 400, "bad_request"},
	} {
		code, out := f.post(t, "/api/terminals", tc.body, tc.header)
		if code != tc.code || out["code"] != tc.want {
			t.Errorf("%s: %d %v, want %d %s", tc.name, code, out, tc.code, tc.want)
		}
	}
	if len(f.hosts) != 0 {
		t.Fatalf("refused requests opened shells on %v", f.hosts)
	}

	code, out := f.open(t, `{"runbook":"ops","host":"CP1","cols":100,"rows":30}`)
	if code != 201 || out["host"] != "cp1" || out["ticket"] == "" {
		t.Fatalf("open on cp1: %d %v", code, out)
	}
	id, ticket := out["id"].(string), out["ticket"].(string)
	// The WebSocket: no ticket, a wrong one, a cross-site page with the
	// right one, then the page itself.
	for _, tc := range []struct {
		name, id, ticket, origin string
		code                     int
	}{
		{"no ticket", id, "", "http://127.0.0.1:1313", 401},
		{"wrong ticket", id, strings.Repeat("0", 48), "http://127.0.0.1:1313", 401},
		{"cross-site page", id, ticket, "https://evil.example", 403},
		{"another terminal's id", "0123456789abcdef", ticket, "http://127.0.0.1:1313", 401},
	} {
		if c, code, err := f.dial(tc.id, tc.ticket, tc.origin); err == nil || code != tc.code {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %d %v, want %d", tc.name, code, err, tc.code)
		}
	}
	// The wrong id spent the ticket: ask for another, as a reload does.
	code, out = f.post(t, "/api/terminals/"+id+"/attach", "", auth(nil))
	if code != 200 {
		t.Fatalf("attach: %d %v", code, out)
	}
	ticket = out["ticket"].(string)
	c, code, err := f.dial(id, ticket, "http://127.0.0.1:1313")
	if err != nil {
		t.Fatalf("the page's WebSocket: %d %v", code, err)
	}
	defer c.Close()
	c.WriteMessage(websocket.BinaryMessage, []byte("echo \"cols-$(tput cols 2>/dev/null || stty size | cut -d' ' -f2)\"; echo \"ok-$((2*21))\"\n"))
	screen(t, c, "ok-42")
	if _, code, err := f.dial(id, ticket, "http://127.0.0.1:1313"); err == nil || code != 401 {
		t.Errorf("a ticket used twice: %d %v", code, err)
	}
	if f.hosts[0] != "cp1" {
		t.Errorf("opened on %v, want cp1", f.hosts)
	}
}

// TestTerminalCap: more terminals than the cap are refused until one ends.
func TestTerminalCap(t *testing.T) {
	f := newTermFixture(t, true, 2, time.Minute)
	var ids []string
	for range 2 {
		code, out := f.open(t, `{"runbook":"ops"}`)
		if code != 201 {
			t.Fatalf("open: %d %v", code, out)
		}
		ids = append(ids, out["id"].(string))
	}
	if code, out := f.open(t, `{"runbook":"ops"}`); code != 429 || out["code"] != "too_many_terminals" {
		t.Errorf("a third: %d %v", code, out)
	}
	if code, out := f.post(t, "/api/terminals/"+ids[0]+"/close", "", auth(nil)); code != 200 {
		t.Fatalf("close: %d %v", code, out)
	}
	if code, out := f.open(t, `{"runbook":"ops"}`); code != 201 {
		t.Errorf("after one closed: %d %v", code, out)
	}
}

// TestTerminalDoneByHand: a manual step done in its terminal is recorded
// as done by hand, with the transcript, where a secret value typed there
// is masked; a page that went away without coming back ends its terminal
// after the grace period, and it is recorded too.
func TestTerminalDoneByHand(t *testing.T) {
	f := newTermFixture(t, true, 4, 500*time.Millisecond)
	secret := "tok-9f8e7d6c5b4a"
	code, out := f.open(t, f.manualBody(`,"params":{"TOKEN":"`+secret+`"}`))
	if code != 201 {
		t.Fatalf("open: %d %v", code, out)
	}
	id := out["id"].(string)
	c, _, err := f.dial(id, out["ticket"].(string), "http://127.0.0.1:1313")
	if err != nil {
		t.Fatal(err)
	}
	c.WriteMessage(websocket.BinaryMessage, []byte("echo \"edited-$((3*3))\"; echo "+secret+"\n"))
	screen(t, c, "edited-9")
	if code, out := f.post(t, "/api/terminals/"+id+"/done", "", auth(nil)); code != 200 || out["status"] != "by-hand" {
		t.Fatalf("done: %d %v", code, out)
	}
	screen(t, c, `{"exit":`)
	c.Close()

	// A second terminal, from the target panel: the page goes away.
	code, out = f.open(t, `{"runbook":"ops"}`)
	if code != 201 {
		t.Fatalf("open: %d %v", code, out)
	}
	c2, _, err := f.dial(out["id"].(string), out["ticket"].(string), "http://127.0.0.1:1313")
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		f.mu.Lock()
		n := len(f.recs)
		f.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a terminal left without a page did not end after the grace period")
		}
	}
	recs, err := f.d.Engine.Journal.Records("ops", 10)
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[executor.Status]executor.Record{}
	for _, r := range recs {
		byStatus[r.Status] = r
	}
	done := byStatus[executor.StatusByHand]
	if done.Block != "edit-by-hand" || done.Target != "terminal" || done.By == "" || done.Step != "s" {
		t.Errorf("the by-hand record: %+v", done)
	}
	if strings.Contains(done.Output, secret) || !strings.Contains(done.Output, executor.Mask) || !strings.Contains(done.Output, "edited-9") {
		t.Errorf("the transcript:\n%s", done.Output)
	}
	if left := byStatus[executor.StatusTerminal]; left.ID == "" || left.Block != "" {
		t.Errorf("the abandoned terminal's record: %+v", left)
	}
	if code, out := f.post(t, "/api/terminals/"+id+"/attach", "", auth(nil)); code != 404 {
		t.Errorf("attach to an ended terminal: %d %v", code, out)
	}
}
