package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
)

type content []*runbook.Runbook

func (c content) Runbooks() []*runbook.Runbook { return c }

const token = "s3cret-token-for-tests"

const md = "---\ntitle: t\nslug: demo\nparams:\n  - name: V\n    default: hi\n---\n## s {#s}\n\n" +
	"```bash {#echo target=local expect.contains=\"hi\"}\nprintf '%s\\n' \"$V\"; touch \"$CAIRN_MARKER\"\n```\n\n" +
	"```bash {#danger target=local confirm=true}\ntouch \"$CAIRN_MARKER\"\n```\n\n" +
	"```bash {#long target=local timeout=30s}\nsleep 20\n```\n\n" +
	// live outlasts any test that needs it running (the test cancels it):
	// 205 runs took 30 s at load 20, as long as its old sleep 30.
	"```bash {#live target=local concurrent=true timeout=10m}\nsleep 600\n```\n"

type fixture struct {
	srv    *httptest.Server
	rb     *runbook.Runbook
	marker string
	d      *daemon.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rb, err := runbook.Parse("demo.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	j, err := executor.OpenJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	eng := &executor.Engine{Runners: map[string]executor.Runner{executor.RunnerLocal: &local.Runner{ExtraEnv: []string{"CAIRN_MARKER=" + marker}}}, Journal: j}
	d := &daemon.Server{Engine: eng, Content: content{rb}, Token: token, AllowOrigins: []string{"http://127.0.0.1:1313"}}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() { srv.Close(); d.Close(); j.Close() })
	return &fixture{srv: srv, rb: rb, marker: marker, d: d}
}

type req struct {
	method, path, body string
	header             map[string]string
	host               string
}

