package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// The security suite: each attack and fault of the outside review, replayed
// against the real `cairn daemon` (its listener, guard, engine, runners and
// journal as the CLI wires them; a separate process where the attack kills
// it). docs/executor-api.md maps each guarantee to its test here.

// realDaemon is a running `cairn daemon`.
type realDaemon struct {
	base, token string
	content     string
	stderr      *syncBuffer
	journal     string
	stop        func()
}

var (
	listenRe = regexp.MustCompile(`executor listening on (http://127\.0\.0\.1:\d+)`)
	tokenRe  = regexp.MustCompile(`(?:token: |cairn-token=)([0-9a-f]+)`)
)

// startDaemon runs `cairn daemon` in-process on a free loopback port with
// content dir and extra flags.
func startDaemon(t *testing.T, dir string, extra ...string) *realDaemon {
	t.Helper()
	journal := filepath.Join(t.TempDir(), "journal.db")
	args := append([]string{"daemon", "--listen", "127.0.0.1:0", "--content", dir, "--sandbox", "no", "--journal", journal}, extra...)
	if !hasFlag(extra, "--kubeconfig") {
		args = append(args, "--kubeconfig", filepath.Join(t.TempDir(), "none"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, args) }()
	stop := sync.OnceFunc(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	t.Cleanup(stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := stderr.String()
		if l, tk := listenRe.FindStringSubmatch(out), tokenRe.FindStringSubmatch(out); l != nil && tk != nil {
			return &realDaemon{base: l[1], token: tk[1], content: dir, stderr: stderr, journal: journal, stop: stop}
		}
		select {
		case err := <-done:
			t.Fatalf("daemon stopped: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not start:\n%s", out)
		}
	}
}

func hasFlag(args []string, f string) bool {
	for _, a := range args {
		if a == f {
			return true
		}
	}
	return false
}

// call sends one API request and returns the status and body.
func (d *realDaemon) call(t *testing.T, method, path string, body any, header map[string]string) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, _ := json.Marshal(b)
		rd = strings.NewReader(string(js))
	}
	req, err := http.NewRequest(method, d.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// blockHash asks the daemon for a block's hash, as the page does.
func (d *realDaemon) blockHash(t *testing.T, slug, block string) string {
	t.Helper()
	code, body, _ := d.call(t, "GET", "/api/runbooks", nil, nil)
	if code != 200 {
		t.Fatalf("runbooks: %d %s", code, body)
	}
	var rbs []struct {
		Slug   string
		Blocks []struct{ ID, Hash string }
	}
	json.Unmarshal([]byte(body), &rbs)
	for _, rb := range rbs {
		for _, b := range rb.Blocks {
			if rb.Slug == slug && b.ID == block {
				return b.Hash
			}
		}
	}
	t.Fatalf("no block %s/%s in %s\n%s", slug, block, body, d.stderr.String())
	return ""
}

// run starts a block and returns the final record (from the SSE stream)
// and the whole stream.
func (d *realDaemon) run(t *testing.T, slug, block string, params map[string]string, confirm bool) (*executor.Record, string) {
	t.Helper()
	code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": slug, "block": block, "hash": d.blockHash(t, slug, block), "params": params, "confirm": confirm}, nil)
	if code != 202 {
		t.Fatalf("start %s: %d %s", block, code, body)
	}
	var started struct{ ID string }
	json.Unmarshal([]byte(body), &started)
	return d.wait(t, started.ID)
}

func (d *realDaemon) wait(t *testing.T, id string) (*executor.Record, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", d.base+"/api/runs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	resp, err := (&http.Client{Timeout: 120 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all strings.Builder
	var rec *executor.Record
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 8<<20)
	done := false
	for sc.Scan() {
		line := sc.Text()
		all.WriteString(line + "\n")
		if line == "event: done" {
			done = true
		} else if done && strings.HasPrefix(line, "data: ") {
			rec = &executor.Record{}
			json.Unmarshal([]byte(line[6:]), rec)
			break
		}
	}
	if rec == nil {
		t.Fatalf("no done event:\n%s", all.String())
	}
	return rec, all.String()
}

// contentDir is a folder with the given runbooks (name -> Markdown).
func contentDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func bundledSource(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "content", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// escalation is the review's TEST_IMAGE: close the Pod, add a
// ClusterRoleBinding that makes default/default cluster-admin.
const escalation = "nginx\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: cairn-review-pwn\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n- kind: ServiceAccount\n  name: default\n  namespace: default"

// TestSecurityManifestInjection (review 1, high): one POST /api/runs of the
// Cilium runbook's apply-other-pool-pod with a multi-line TEST_IMAGE. The
// value must stay the image string; no ClusterRoleBinding may appear.
func TestSecurityManifestInjection(t *testing.T) {
	k := testrig.Kube(t)
	dir := contentDir(t, map[string]string{"cilium-multipool.md": bundledSource(t, "cilium-multipool.md")})
	d := startDaemon(t, dir, "--kubeconfig", k.Kubeconfig, "--context", k.Context)
	params := map[string]string{"TEST_NAMESPACE": k.Namespace, "CILIUM_VERSION": "1.20.2"}
	for i, v := range []string{escalation, "nginx\"\n  hostNetwork: true\n  x: \"", "nginx\n  serviceAccountName: default"} {
		params["TEST_IMAGE"] = v
		rec, stream := d.run(t, "cilium-multipool", "apply-other-pool-pod", params, false)
		ctx := bundledtest.Ctx(t, 20*time.Second)
		crbs, err := k.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, crb := range crbs.Items {
			for _, s := range crb.Subjects {
				if crb.Name == "cairn-review-pwn" || crb.RoleRef.Name == "cluster-admin" && s.Name == "default" && s.Namespace == "default" {
					t.Fatalf("payload %d created %s: %s\n%s", i, crb.Name, rec.Status, stream)
				}
			}
		}
		pod, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, "nginx-other-pool", metav1.GetOptions{})
		switch {
		case err == nil:
			if got := pod.Spec.Containers[0].Image; got != v || pod.Spec.HostNetwork || pod.Spec.ServiceAccountName != "" && pod.Spec.ServiceAccountName != "default" {
				t.Errorf("payload %d: image %q hostNetwork %v: the value left its scalar", i, got, pod.Spec.HostNetwork)
			}
			k.Client.CoreV1().Pods(k.Namespace).Delete(ctx, "nginx-other-pool", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		case rec.Status == executor.StatusVerified:
			t.Errorf("payload %d: verified but no pod: %v", i, err)
		default:
			t.Logf("payload %d: the apiserver refused the image value (%s): %.200s", i, rec.Status, strings.Join(rec.Reasons, "; "))
		}
	}
}

const hostileMD = `---
title: hostile
slug: hostile
params:
  - name: V
    default: hi
  - name: SECRET
    secret: true
    required: false
  - name: HOST
    type: host
    default: cp0
  - name: OPT
    required: false
---
## s {#s}

` + "```bash {#echo target=local expect.contains=\"hi\"}\nprintf '%s\\n' \"$V\"; touch \"$TMPDIR/ran\"\n```\n\n" +
	"```bash {#danger target=local confirm=true}\ntouch \"$TMPDIR/ran\"\n```\n\n" +
	"```bash {#optional target=local expect.contains=\"opt=[]\"}\necho \"opt=[$OPT]\"\n```\n\n" +
	"```bash {#leak target=local capture.CONF='conf=(.*)'}\necho \"conf=user:$SECRET@host\"\n```\n\n" +
	"```bash {#long target=local concurrent=true timeout=5m}\necho started; sleep 300\n```\n"

// TestSecurityHostileRequests replays the requests the review's guard held
// (token, Origin, rebinding Host, CORS/PNA, CSRF, traversal, tampered
// hashes, bodies) and the smaller findings, against the real daemon:
// every one is refused and nothing runs.
func TestSecurityHostileRequests(t *testing.T) {
	markers := t.TempDir()
	t.Setenv("TMPDIR", markers)
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	d := startDaemon(t, dir)
	hash := d.blockHash(t, "hostile", "echo")
	good := fmt.Sprintf(`{"runbook":"hostile","block":"echo","hash":%q}`, hash)
	withParams := func(p string) string {
		return fmt.Sprintf(`{"runbook":"hostile","block":"echo","hash":%q,"params":%s}`, hash, p)
	}
	type tc struct {
		name         string
		method, path string
		body         string
		header       map[string]string
		code         int
		want         string
	}
	cases := []tc{
		{"no token", "POST", "/api/runs", good, map[string]string{"Authorization": ""}, 401, "bad_token"},
		{"wrong token", "POST", "/api/runs", good, map[string]string{"Authorization": "Bearer 00"}, 401, "bad_token"},
		{"token prefix", "POST", "/api/runs", good, map[string]string{"Authorization": "Bearer " + d.token[:8]}, 401, "bad_token"},
		{"token with suffix", "POST", "/api/runs", good, map[string]string{"Authorization": "Bearer " + d.token + "0"}, 401, "bad_token"},
		{"basic auth", "POST", "/api/runs", good, map[string]string{"Authorization": "Basic " + d.token}, 401, "bad_token"},
		{"token in query", "POST", "/api/runs?token=" + d.token, good, map[string]string{"Authorization": ""}, 401, "bad_token"},
		{"foreign origin", "POST", "/api/runs", good, map[string]string{"Origin": "https://evil.example"}, 403, "bad_origin"},
		{"null origin", "POST", "/api/runs", good, map[string]string{"Origin": "null"}, 403, "bad_origin"},
		{"loopback origin not allowed", "POST", "/api/runs", good, map[string]string{"Origin": "http://127.0.0.1:9999"}, 403, "bad_origin"},
		{"rebinding host", "POST", "/api/runs", good, map[string]string{"Host": "evil.example:7788"}, 403, "bad_host"},
		{"rebinding lookalike", "POST", "/api/runs", good, map[string]string{"Host": "127.0.0.1.evil.example"}, 403, "bad_host"},
		{"rebinding localhost suffix", "POST", "/api/runs", good, map[string]string{"Host": "localhost.evil.example"}, 403, "bad_host"},
		{"preflight foreign", "OPTIONS", "/api/runs", "", map[string]string{"Authorization": "", "Origin": "https://evil.example", "Access-Control-Request-Private-Network": "true"}, 403, "bad_origin"},
		{"preflight no origin", "OPTIONS", "/api/runs", "", map[string]string{"Authorization": ""}, 403, "bad_origin"},
		{"form post (CSRF)", "POST", "/api/runs", "runbook=hostile&block=echo", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "bad_content_type"},
		{"text/plain post (CSRF)", "POST", "/api/runs", good, map[string]string{"Content-Type": "text/plain"}, 415, "bad_content_type"},
		{"unknown block", "POST", "/api/runs", `{"runbook":"hostile","block":"nope","hash":"x"}`, nil, 404, "unknown_block"},
		{"unknown runbook", "POST", "/api/runs", `{"runbook":"other","block":"echo","hash":"x"}`, nil, 404, "unknown_runbook"},
		{"traversal in body", "POST", "/api/runs", `{"runbook":"../../etc/passwd","block":"echo","hash":"x"}`, nil, 404, "unknown_runbook"},
		{"traversal in url", "GET", "/api/runbooks/..%2F..%2Fetc/results", "", nil, 404, ""},
		{"tampered hash", "POST", "/api/runs", `{"runbook":"hostile","block":"echo","hash":"` + strings.Repeat("0", 64) + `"}`, nil, 409, "hash_mismatch"},
		{"script field", "POST", "/api/runs", `{"runbook":"hostile","block":"echo","hash":"x","script":"touch /tmp/x"}`, nil, 400, "unknown field"},
		{"undeclared param", "POST", "/api/runs", withParams(`{"NOT_DECLARED":"x"}`), nil, 400, "bad_param"},
		{"needs confirm", "POST", "/api/runs", fmt.Sprintf(`{"runbook":"hostile","block":"danger","hash":%q}`, d.blockHash(t, "hostile", "danger")), nil, 428, "needs_confirm"},
		{"oversized body", "POST", "/api/runs", `{"runbook":"hostile","block":"echo","hash":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413, "too_large"},
		{"trailing json", "POST", "/api/runs", good + `{}`, nil, 400, "data after"},
		{"not json", "POST", "/api/runs", `{"runbook":`, nil, 400, "bad request"},
		// Review 3: a port spelled twice would reach known_hosts under another name.
		{"port with zero", "POST", "/api/runs", withParams(`{"HOST":"cp0:042791"}`), nil, 400, "bad port"},
		{"port with plus", "POST", "/api/runs", withParams(`{"HOST":"cp0:+42791"}`), nil, 400, "bad port"},
		// Review 4d: a secret too short to mask is refused, not shown.
		{"short secret", "POST", "/api/runs", withParams(`{"SECRET":"ab"}`), nil, 400, "cannot be masked"},
	}
	// Every endpoint, without the token, from a foreign origin, through a
	// rebinding Host.
	for _, ep := range []struct{ method, path string }{
		{"GET", "/api/health"}, {"GET", "/api/runbooks"}, {"GET", "/api/runbooks/hostile/results"},
		{"GET", "/api/runbooks/hostile/target"}, {"POST", "/api/runs"}, {"GET", "/api/runs"},
		{"GET", "/api/runs/0123456789abcdef"}, {"GET", "/api/runs/0123456789abcdef/events"}, {"POST", "/api/runs/0123456789abcdef/cancel"},
		{"POST", "/api/sandbox/accept"}, {"POST", "/api/plans"}, {"POST", "/api/plans/preview"},
	} {
		cases = append(cases,
			tc{ep.method + " " + ep.path + " without token", ep.method, ep.path, good, map[string]string{"Authorization": ""}, 401, "bad_token"},
			tc{ep.method + " " + ep.path + " from a foreign origin", ep.method, ep.path, good, map[string]string{"Origin": "https://evil.example"}, 403, "bad_origin"},
			tc{ep.method + " " + ep.path + " through rebinding", ep.method, ep.path, good, map[string]string{"Host": "attacker.example"}, 403, "bad_host"})
	}
	manyParams := map[string]string{}
	for i := 0; i < 300; i++ {
		manyParams[fmt.Sprintf("P%d", i)] = "x"
	}
	mp, _ := json.Marshal(manyParams)
	cases = append(cases,
		tc{"too many params", "POST", "/api/runs", withParams(string(mp)), nil, 400, "too many params"},
		tc{"param too long", "POST", "/api/runs", withParams(fmt.Sprintf(`{"V":%q}`, strings.Repeat("v", 9<<10))), nil, 400, "too long"},
		tc{"unknown run", "GET", "/api/runs/nope", "", nil, 404, "unknown_run"},
		tc{"cancel unknown run", "POST", "/api/runs/nope/cancel", "", nil, 404, "unknown_run"},
		tc{"put", "PUT", "/api/runs", good, nil, 405, ""},
		tc{"delete", "DELETE", "/api/runs", "", nil, 405, ""},
		// The reader's acceptance of another sandbox: only JSON, only the
		// offered id (none is offered here), nothing else in the body.
		tc{"accept as a form post (CSRF)", "POST", "/api/sandbox/accept", "id=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "bad_content_type"},
		tc{"accept as text/plain (CSRF)", "POST", "/api/sandbox/accept", `{"id":"x"}`, map[string]string{"Content-Type": "text/plain"}, 415, "bad_content_type"},
		tc{"accept an id not offered", "POST", "/api/sandbox/accept", `{"id":"2026-01-01T00:00:00Z"}`, nil, 409, "not_offered"},
		tc{"accept with an unknown field", "POST", "/api/sandbox/accept", `{"id":"x","dir":"/tmp"}`, nil, 400, "bad_request"},
		tc{"accept with trailing data", "POST", "/api/sandbox/accept", `{"id":"x"}{}`, nil, 400, "bad_request"},
		tc{"accept an oversized id", "POST", "/api/sandbox/accept", `{"id":"` + strings.Repeat("x", 100) + `"}`, nil, 400, "bad_request"},
	)
	// Plans (run a step, or from a step on): every block must be the one
	// the page showed, confirmations are the page's answers, and nothing
	// outside the loaded content can be named.
	plan := func(extra string) string {
		return fmt.Sprintf(`{"runbook":"hostile","block":"echo","hashes":{"echo":%q}%s}`, hash, extra)
	}
	cases = append(cases,
		tc{"plan without hashes", "POST", "/api/plans", `{"runbook":"hostile","block":"echo"}`, nil, 409, "hash_mismatch"},
		tc{"plan with a tampered hash", "POST", "/api/plans", `{"runbook":"hostile","block":"echo","hashes":{"echo":"00"}}`, nil, 409, "hash_mismatch"},
		tc{"plan of another runbook", "POST", "/api/plans", `{"runbook":"../../etc/passwd","from":"s"}`, nil, 404, "unknown_runbook"},
		tc{"plan of an unknown step", "POST", "/api/plans", `{"runbook":"hostile","step":"nope"}`, nil, 404, "unknown_step"},
		tc{"plan with a script field", "POST", "/api/plans", plan(`,"script":"touch /tmp/x"`), nil, 400, "unknown field"},
		tc{"plan as a form post (CSRF)", "POST", "/api/plans", "runbook=hostile&block=echo", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "bad_content_type"},
		tc{"plan with an undeclared param", "POST", "/api/plans", plan(`,"params":{"NOT_DECLARED":"x"}`), nil, 400, "bad_param"},
		tc{"plan with trailing data", "POST", "/api/plans", plan("") + "{}", nil, 400, "data after"},
		tc{"plan with no selection", "POST", "/api/plans", `{"runbook":"hostile"}`, nil, 400, "bad_request"},
		tc{"preview with a tampered hash", "POST", "/api/plans/preview", `{"runbook":"hostile","block":"echo","hashes":{"echo":"00"}}`, nil, 409, "hash_mismatch"},
		tc{"preview of another runbook", "POST", "/api/plans/preview", `{"runbook":"../../etc/passwd","from":"s"}`, nil, 404, "unknown_runbook"},
		tc{"preview as a form post (CSRF)", "POST", "/api/plans/preview", "runbook=hostile&block=echo", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "bad_content_type"},
		tc{"preview with a script field", "POST", "/api/plans/preview", plan(`,"script":"touch /tmp/x"`), nil, 400, "unknown field"},
		tc{"plan from an unknown block", "POST", "/api/plans", `{"runbook":"hostile","from_block":"nope","hashes":{}}`, nil, 404, "unknown_step"},
	)
	for _, v := range []string{"$(touch x)", "`touch x`", "; touch x", "x\ntouch x", "' ; touch x; '"} {
		cases = append(cases, tc{"shell in host param " + strconv.Quote(v), "POST", "/api/runs", withParams(fmt.Sprintf(`{"HOST":%q}`, v)), nil, 400, "bad_param"})
	}
	for _, c := range cases {
		code, body, h := d.call(t, c.method, c.path, c.body, c.header)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
		if h.Get("Access-Control-Allow-Private-Network") != "" && code >= 400 {
			t.Errorf("%s: private network access granted to a refused request", c.name)
		}
		if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: the response may be framed: %v", c.name, h)
		}
	}
	if _, err := os.Stat(filepath.Join(markers, "ran")); err == nil {
		t.Fatal("a hostile request ran a block")
	}
	t.Logf("%d hostile requests, %d held", len(cases), len(cases))

	// Review 8: an optional parameter with no value is set and empty, so a
	// set -u block runs.
	if rec, out := d.run(t, "hostile", "optional", nil, false); rec.Status != executor.StatusVerified {
		t.Errorf("optional parameter: %s %v\n%s", rec.Status, rec.Reasons, out)
	}
}

// TestSecuritySecretInNonSecretCapture (review 4a): a secret caught by a
// capture that is not secret reaches no record, stream or journal.
func TestSecuritySecretInNonSecretCapture(t *testing.T) {
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	d := startDaemon(t, dir)
	const secret = "hunter2-review-secret"
	rec, stream := d.run(t, "hostile", "leak", map[string]string{"SECRET": secret}, false)
	if rec.Status != executor.StatusVerified || rec.Captures["CONF"] != executor.Mask {
		t.Errorf("capture holding a secret: %s %v %v", rec.Status, rec.Captures, rec.Reasons)
	}
	if strings.Contains(stream, secret) {
		t.Errorf("the secret is in the event stream:\n%s", stream)
	}
	for _, path := range []string{"/api/runs?runbook=hostile", "/api/runbooks/hostile/results"} {
		if _, body, _ := d.call(t, "GET", path, nil, nil); strings.Contains(body, secret) {
			t.Errorf("the secret is in %s: %s", path, body)
		}
	}
	d.stop()
	for _, f := range []string{d.journal, d.journal + "-wal"} {
		if data, _ := os.ReadFile(f); strings.Contains(string(data), secret) {
			t.Errorf("the secret is in %s", f)
		}
	}
}

// TestSecurityIdleConnections (review 6): 3,000 token-less idle
// connections do not keep 10 real requests from an answer.
func TestSecurityIdleConnections(t *testing.T) {
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	d, cmd := startDaemonProcess(t, dir)
	addr := strings.TrimPrefix(d.base, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 3000; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Logf("dial %d: %v (the kernel's backlog is full: fine)", i, err)
			break
		}
		if i%2 == 1 {
			io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n") // half a request
		}
		conns = append(conns, c)
	}
	answered := 0
	for i := 0; i < 10; i++ {
		code, _, _ := d.call(t, "GET", "/api/health", nil, nil)
		if code == 200 {
			answered++
		}
	}
	if answered != 10 {
		t.Fatalf("%d of 10 real requests answered with %d idle connections open", answered, len(conns))
	}
	// The daemon holds a bounded number of them (the review's 20,150 ran
	// it out of file descriptors).
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	if len(fds) > 400 {
		t.Fatalf("the daemon holds %d file descriptors beside %d idle connections", len(fds), len(conns))
	}
	t.Logf("10 of 10 answered beside %d idle connections; the daemon holds %d file descriptors", len(conns), len(fds))
}

// TestSecurityRunCap (review 6): runs are capped with a clear error.
func TestSecurityRunCap(t *testing.T) {
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	d := startDaemon(t, dir)
	hash := d.blockHash(t, "hostile", "long")
	var ids []string
	defer func() {
		for _, id := range ids {
			d.call(t, "POST", "/api/runs/"+id+"/cancel", nil, nil)
		}
	}()
	for i := 0; i < executor.DefaultMaxRuns; i++ {
		code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": "hostile", "block": "long", "hash": hash}, nil)
		if code != 202 {
			t.Fatalf("run %d: %d %s", i, code, body)
		}
		var started struct{ ID string }
		json.Unmarshal([]byte(body), &started)
		ids = append(ids, started.ID)
	}
	code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": "hostile", "block": "long", "hash": hash}, nil)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_runs") {
		t.Fatalf("run %d: %d %s", executor.DefaultMaxRuns+1, code, body)
	}
}

// TestSecurityJournalSharedWithRun (review 2): cairn run and the daemon
// record into one journal at once; every record of both is there and the
// next daemon start reads it.
func TestSecurityJournalSharedWithRun(t *testing.T) {
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	t.Setenv("TMPDIR", t.TempDir())
	d := startDaemon(t, dir)
	var wg sync.WaitGroup
	const each = 8
	wg.Go(func() {
		for i := 0; i < each; i++ {
			code, out, errOut := run(t, "run", filepath.Join(dir, "hostile.md"), "--block", "echo", "--sandbox", "no", "--journal", d.journal, "--kubeconfig", filepath.Join(dir, "none"))
			if code != exitOK {
				t.Errorf("cairn run: %d %s %s", code, out, errOut)
			}
		}
	})
	for i := 0; i < each; i++ {
		if rec, _ := d.run(t, "hostile", "echo", nil, false); rec.Status != executor.StatusVerified {
			t.Errorf("daemon run: %s", rec.Status)
		}
	}
	wg.Wait()
	code, body, _ := d.call(t, "GET", "/api/runs?runbook=hostile", nil, nil)
	var recs []executor.Record
	json.Unmarshal([]byte(body), &recs)
	if code != 200 || len(recs) != 2*each {
		t.Fatalf("%d records in the journal, want %d", len(recs), 2*each)
	}
	d.stop()
	d2 := startDaemon(t, dir, "--journal", d.journal)
	if code, body, _ := d2.call(t, "GET", "/api/runbooks/hostile/results", nil, nil); code != 200 || !strings.Contains(body, `"echo"`) {
		t.Errorf("after restart: %d %s", code, body)
	}
}

// TestSecurityWriteBackFailureReported (review 7): a write-back that fails
// is reported with the run, on the stream and the API.
func TestSecurityWriteBackFailureReported(t *testing.T) {
	dir := contentDir(t, map[string]string{"hostile.md": hostileMD})
	t.Setenv("TMPDIR", t.TempDir())
	os.Chmod(filepath.Join(dir, "hostile.md"), 0o444)
	d := startDaemon(t, dir, "--write-back")
	rec, _ := d.run(t, "hostile", "echo", nil, false)
	if rec.Status != executor.StatusVerified || !strings.Contains(rec.WriteBack, "read-only") {
		t.Fatalf("record: %s write_back=%q", rec.Status, rec.WriteBack)
	}
	if _, body, _ := d.call(t, "GET", "/api/runs?runbook=hostile", nil, nil); !strings.Contains(body, `"write_back":"write-back: `) {
		t.Errorf("the API does not say the write-back failed: %s", body)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "hostile.md")); string(data) != hostileMD {
		t.Error("the read-only runbook changed")
	}
}

// TestSecurityWatchesSubfolders (review 7): a runbook edited in a
// subfolder is what the daemon runs (the old hash is refused).
func TestSecurityWatchesSubfolders(t *testing.T) {
	dir := contentDir(t, map[string]string{"team/a/hostile.md": hostileMD})
	t.Setenv("TMPDIR", t.TempDir())
	d := startDaemon(t, dir)
	old := d.blockHash(t, "hostile", "echo")
	edited := strings.Replace(hostileMD, `printf '%s\n' "$V"`, `printf 'edited %s\n' "$V"`, 1)
	os.WriteFile(filepath.Join(dir, "team/a/hostile.md"), []byte(edited), 0o644)
	deadline := time.Now().Add(10 * time.Second)
	for d.blockHash(t, "hostile", "echo") == old {
		if time.Now().After(deadline) {
			t.Fatal("the daemon still serves the old block from a subfolder")
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": "hostile", "block": "echo", "hash": old}, nil)
	if code != 409 {
		t.Errorf("stale hash: %d %s", code, body)
	}
	if rec, _ := d.run(t, "hostile", "echo", nil, false); !strings.Contains(rec.Output, "edited hi") {
		t.Errorf("ran stale content: %q", rec.Output)
	}
}

// TestSecurityDaemonKill9LeavesNoProcesses (review 5): the daemon, a real
// process, is killed with SIGKILL while a block that left a background
// child, a setsid child and a double-forked child runs; all of them end.
func TestSecurityDaemonKill9LeavesNoProcesses(t *testing.T) {
	pids := t.TempDir()
	md := "---\ntitle: orphans\nslug: orphans\n---\n## s {#s}\n\n```bash {#spawn target=local timeout=5m}\n" +
		"sleep 300 & echo $! > " + pids + "/bg\n" +
		"setsid -f sh -c 'echo $$ > " + pids + "/setsid; exec sleep 300'\n" +
		"( ( sh -c 'echo $$ > " + pids + "/double; exec sleep 300' & ) & )\n" +
		"echo started; sleep 300\n```\n"
	dir := contentDir(t, map[string]string{"orphans.md": md})
	d, cmd := startDaemonProcess(t, dir)
	code, body, _ := d.call(t, "POST", "/api/runs", map[string]any{"runbook": "orphans", "block": "spawn", "hash": d.blockHash(t, "orphans", "spawn")}, nil)
	if code != 202 {
		t.Fatalf("%d %s", code, body)
	}
	procs := map[string]int{}
	for deadline := time.Now().Add(20 * time.Second); len(procs) < 3; {
		for _, n := range []string{"bg", "setsid", "double"} {
			if b, err := os.ReadFile(filepath.Join(pids, n)); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					procs[n] = pid
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the block did not start its children: %v\n%s", procs, d.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer func() {
		for _, pid := range procs {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	kill9Leaves(t, cmd, procs)
}

// kill9Leaves kills the daemon process with SIGKILL and fails t unless the
// processes procs (by name) all end within 10 seconds.
func kill9Leaves(t *testing.T, cmd *exec.Cmd, procs map[string]int) {
	t.Helper()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var living []string
		for n, pid := range procs {
			if testrig.ProcessAlive(pid) {
				living = append(living, n)
			}
		}
		if len(living) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running after the daemon's kill -9: %v", living)
		}
	}
}

// startDaemonProcess runs `cairn daemon` as a process of its own (this
// test binary standing in for cairn), for attacks that kill it or count
// its file descriptors.
func startDaemonProcess(t *testing.T, dir string, extra ...string) (*realDaemon, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"daemon", "--listen", "127.0.0.1:0", "--content", dir, "--sandbox", "no",
		"--journal", filepath.Join(t.TempDir(), "j.db"), "--kubeconfig", filepath.Join(dir, "none")}, extra...)...)
	cmd.Env = append(os.Environ(), "CAIRN_TEST_MAIN=1")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; {
		if l, tk := listenRe.FindStringSubmatch(stderr.String()), tokenRe.FindStringSubmatch(stderr.String()); l != nil && tk != nil {
			return &realDaemon{base: l[1], token: tk[1], stderr: stderr}, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not start:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
