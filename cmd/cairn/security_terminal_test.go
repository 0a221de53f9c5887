package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

const pageOrigin = "http://127.0.0.1:1313"

// termOps is a runbook with a manual step on hosts named by a parameter,
// and a secret.
const termOps = "---\ntitle: ops\nslug: ops\nparams:\n  - name: CP\n    type: hosts\n    default: cp1\n  - name: TOKEN\n    secret: true\n    required: false\n---\n## s {#s}\n\n" +
	"```text {#edit-by-hand target=manual}\nEdit the file on each node.\n```\n"

// attach connects a terminal's WebSocket as a page of origin would.
func (d *realDaemon) attach(id, ticket, origin string) (*websocket.Conn, int, error) {
	h := http.Header{}
	if origin != "" {
		h.Set("Origin", origin)
	}
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(d.base, "http")+"/api/terminals/"+id+"/ws?ticket="+ticket, h)
	code := 0
	if resp != nil {
		code = resp.StatusCode
	}
	return c, code, err
}

// typeAndWait types line and reads the terminal until want shows.
func typeAndWait(t *testing.T, c *websocket.Conn, line, want string) string {
	t.Helper()
	if err := c.WriteMessage(websocket.BinaryMessage, []byte(line+"\n")); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(got.String(), want) {
		_, msg, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("the terminal never showed %q (%v):\n%s", want, err, got.String())
		}
		got.Write(msg)
	}
	return got.String()
}

func openTerminal(t *testing.T, d *realDaemon, body map[string]any) (id, ticket string) {
	t.Helper()
	code, out, _ := d.call(t, "POST", "/api/terminals", body, map[string]string{"Origin": pageOrigin})
	if code != 201 {
		t.Fatalf("open a terminal: %d %s", code, out)
	}
	var ti struct{ ID, Ticket string }
	if err := json.Unmarshal([]byte(out), &ti); err != nil {
		t.Fatal(err)
	}
	return ti.ID, ti.Ticket
}