func (f *fixture) do(t *testing.T, r req) (int, string, http.Header) {
	t.Helper()
	hr, err := http.NewRequest(r.method, f.srv.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func auth(extra map[string]string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

func (f *fixture) runBody(block string, extra string) string {
	return `{"runbook":"demo","block":"` + block + `","hash":"` + f.rb.BlockByID(block).Hash + `"` + extra + `}`
}

// TestHostileRequests: every request below is refused and none runs
// anything.
func TestHostileRequests(t *testing.T) {
	f := newFixture(t)
	good := f.runBody("echo", "")
	for _, tc := range []struct {
		name string
		r    req
		code int
		want string
	}{
		{"no token", req{method: "POST", path: "/api/runs", body: good, header: map[string]string{"Content-Type": "application/json"}}, 401, "bad_token"},
		{"wrong token", req{method: "POST", path: "/api/runs", body: good, header: auth(map[string]string{"Authorization": "Bearer wrong"})}, 401, "bad_token"},
		{"token prefix", req{method: "POST", path: "/api/runs", body: good, header: auth(map[string]string{"Authorization": "Bearer " + token[:5]})}, 401, "bad_token"},
		{"token in query", req{method: "POST", path: "/api/runs?token=" + token, body: good, header: map[string]string{"Content-Type": "application/json"}}, 401, "bad_token"},
		{"foreign origin", req{method: "POST", path: "/api/runs", body: good, header: auth(map[string]string{"Origin": "https://evil.example"})}, 403, "bad_origin"},
		{"null origin", req{method: "POST", path: "/api/runs", body: good, header: auth(map[string]string{"Origin": "null"})}, 403, "bad_origin"},
		{"rebinding host", req{method: "POST", path: "/api/runs", body: good, header: auth(nil), host: "evil.example:7788"}, 403, "bad_host"},
		{"rebinding host lookalike", req{method: "POST", path: "/api/runs", body: good, header: auth(nil), host: "127.0.0.1.evil.example"}, 403, "bad_host"},
		{"unknown block", req{method: "POST", path: "/api/runs", body: `{"runbook":"demo","block":"nope","hash":"x"}`, header: auth(nil)}, 404, "unknown_block"},
		{"unknown runbook", req{method: "POST", path: "/api/runs", body: `{"runbook":"other","block":"echo","hash":"x"}`, header: auth(nil)}, 404, "unknown_runbook"},
		{"path traversal", req{method: "POST", path: "/api/runs", body: `{"runbook":"../../etc/passwd","block":"echo","hash":"x"}`, header: auth(nil)}, 404, "unknown_runbook"},
		{"path traversal in url", req{method: "GET", path: "/api/runbooks/..%2F..%2Fetc/results", header: auth(nil)}, 404, ""},
		{"tampered hash", req{method: "POST", path: "/api/runs", body: `{"runbook":"demo","block":"echo","hash":"` + strings.Repeat("0", 64) + `"}`, header: auth(nil)}, 409, "hash_mismatch"},
		{"arbitrary script field", req{method: "POST", path: "/api/runs", body: `{"runbook":"demo","block":"echo","hash":"x","script":"rm -rf /"}`, header: auth(nil)}, 400, "unknown field"},
		{"injection in params", req{method: "POST", path: "/api/runs", body: f.runBody("echo", `,"params":{"NOT_DECLARED":"x"}`), header: auth(nil)}, 400, "bad_param"},
		{"needs confirm", req{method: "POST", path: "/api/runs", body: f.runBody("danger", ""), header: auth(nil)}, 428, "needs_confirm"},
		{"oversized body", req{method: "POST", path: "/api/runs", body: `{"runbook":"demo","block":"echo","hash":"` + strings.Repeat("a", daemon.MaxBody) + `"}`, header: auth(nil)}, 413, "too_large"},
		{"form post", req{method: "POST", path: "/api/runs", body: "runbook=demo&block=echo", header: auth(map[string]string{"Content-Type": "application/x-www-form-urlencoded"})}, 415, "bad_content_type"},
		{"trailing json", req{method: "POST", path: "/api/runs", body: good + `{"runbook":"demo"}`, header: auth(nil)}, 400, "data after"},
		{"not json", req{method: "POST", path: "/api/runs", body: `{"runbook":`, header: auth(nil)}, 400, "bad request"},
		{"preflight foreign", req{method: "OPTIONS", path: "/api/runs", header: map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Private-Network": "true"}}, 403, "bad_origin"},
		{"get method for run", req{method: "GET", path: "/api/runs/../runs", header: auth(nil)}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, h := f.do(t, tc.r)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%d %s; want %d containing %q", code, body, tc.code, tc.want)
			}
			if h.Get("Access-Control-Allow-Private-Network") != "" && tc.code >= 400 {
				t.Error("private network access granted to a refused request")
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(f.marker); err == nil {
		t.Fatal("a hostile request ran a block")
	}
}

func TestPreflightAllowedOrigin(t *testing.T) {
	f := newFixture(t)
	code, _, h := f.do(t, req{method: "OPTIONS", path: "/api/runs", header: map[string]string{
		"Origin": "http://127.0.0.1:1313", "Access-Control-Request-Method": "POST", "Access-Control-Request-Private-Network": "true"}})
	if code != 204 || h.Get("Access-Control-Allow-Private-Network") != "true" || h.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:1313" {
		t.Errorf("preflight: %d %v", code, h)
	}
}

// TestRunStreamsAndJournals runs a block through the API with a hostile
// parameter value, reads the SSE stream to the end and checks the record.
func TestRunStreamsAndJournals(t *testing.T) {
	f := newFixture(t)
	hostile := `x"; rm -rf ~ # $(touch /tmp/cairn-pwned)`
	code, body, _ := f.do(t, req{method: "POST", path: "/api/runs", body: f.runBody("echo", `,"params":{"V":`+jsonString(hostile)+`}`),
		header: auth(map[string]string{"Origin": "http://127.0.0.1:1313"})})
	if code != 202 {
		t.Fatalf("start: %d %s", code, body)
	}
	var started struct{ ID string }
	json.Unmarshal([]byte(body), &started)
	events := f.stream(t, started.ID)
	if !strings.Contains(events, jsonString(hostile)[1:len(jsonString(hostile))-1]) {
		t.Errorf("the value did not arrive literally:\n%s", events)
	}
	if !strings.Contains(events, "event: done") || !strings.Contains(events, `"status":"failed"`) {
		t.Errorf("stream:\n%s", events)
	}
	if _, err := os.Stat("/tmp/cairn-pwned"); err == nil {
		t.Fatal("parameter value was executed")
	}
	// A late subscriber gets the replay and the result.
	if again := f.stream(t, started.ID); !strings.Contains(again, "event: output") || !strings.Contains(again, "event: done") {
		t.Errorf("replay:\n%s", again)
	}
	code, body, _ = f.do(t, req{method: "GET", path: "/api/runs?runbook=demo", header: auth(nil)})
	if code != 200 || !strings.Contains(body, started.ID) {
		t.Errorf("runs: %d %s", code, body)
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t)
	code, body, _ := f.do(t, req{method: "POST", path: "/api/runs", body: f.runBody("long", ""), header: auth(nil)})
	if code != 202 {
		t.Fatalf("%d %s", code, body)
	}
	var started struct{ ID string }
	json.Unmarshal([]byte(body), &started)
	// A second block of the same runbook is refused while it runs.
	if code, body, _ := f.do(t, req{method: "POST", path: "/api/runs", body: f.runBody("echo", ""), header: auth(nil)}); code != 409 || !strings.Contains(body, "busy") {
		t.Errorf("concurrent: %d %s", code, body)
	}
	start := time.Now()
	code, body, _ = f.do(t, req{method: "POST", path: "/api/runs/" + started.ID + "/cancel", header: auth(nil)})
	if code != 200 || !strings.Contains(body, `"cancelled"`) {
		t.Errorf("cancel: %d %s", code, body)
	}
	t.Logf("cancelled in %s", time.Since(start).Round(time.Millisecond))
}

func (f *fixture) stream(t *testing.T, id string) string {
	t.Helper()
	hr, _ := http.NewRequest("GET", f.srv.URL+"/api/runs/"+id+"/events", nil)
	hr.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		buf.WriteString(sc.Text() + "\n")
	}
	return buf.String()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func FuzzDecodeRunRequest(f *testing.F) {
	f.Add(`{"runbook":"demo","block":"echo","hash":"abc","params":{"V":"x"},"confirm":true}`)
	f.Add(`{"runbook":1}`)
	f.Add(`{"runbook":"a","block":"b","hash":"c"}{}`)
	f.Fuzz(func(t *testing.T, s string) {
		req, err := daemon.DecodeRunRequest(strings.NewReader(s))
		if err == nil && (req.Runbook == "" || req.Block == "" || req.Hash == "") {
			t.Fatalf("accepted an incomplete request: %+v", req)
		}
	})
}

// TestFinishedRunsForgottenWhileOneIsLive: the review found the in-memory
// run list stopped trimming while an older run was live, so memory grew
// with every run. Finished runs past the bound are forgotten (the journal
// keeps them); the live one is not.
func TestFinishedRunsForgottenWhileOneIsLive(t *testing.T) {
	f := newFixture(t)
	code, body, _ := f.do(t, req{method: "POST", path: "/api/runs", body: f.runBody("live", ""), header: auth(nil)})
	if code != 202 {
		t.Fatalf("%d %s", code, body)
	}
	var live struct{ ID string }
	json.Unmarshal([]byte(body), &live)
	defer f.do(t, req{method: "POST", path: "/api/runs/" + live.ID + "/cancel", header: auth(nil)})
	var first string
	for i := 0; i < 205; i++ {
		code, body, _ := f.do(t, req{method: "POST", path: "/api/runs", body: f.runBody("echo", ""), header: auth(nil)})
		if code != 202 {
			t.Fatalf("run %d: %d %s", i, code, body)
		}
		var started struct{ ID string }
		json.Unmarshal([]byte(body), &started)
		if i == 0 {
			first = started.ID
		}
		f.stream(t, started.ID) // wait for it
	}
	if code, _, _ := f.do(t, req{method: "GET", path: "/api/runs/" + first, header: auth(nil)}); code != 404 {
		t.Errorf("the oldest finished run is still held in memory (%d)", code)
	}
	if code, _, _ := f.do(t, req{method: "GET", path: "/api/runs/" + live.ID, header: auth(nil)}); code != 200 {
		t.Errorf("the live run was forgotten (%d)", code)
	}
}