// TestSecurityTerminals: the real daemon with --terminal and the sandbox's
// real sshd hosts. A terminal opens only with the token, from an allowed
// origin, on this machine or a host the runbook's parameters name; at most
// --max-terminals at once; its WebSocket refuses a cross-site page and a
// missing or spent ticket. On cp1 the shell is cp1's; what was typed there
// is journaled with the secret masked; a terminal whose page went away and
// did not come back ends, and the processes started in it end on the host.
func TestSecurityTerminals(t *testing.T) {
	s := testrig.SSH(t)
	inv := s.Inventory
	off := startDaemon(t, contentDir(t, map[string]string{"ops.md": termOps}), "--allow-origin", pageOrigin)
	if code, out, _ := off.call(t, "POST", "/api/terminals", map[string]any{"runbook": "ops"}, nil); code != 403 || !strings.Contains(out, "terminal_off") {
		t.Errorf("without --terminal: %d %s", code, out)
	}

	d := startDaemon(t, contentDir(t, map[string]string{"ops.md": termOps}), "--terminal", "--max-terminals", "2", "--terminal-grace", "1s",
		"--allow-origin", pageOrigin, "--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile)
	hash := d.blockHash(t, "ops", "edit-by-hand")
	for _, tc := range []struct {
		name   string
		body   map[string]any
		header map[string]string
		code   int
		want   string
	}{
		{"no token", map[string]any{"runbook": "ops"}, map[string]string{"Authorization": ""}, 401, "bad_token"},
		{"foreign origin", map[string]any{"runbook": "ops"}, map[string]string{"Origin": "https://evil.example"}, 403, "bad_origin"},
		{"rebinding host", map[string]any{"runbook": "ops"}, map[string]string{"Host": "evil.example"}, 403, "bad_host"},
		{"a host the runbook does not name", map[string]any{"runbook": "ops", "host": "w0"}, nil, 403, "host_not_in_runbook"},
		{"an option as a host", map[string]any{"runbook": "ops", "host": "-oProxyCommand=touch /tmp/cairn-pwned"}, nil, 403, "host_not_in_runbook"},
		{"a stale block", map[string]any{"runbook": "ops", "block": "edit-by-hand", "hash": "stale"}, nil, 409, "hash_mismatch"},
	} {
		code, out, _ := d.call(t, "POST", "/api/terminals", tc.body, tc.header)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, out, tc.code, tc.want)
		}
	}
	if _, err := os.Stat("/tmp/cairn-pwned"); err == nil {
		t.Error("an option passed as a host ran")
	}

	// On cp1, from the manual step, the secret typed into the form.
	secret := "tok-1a2b3c4d5e6f"
	id, ticket := openTerminal(t, d, map[string]any{"runbook": "ops", "block": "edit-by-hand", "hash": hash, "host": "cp1", "params": map[string]string{"TOKEN": secret}})
	if c, code, err := d.attach(id, ticket, "https://evil.example"); err == nil || code != 403 {
		if c != nil {
			c.Close()
		}
		t.Errorf("a cross-site page's WebSocket: %d %v", code, err)
	}
	if c, code, err := d.attach(id, "", pageOrigin); err == nil || code != 401 {
		if c != nil {
			c.Close()
		}
		t.Errorf("a WebSocket without a ticket: %d %v", code, err)
	}
	c, _, err := d.attach(id, ticket, pageOrigin)
	if err != nil {
		t.Fatal(err)
	}
	typeAndWait(t, c, `echo "on-$(hostname)-$((6*7))"; echo `+secret, "on-cp1-42")
	if _, code, err := d.attach(id, ticket, pageOrigin); err == nil || code != 401 {
		t.Errorf("a ticket used twice: %d %v", code, err)
	}
	// The cap: this one and one more; a third is refused.
	id2, ticket2 := openTerminal(t, d, map[string]any{"runbook": "ops", "host": "cp1"})
	if code, out, _ := d.call(t, "POST", "/api/terminals", map[string]any{"runbook": "ops"}, nil); code != 429 || !strings.Contains(out, "too_many_terminals") {
		t.Errorf("a third terminal: %d %s", code, out)
	}
	if code, out, _ := d.call(t, "POST", "/api/terminals/"+id+"/done", nil, nil); code != 200 {
		t.Fatalf("done: %d %s", code, out)
	}
	c.Close()

	// The second: a page that starts something and goes away for good.
	c2, _, err := d.attach(id2, ticket2, pageOrigin)
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("cairn-term-left-%d", time.Now().UnixNano())
	typeAndWait(t, c2, fmt.Sprintf("(exec -a %s sleep 300) & echo \"bg-$((1+1))\"", marker), "bg-2")
	c2.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		if len(strings.TrimSpace(string(out))) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process started in a terminal whose page went away still runs on cp1: %s", out)
		}
	}

	// The journal: done by hand on cp1, the secret masked.
	code, out, _ := d.call(t, "GET", "/api/runbooks/ops/results", nil, nil)
	var res struct {
		Last map[string]struct{ Status, Target, Where, Output, By string } `json:"last"`
	}
	if code != 200 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("results: %d %s", code, out)
	}
	rec := res.Last["edit-by-hand"]
	if rec.Status != "by-hand" || rec.Target != "terminal" || !strings.HasPrefix(rec.Where, "cp1") || !strings.Contains(rec.Output, "on-cp1-42") || strings.Contains(rec.Output, secret) || !strings.Contains(rec.Output, "••••") {
		t.Errorf("the journaled session: %+v", rec)
	}
}

// TestSecurityDaemonKill9EndsTerminals: the daemon, a real process, is
// killed with SIGKILL while a terminal's shell has a background child, a
// setsid child and a double-forked child; all of them end.
func TestSecurityDaemonKill9EndsTerminals(t *testing.T) {
	pids := t.TempDir()
	dir := contentDir(t, map[string]string{"ops.md": termOps})
	t.Setenv("SHELL", "/bin/bash")
	// The login shell's own start-up files: none (the machine's ran a pyenv
	// init that waited a minute on a lock a killed shell had left).
	t.Setenv("HOME", t.TempDir())
	d, cmd := startDaemonProcess(t, dir, "--terminal", "--allow-origin", pageOrigin)
	id, ticket := openTerminal(t, d, map[string]any{"runbook": "ops"})
	c, _, err := d.attach(id, ticket, pageOrigin)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	typeAndWait(t, c, "sleep 300 & echo $! > "+pids+"/bg; setsid -f sh -c 'echo $$ > "+pids+"/setsid; exec sleep 300'; ( ( sh -c 'echo $$ > "+pids+"/double; exec sleep 300' & ) & ); sleep 0.5; echo \"st\"\"arted\"", "\nstarted")
	procs := map[string]int{}
	for _, n := range []string{"bg", "setsid", "double"} {
		b, err := os.ReadFile(filepath.Join(pids, n))
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		procs[n] = pid
	}
	defer func() {
		for _, pid := range procs {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	kill9Leaves(t, cmd, procs)
}
