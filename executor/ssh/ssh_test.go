package ssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }

// sink records output per host and events.
type sink struct {
	mu     sync.Mutex
	out    map[string]*bytes.Buffer
	events []executor.Event
	// onOutput, if set, sees every chunk (under mu).
	onOutput func(host string, all string)
}

func newSink() *sink { return &sink{out: map[string]*bytes.Buffer{}} }

func (s *sink) Output(host string, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.out[host]
	if b == nil {
		b = &bytes.Buffer{}
		s.out[host] = b
	}
	b.Write(p)
	if s.onOutput != nil {
		s.onOutput(host, b.String())
	}
}

func (s *sink) Event(ev executor.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

// String is host's output, less the warning sudo prints on the sandbox
// hosts, whose names are in no /etc/hosts ("sudo: unable to resolve host
// cp1: ...").
func (s *sink) String(host string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.out[host]
	if b == nil {
		return ""
	}
	out := b.String()
	for {
		i := strings.Index(out, "sudo: unable to resolve host ")
		if i < 0 {
			return out
		}
		j := strings.IndexByte(out[i:], '\n')
		if j < 0 {
			return out[:i]
		}
		out = out[:i] + out[i+j+1:]
	}
}

func (s *sink) kinds(host string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var k []string
	for _, ev := range s.events {
		if ev.Host == host && ev.Kind != "info" {
			k = append(k, ev.Kind)
		}
	}
	return k
}

func scriptJob(script string, hosts ...string) *executor.Job {
	return &executor.Job{
		Block: &runbook.Block{ID: "b1", Target: runbook.TargetSSH, Content: script, Parallel: 1},
		Hosts: hosts,
		RunID: "run-1",
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rig returns the shared hosts, a Runner built from their inventory as the
// engine would, and checks at the end of t that no goroutine outlived it.
func rig(t *testing.T) (*testrig.SSHEnv, *Runner) {
	t.Helper()
	e := testrig.SSH(t)
	r, err := FromInventory(e.InventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	r.AgentSocket = "none"
	noLeaks(t)
	return e, r
}

// noLeaks fails t if, once t is done, more goroutines run than when it was
// called (after letting finished ones settle).
func noLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("%d goroutines before, %d after the test:\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func run(t *testing.T, r *Runner, ctx context.Context, job *executor.Job) ([]executor.HostResult, *sink) {
	t.Helper()
	s := newSink()
	res, err := r.Run(ctx, job, s)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(res) != len(job.Hosts) {
		t.Fatalf("%d results for %d hosts", len(res), len(job.Hosts))
	}
	for i, hr := range res {
		if hr.Host != job.Hosts[i] {
			t.Fatalf("result %d is for %q, want %q (results must follow job.Hosts)", i, hr.Host, job.Hosts[i])
		}
	}
	return res, s
}

func TestHostnamesPerHost(t *testing.T) {
	_, r := rig(t)
	hosts := []string{"cp0", "cp1", "cp2", "w0"}
	job := scriptJob(`echo "$(hostname) $CAIRN_HOST $CAIRN_RUN_ID $CAIRN_BLOCK"; echo to-stderr >&2`, hosts...)
	res, s := run(t, r, ctxT(t, 60*time.Second), job)
	for i, h := range hosts {
		if res[i].Err != nil || res[i].Exit != 0 {
			t.Fatalf("%s: %+v", h, res[i])
		}
		if got, want := s.String(h), h+" "+h+" run-1 b1\nto-stderr\n"; got != want {
			t.Errorf("%s: output %q, want %q", h, got, want)
		}
		if k := s.kinds(h); !slices.Equal(k, []string{"host-start", "host-end"}) {
			t.Errorf("%s: events %v", h, k)
		}
		if res[i].Start.IsZero() || res[i].Duration <= 0 {
			t.Errorf("%s: no timing: %+v", h, res[i])
		}
	}
}

func TestValuesArriveLiterally(t *testing.T) {
	_, r := rig(t)
	pwned := filepath.Join(t.TempDir(), "pwned")
	vals := map[string]string{
		"A": `x"; rm -rf ~ #`,
		"B": "$(touch " + pwned + ")",
		"C": "`touch " + pwned + "` ; | & \\ \n' '\\'' \"$HOME\" ${B}",
		"D": "",
	}
	for _, sudo := range []bool{false, true} {
		if sudo && !haveSudo(t) {
			continue
		}
		job := scriptJob(`printf '[%s]' "$A" "$B" "$C" "$D"`, "cp1")
		job.Env, job.Block.Sudo = vals, sudo
		res, s := run(t, r, ctxT(t, 30*time.Second), job)
		if res[0].Exit != 0 || res[0].Err != nil {
			t.Fatalf("sudo=%v: %+v: %s", sudo, res[0], s.String("cp1"))
		}
		want := "[" + vals["A"] + "][" + vals["B"] + "][" + vals["C"] + "][]"
		if got := s.String("cp1"); got != want {
			t.Errorf("sudo=%v: got %q\nwant %q", sudo, got, want)
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a value was executed on the host")
	}
}

func TestExitStatus(t *testing.T) {
	_, r := rig(t)
	for _, tc := range []struct {
		script string
		exit   int
		out    string
	}{
		{"exit 3", 3, ""},
		{"echo a; false; echo not reached", 1, "a\n"},
		{"echo $UNSET_VAR", 1, "unbound variable"},
		{"false | true; echo not reached", 1, ""},
		{"true", 0, ""},
		// A command that reads standard input cannot eat the rest of the
		// script: bash has parsed it whole, and stdin is at its end.
		{"cat; read -r line || echo after", 0, "after\n"},
		{"echo no newline at the end", 0, "no newline at the end\n"},
	} {
		res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob(tc.script, "w0"))
		if res[0].Err != nil || res[0].Exit != tc.exit || !strings.Contains(s.String("w0"), tc.out) || strings.Contains(s.String("w0"), "not reached") {
			t.Errorf("%q: exit %d err %v output %q; want exit %d output containing %q", tc.script, res[0].Exit, res[0].Err, s.String("w0"), tc.exit, tc.out)
		}
	}
}

func TestGroupInOrderStopsAtFirstFailure(t *testing.T) {
	_, r := rig(t)
	hosts := []string{"cp0", "cp1", "cp2", "w0"}
	res, s := run(t, r, ctxT(t, 60*time.Second), scriptJob(`sleep 0.2; echo "$CAIRN_HOST"`, hosts...))
	for i := range res {
		if res[i].Exit != 0 || s.String(hosts[i]) != hosts[i]+"\n" {
			t.Fatalf("%s: %+v %q", hosts[i], res[i], s.String(hosts[i]))
		}
		if i > 0 && res[i].Start.Before(res[i-1].Start.Add(res[i-1].Duration)) {
			t.Errorf("%s started before %s ended", hosts[i], hosts[i-1])
		}
	}

	job := scriptJob(`echo "on $CAIRN_HOST"; [ "$CAIRN_HOST" != cp1 ]`, hosts...)
	res, s = run(t, r, ctxT(t, 60*time.Second), job)
	if res[0].Exit != 0 || res[1].Exit != 1 || res[1].Err != nil {
		t.Fatalf("cp0, cp1: %+v", res[:2])
	}
	for _, i := range []int{2, 3} {
		if !errors.Is(res[i].Err, ErrSkipped) || res[i].Exit != -1 || s.String(hosts[i]) != "" {
			t.Errorf("%s after a failure: %+v output %q", hosts[i], res[i], s.String(hosts[i]))
		}
		if k := s.kinds(hosts[i]); !slices.Equal(k, []string{"host-end"}) {
			t.Errorf("%s: events %v", hosts[i], k)
		}
	}

	// expect.exit=1: exiting 1 is not a failure, so every host runs.
	job.Block.Expect.Exit = 1
	job.Block.Content = `exit 1`
	res, _ = run(t, r, ctxT(t, 60*time.Second), job)
	for i := range res {
		if res[i].Exit != 1 || res[i].Err != nil {
			t.Errorf("expect.exit=1: %s: %+v", hosts[i], res[i])
		}
	}
}

// TestGroupParallel: with parallel=2, two hosts run at once and never more;
// a counter on the hosts' shared file system, under flock, records it.
func TestGroupParallel(t *testing.T) {
	_, r := rig(t)
	dir := t.TempDir()
	script := `
exec 9>"$DIR/lock"
flock 9; n=$(( $(cat "$DIR/n" 2>/dev/null || echo 0) + 1 )); echo $n >"$DIR/n"; echo $n >>"$DIR/seen"; flock -u 9
sleep 0.7
flock 9; echo $(( $(cat "$DIR/n") - 1 )) >"$DIR/n"; flock -u 9
echo "done $CAIRN_HOST"
`
	hosts := []string{"cp0", "cp1", "cp2", "w0"}
	job := scriptJob(script, hosts...)
	job.Env = map[string]string{"DIR": dir}
	job.Block.Parallel = 2
	start := time.Now()
	res, s := run(t, r, ctxT(t, 60*time.Second), job)
	elapsed := time.Since(start)
	for i, h := range hosts {
		if res[i].Exit != 0 || s.String(h) != "done "+h+"\n" {
			t.Fatalf("%s: %+v %q", h, res[i], s.String(h))
		}
	}
	seen, _ := os.ReadFile(filepath.Join(dir, "seen"))
	peak := 0
	for _, f := range strings.Fields(string(seen)) {
		n, _ := strconv.Atoi(f)
		peak = max(peak, n)
	}
	if peak != 2 {
		t.Errorf("peak concurrent sessions %d, want 2 (counts %q)", peak, seen)
	}
	// The runner's own view: at most 2 hosts between host-start and host-end.
	if over := maxOverlap(res); over > 2 {
		t.Errorf("%d hosts overlapped in time", over)
	}
	// The peak count above proves the parallelism; wall time is only
	// logged (timing belongs in benchmarks, not in assertions).
	t.Logf("4 hosts x 0.7s, parallel=2: %s", elapsed.Round(time.Millisecond))

	// A failure lets the running host finish and skips the rest.
	job = scriptJob(`if [ "$CAIRN_HOST" = cp0 ]; then exit 7; fi; sleep 1; echo finished`, hosts...)
	job.Block.Parallel = 2
	res, s = run(t, r, ctxT(t, 60*time.Second), job)
	if res[0].Exit != 7 || res[1].Exit != 0 || s.String("cp1") != "finished\n" {
		t.Fatalf("cp0, cp1: %+v, cp1 output %q", res[:2], s.String("cp1"))
	}
	for _, i := range []int{2, 3} {
		if !errors.Is(res[i].Err, ErrSkipped) {
			t.Errorf("%s: %+v", hosts[i], res[i])
		}
	}
}

func maxOverlap(res []executor.HostResult) int {
	peak := 0
	for _, a := range res {
		n := 0
		for _, b := range res {
			if !b.Start.After(a.Start) && b.Start.Add(b.Duration).After(a.Start) {
				n++
			}
		}
		peak = max(peak, n)
	}
	return peak
}

// TestMaxParallelBoundsConnections: a block asking for 100 hosts at a time
// on a runner capped at 2 never has more than 2 connections open.
func TestMaxParallelBoundsConnections(t *testing.T) {
	e, r := rig(t)
	r.MaxParallel = 2
	// Four distinct hosts, each listed twice: eight runs.
	var hosts []string
	for range 2 {
		for _, h := range e.Inventory.Hosts {
			hosts = append(hosts, h.Name)
		}
	}
	job := scriptJob(`sleep 0.3`, hosts...)
	job.Block.Parallel = 100
	if peak := peakHosts(t, r, job); peak != 2 {
		t.Errorf("peak %d hosts at once, want 2", peak)
	}
}

// peakHosts runs job, which must pass on every host, and returns the most
// hosts that were running at once.
func peakHosts(t *testing.T, r *Runner, job *executor.Job) int {
	t.Helper()
	var mu sync.Mutex
	open, peak := 0, 0
	counting := &eventHook{sink: newSink(), fn: func(ev executor.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case "host-start":
			open++
			peak = max(peak, open)
		case "host-end":
			open--
		}
	}}
	res, err := r.Run(ctxT(t, 60*time.Second), job, counting)
	if err != nil {
		t.Fatal(err)
	}
	for _, hr := range res {
		if hr.Exit != 0 {
			t.Fatalf("%+v", hr)
		}
	}
	return peak
}

type eventHook struct {
	*sink
	fn func(executor.Event)
}

func (h *eventHook) Event(ev executor.Event) { h.fn(ev); h.sink.Event(ev) }

// direct returns a Runner that reaches hosts by address, with the sandbox's
// key and the given known_hosts file, and the host value for name.
func direct(t *testing.T, e *testrig.SSHEnv, name, knownHosts string) (*Runner, string) {
	t.Helper()
	h, ok := e.Inventory.Host(name)
	if !ok {
		t.Fatalf("no host %s", name)
	}
	return &Runner{
		ConfigFile:    "none",
		KnownHosts:    []string{knownHosts},
		IdentityFiles: []string{e.Inventory.IdentityFile},
		AgentSocket:   "none",
		User:          e.Inventory.User,
	}, e.Inventory.User + "@" + h.Addr()
}

func hostKey(t *testing.T, h sandbox.Host) ssh.PublicKey {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUnknownHostKeyRefusedThenTrustedOnFirstUse(t *testing.T) {
	e, _ := rig(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	r, host := direct(t, e, "cp2", kh)
	cp2, _ := e.Inventory.Host("cp2")
	fp := ssh.FingerprintSHA256(hostKey(t, cp2))

	res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("hostname", host))
	err := res[0].Err
	var hke *HostKeyError
	if !errors.Is(err, ErrHostKeyUnknown) || !errors.As(err, &hke) || res[0].Exit != -1 {
		t.Fatalf("unknown host key: %+v", res[0])
	}
	for _, want := range []string{host, cp2.Addr(), fp, kh, "ssh-keyscan -p 22 " + cp2.Address, "trust-on-first-use"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if s.String(host) != "" {
		t.Errorf("output from a refused host: %q", s.String(host))
	}
	if _, err := os.Stat(kh); err == nil {
		t.Error("known_hosts was written without trust-on-first-use")
	}
	t.Logf("refused: %v", err)

	r.TrustOnFirstUse = true
	res, s = run(t, r, ctxT(t, 30*time.Second), scriptJob("hostname", host))
	if res[0].Err != nil || s.String(host) != "cp2\n" {
		t.Fatalf("with trust-on-first-use: %+v %q", res[0], s.String(host))
	}
	b, _ := os.ReadFile(kh)
	if !strings.Contains(string(b), cp2.HostKey) || strings.Count(string(b), "\n") != 1 {
		t.Errorf("known_hosts after first use: %q", b)
	}
	var info []string
	for _, ev := range s.events {
		if ev.Kind == "info" {
			info = append(info, ev.Message)
		}
	}
	if len(info) != 1 || !strings.Contains(info[0], fp) {
		t.Errorf("info events %q, want one naming %s", info, fp)
	}

	// The key is now known: strict checking accepts it.
	r.TrustOnFirstUse = false
	res, _ = run(t, r, ctxT(t, 30*time.Second), scriptJob("true", host))
	if res[0].Err != nil {
		t.Fatalf("after recording: %v", res[0].Err)
	}
}

// TestTrustOnFirstUseParallel: several connections to one new host record
// its key once.
func TestTrustOnFirstUseParallel(t *testing.T) {
	e, _ := rig(t)
	kh := filepath.Join(t.TempDir(), "sub", "known_hosts")
	r, host := direct(t, e, "cp0", kh)
	r.TrustOnFirstUse = true
	job := scriptJob("true", host, host, host, host)
	job.Block.Parallel = 4
	res, _ := run(t, r, ctxT(t, 30*time.Second), job)
	for _, hr := range res {
		if hr.Err != nil {
			t.Fatal(hr.Err)
		}
	}
	b, _ := os.ReadFile(kh)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Errorf("%d lines recorded:\n%s", n, b)
	}
}

func TestChangedHostKeyRefusedEvenWithTOFU(t *testing.T) {
	e, _ := rig(t)
	cp0, _ := e.Inventory.Host("cp0")
	cp1, _ := e.Inventory.Host("cp1")
	kh := filepath.Join(t.TempDir(), "known_hosts")
	// cp0's address listed with cp1's key: cp0 now "presents another key".
	line := cp0.KnownAs + " " + cp1.HostKey + "\n"
	if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	r, host := direct(t, e, "cp0", kh)
	r.TrustOnFirstUse = true
	res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("touch /tmp/must-not-run", host))
	err := res[0].Err
	if !errors.Is(err, ErrHostKeyChanged) || res[0].Exit != -1 || s.String(host) != "" {
		t.Fatalf("changed key: %+v", res[0])
	}
	for _, want := range []string{"HOST KEY CHANGED", cp0.Addr(), ssh.FingerprintSHA256(hostKey(t, cp0)), ssh.FingerprintSHA256(hostKey(t, cp1)),
		kh + ":1", "ssh-keygen -R " + cp0.Address + " -f " + kh, "If the change is expected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if b, _ := os.ReadFile(kh); string(b) != line {
		t.Errorf("known_hosts changed: %q", b)
	}
	t.Logf("refused: %v", err)

	// Through the sandbox's ssh_config too, whose known_hosts is right: the
	// same runner with its own known_hosts file overriding is refused.
	r2, _ := FromInventory(e.InventoryPath)
	r2.KnownHosts, r2.TrustOnFirstUse, r2.AgentSocket = []string{kh}, true, "none"
	res, _ = run(t, r2, ctxT(t, 30*time.Second), scriptJob("true", "cp0"))
	if !errors.Is(res[0].Err, ErrHostKeyChanged) || !strings.Contains(res[0].Err.Error(), "ssh cp0 ("+cp0.Addr()+")") {
		t.Errorf("via ssh_config: %v", res[0].Err)
	}
}

// TestCancelKillsRemoteProcesses: when ctx ends, nothing the script started
// survives on the host: not its children, not a child in its own process
// group, not under sudo. The sandbox hosts share this machine's process
// table, so pgrep sees them.
func TestCancelKillsRemoteProcesses(t *testing.T) {
	_, r := rig(t)
	r.Grace = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		sudo bool
		// %[1]s is the marker.
		script string
	}{
		{"children", false, `(exec -a %[1]s sleep 300) & (exec -a %[1]s sleep 300) & echo started; wait`},
		{"foreground", false, `echo started; exec -a %[1]s sleep 300`},
		{"own-process-group", false, `set -m; (exec -a %[1]s sleep 300) & set +m; echo started; wait`},
		{"ignores-TERM", false, `trap '' TERM; (trap '' TERM; exec -a %[1]s sleep 300) & echo started; wait`},
		{"sudo", true, `(exec -a %[1]s sleep 300) & echo started; exec -a %[1]s sleep 300`},
		// The review: a child that calls setsid survived cancel (7 of 7).
		{"setsid", false, `setsid -f bash -c 'exec -a %[1]s sleep 300' >/dev/null 2>&1; echo started; sleep 300`},
		{"setsid-sudo", true, `setsid -f bash -c 'exec -a %[1]s sleep 300' >/dev/null 2>&1; echo started; sleep 300`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sudo && !haveSudo(t) {
				return
			}
			marker := fmt.Sprintf("cairn-ssh-test-%s-%d", tc.name, time.Now().UnixNano())
			job := scriptJob(fmt.Sprintf(tc.script, marker), "cp1")
			job.Block.Sudo = tc.sudo
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s := newSink()
			s.onOutput = func(_ string, all string) {
				if strings.Contains(all, "started") {
					// Let the children start, then time out.
					time.AfterFunc(200*time.Millisecond, cancel)
				}
			}
			start := time.Now()
			res, err := r.Run(ctx, job, s)
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if res[0].Exit != -1 || !errors.Is(res[0].Err, context.Canceled) {
				t.Fatalf("result %+v, output %q", res[0], s.String("cp1"))
			}
			assertNoProcess(t, marker)
			t.Logf("cancelled and cleaned up in %s", took.Round(time.Millisecond))
		})
	}
}

// TestNormalExitLeavesNoProcesses: a block's background processes, in its
// session or one of their own, end with the block.
func TestNormalExitLeavesNoProcesses(t *testing.T) {
	_, r := rig(t)
	for _, sudo := range []bool{false, true} {
		if sudo && !haveSudo(t) {
			continue
		}
		marker := fmt.Sprintf("cairn-ssh-exit-%v-%d", sudo, time.Now().UnixNano())
		job := scriptJob(fmt.Sprintf(`(exec -a %[1]s sleep 300) >/dev/null 2>&1 & setsid -f bash -c 'exec -a %[1]s sleep 300' >/dev/null 2>&1; echo done`, marker), "cp2")
		job.Block.Sudo = sudo
		res, err := r.Run(ctxT(t, 30*time.Second), job, newSink())
		if err != nil || res[0].Exit != 0 {
			t.Fatalf("sudo=%v: %v %+v", sudo, err, res[0])
		}
		assertNoProcess(t, marker)
	}
}

// TestCancelSendsTERMFirst: a script that traps TERM gets to clean up.
func TestCancelSendsTERMFirst(t *testing.T) {
	_, r := rig(t)
	r.Grace = 2 * time.Second
	dir := t.TempDir()
	job := scriptJob(`trap 'echo cleaned > "$DIR/trap"; exit 0' TERM; echo started; sleep 300 & wait`, "cp2")
	job.Env = map[string]string{"DIR": dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSink()
	s.onOutput = func(_ string, all string) {
		if strings.Contains(all, "started") {
			time.AfterFunc(100*time.Millisecond, cancel)
		}
	}
	start := time.Now()
	res, err := r.Run(ctx, job, s)
	if err != nil || !errors.Is(res[0].Err, context.Canceled) {
		t.Fatalf("%+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "trap")); string(b) != "cleaned\n" {
		t.Errorf("the TERM trap did not run: %q", b)
	}
	t.Logf("stopped after %s (grace %s)", time.Since(start).Round(time.Millisecond), r.Grace)
}

func TestTimeoutIsErrTimeout(t *testing.T) {
	_, r := rig(t)
	r.Grace = 200 * time.Millisecond
	marker := fmt.Sprintf("cairn-ssh-timeout-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	res, _ := run(t, r, ctx, scriptJob("exec -a "+marker+" sleep 300", "cp0", "cp1"))
	if !errors.Is(res[0].Err, executor.ErrTimeout) || res[0].Exit != -1 {
		t.Fatalf("cp0: %+v", res[0])
	}
	if !errors.Is(res[1].Err, executor.ErrTimeout) || !strings.HasPrefix(res[1].Err.Error(), "not started") {
		t.Errorf("cp1: %+v", res[1])
	}
	assertNoProcess(t, marker)
}

func assertNoProcess(t *testing.T, marker string) {
	t.Helper()
	// What matters is that nothing survives, not how fast the reaper is:
	// with two clusters building beside this test (CI), reaping a sudo
	// session's setsid'd child once took more than 3 s. A leaked sleep 300
	// is still here after 15.
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command("pgrep", "-a", "-f", marker).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes survived the run: %s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func haveSudo(t *testing.T) bool {
	t.Helper()
	if _, err := exec.LookPath("sudo"); err != nil {
		if testrig.InCI() {
			t.Fatal("sudo is required under CI=true (scripts/ci-deps.sh installs it)")
		}
		t.Log("no sudo on this machine: skipping the sudo case (apt-get install -y sudo)")
		return false
	}
	return true
}

func TestSudo(t *testing.T) {
	_, r := rig(t)
	if !haveSudo(t) {
		t.Skip("no sudo")
	}
	job := scriptJob(`echo "uid=$(id -u) v=$V host=$CAIRN_HOST"; ps -o comm= -p $PPID`, "cp2")
	job.Env = map[string]string{"V": "kept through sudo"}
	job.Block.Sudo = true
	res, s := run(t, r, ctxT(t, 30*time.Second), job)
	out := s.String("cp2")
	if res[0].Exit != 0 || !strings.HasPrefix(out, "uid=0 v=kept through sudo host=cp2\nsudo\n") {
		t.Fatalf("%+v %q", res[0], out)
	}
}

func writeFile(t *testing.T, p string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCopyBetweenHosts copies three files from cp0 to cp1 and cp2 (as the
// kubeadm runbook distributes certificates) and checks them on the targets.
func TestCopyBetweenHosts(t *testing.T) {
	e, r := rig(t)
	src := t.TempDir()
	big := make([]byte, 3<<20+17) // several SFTP packets
	rand.Read(big)
	files := map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"ca.crt": {[]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644},
		"ca.key": {[]byte("secret key\n"), 0o600},
		"blob":   {big, 0o750},
	}
	for n, f := range files {
		writeFile(t, filepath.Join(src, n), f.data, f.mode)
	}
	// The hosts share a file system: each writes under a directory named
	// after itself, so every target's copy is checked on its own.
	dst := filepath.Join(t.TempDir(), "pki")
	for _, sudo := range []bool{false, true} {
		if sudo && !haveSudo(t) {
			continue
		}
		t.Run(fmt.Sprintf("sudo=%v", sudo), func(t *testing.T) {
			root := fmt.Sprintf("%s-%v", dst, sudo)
			job := &executor.Job{
				Block: &runbook.Block{ID: "copy-certs", Target: runbook.TargetSSH, Action: "copy", Sudo: sudo, Parallel: 2,
					Copies: []runbook.Copy{
						{Src: "$SRC/ca.crt", Dst: "${DST}/$CAIRN_HOST/etc/kubernetes/pki/ca.crt"},
						{Src: "${SRC}/ca.key", Dst: "$DST/${CAIRN_HOST}/etc/kubernetes/pki/"},
						{Src: "$SRC/blob", Dst: "$DST/$CAIRN_HOST/blob.bin"},
					}},
				Env:   map[string]string{"SRC": src, "DST": root},
				Hosts: []string{"cp1", "cp2"},
				From:  "cp0",
				RunID: "r",
			}
			start := time.Now()
			res, s := run(t, r, ctxT(t, 60*time.Second), job)
			t.Logf("3 files (%d bytes) to 2 hosts: %s", len(big)+len(files["ca.crt"].data)+len(files["ca.key"].data), time.Since(start).Round(time.Millisecond))
			for i, h := range job.Hosts {
				if res[i].Err != nil || res[i].Exit != 0 {
					t.Fatalf("%s: %+v\n%s", h, res[i], s.String(h))
				}
				out := s.String(h)
				for n, to := range map[string]string{"ca.crt": "etc/kubernetes/pki/ca.crt", "ca.key": "etc/kubernetes/pki/ca.key", "blob": "blob.bin"} {
					f := files[n]
					p := filepath.Join(root, h, to)
					line := fmt.Sprintf("copied cp0:%s -> %s:%s (%d bytes, mode %04o)", filepath.Join(src, n), h, p, len(f.data), f.mode)
					if !strings.Contains(out, line) {
						t.Errorf("%s: output lacks %q:\n%s", h, line, out)
					}
					// Checked on the target, over its own connection.
					got := strings.Fields(e.Run(t, h, "stat -c %a "+runbook.ShellQuote(p)+"; sha256sum "+runbook.ShellQuote(p)))
					sum := sha256.Sum256(f.data)
					if len(got) < 2 || got[0] != strconv.FormatInt(int64(f.mode), 8) || got[1] != hex.EncodeToString(sum[:]) {
						t.Errorf("%s:%s: mode/sha256 %v, want %o %x", h, p, got, f.mode, sum)
					}
				}
				left, _ := filepath.Glob(filepath.Join(root, h, "etc/kubernetes/pki/.*"))
				if len(left) > 0 {
					t.Errorf("temporary files left: %v", left)
				}
			}
		})
	}
}

func TestCopyFromThisMachineAndErrors(t *testing.T) {
	_, r := rig(t)
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.conf"), []byte("a=1\n"), 0o640)
	dst := t.TempDir()
	job := &executor.Job{
		Block: &runbook.Block{ID: "c", Target: runbook.TargetSSH, Action: "copy", Parallel: 1,
			Copies: []runbook.Copy{{Src: src + "/a.conf", Dst: dst + "/$CAIRN_HOST.conf"}}},
		Hosts: []string{"w0"},
	}
	res, s := run(t, r, ctxT(t, 30*time.Second), job)
	if res[0].Err != nil || !strings.Contains(s.String("w0"), "copied "+src+"/a.conf -> w0:"+dst+"/w0.conf (4 bytes, mode 0640)") {
		t.Fatalf("%+v %q", res[0], s.String("w0"))
	}
	if b, _ := os.ReadFile(dst + "/w0.conf"); string(b) != "a=1\n" {
		t.Errorf("content %q", b)
	}

	// A missing source fails the host with the path in the message, and the
	// hosts after it are skipped.
	job.Block.Copies = []runbook.Copy{{Src: "/nonexistent/cairn/x", Dst: dst + "/x"}}
	job.From, job.Hosts = "cp0", []string{"cp1", "cp2"}
	res, s = run(t, r, ctxT(t, 30*time.Second), job)
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "cp0:/nonexistent/cairn/x") || !strings.Contains(s.String("cp1"), "copy failed") {
		t.Errorf("missing source: %+v %q", res[0], s.String("cp1"))
	}
	if !errors.Is(res[1].Err, ErrSkipped) {
		t.Errorf("cp2: %+v", res[1])
	}

	// An unreachable source fails every host without connecting to them.
	job.From = "root@127.0.0.1:1"
	res, _ = run(t, r, ctxT(t, 30*time.Second), job)
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "copy source: ssh root@127.0.0.1:1") {
		t.Errorf("unreachable source: %+v", res[0])
	}
}

func TestConnectionErrors(t *testing.T) {
	e, _ := rig(t)
	r, host := direct(t, e, "cp1", e.Inventory.KnownHosts)

	// Nothing listens on port 1.
	start := time.Now()
	res, _ := run(t, r, ctxT(t, 30*time.Second), scriptJob("true", "root@127.0.0.1:1"))
	if res[0].Exit != -1 || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "ssh root@127.0.0.1:1 (127.0.0.1:1): connect:") {
		t.Errorf("closed port: %+v", res[0])
	}
	t.Logf("a refused connection failed after %s", time.Since(start).Round(time.Millisecond))

	// A key the host does not accept.
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	blk, _ := ssh.MarshalPrivateKey(priv, "stranger")
	key := filepath.Join(t.TempDir(), "id_ed25519")
	writeFile(t, key, pem.EncodeToMemory(blk), 0o600)
	r.IdentityFiles = []string{key, filepath.Join(t.TempDir(), "missing")}
	res, _ = run(t, r, ctxT(t, 30*time.Second), scriptJob("true", host))
	if err := res[0].Err; err == nil || !strings.Contains(err.Error(), "authentication as root failed") || !strings.Contains(err.Error(), key) ||
		!strings.Contains(err.Error(), "missing") {
		t.Errorf("wrong key: %v", err)
	}

	// A host that accepts TCP but never speaks SSH times out.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r.ConnectTimeout = 500 * time.Millisecond
	res, _ = run(t, r, ctxT(t, 30*time.Second), scriptJob("true", "root@"+ln.Addr().String()))
	if err := res[0].Err; err == nil || !strings.Contains(err.Error(), "did not finish within 500ms") {
		t.Errorf("silent server: %v", err)
	}
}

func TestResolveThroughSandboxConfig(t *testing.T) {
	e, r := rig(t)
	for _, want := range e.Inventory.Hosts {
		h, err := r.Resolve(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if h.Addr != want.Addr() || h.User != e.Inventory.User || !slices.Equal(h.KnownHosts, []string{e.Inventory.KnownHosts}) ||
			!slices.Equal(h.IdentityFiles, []string{e.Inventory.IdentityFile}) || !h.IdentitiesOnly || h.TrustOnFirstUse ||
			!slices.Equal(h.GlobalKnownHosts, []string{"/dev/null"}) {
			t.Errorf("%s resolved to %+v", want.Name, h)
		}
	}
	// user@ and :port on the value beat the config.
	h, err := r.Resolve("admin@cp1:2222")
	if err != nil {
		t.Fatal(err)
	}
	cp1, _ := e.Inventory.Host("cp1")
	if h.User != "admin" || h.Addr != net.JoinHostPort(cp1.Address, "2222") {
		t.Errorf("admin@cp1:2222 resolved to %+v", h)
	}
}

// TestKeepAliveNoticesDeadConnection: the sshd process serving the
// connection is stopped (SIGSTOP: it neither answers nor closes); the
// keepalives go unanswered and the host fails instead of hanging.
func TestKeepAliveNoticesDeadConnection(t *testing.T) {
	_, r := rig(t)
	r.KeepAlive = 200 * time.Millisecond
	marker := fmt.Sprintf("cairn-ssh-keepalive-%d", time.Now().UnixNano())
	t.Cleanup(func() { exec.Command("pkill", "-KILL", "-f", marker).Run() })
	var (
		once sync.Once
		sshd int
	)
	s := newSink()
	s.onOutput = func(_ string, all string) {
		line, _, ok := strings.Cut(all, "\n")
		if !ok {
			return
		}
		once.Do(func() {
			// The script's parent is the session's sh; its parent, the sshd
			// process of this connection.
			sshd, _ = strconv.Atoi(strings.TrimPrefix(line, "sshd="))
			if sshd > 1 {
				syscall.Kill(sshd, syscall.SIGSTOP)
			}
		})
	}
	t.Cleanup(func() {
		if sshd > 1 {
			syscall.Kill(sshd, syscall.SIGCONT)
		}
	})
	start := time.Now()
	res, err := r.Run(ctxT(t, 30*time.Second), scriptJob(`echo "sshd=$(cut -d' ' -f4 /proc/$PPID/stat)"; exec -a `+marker+` sleep 300`, "w0"), s)
	if err != nil {
		t.Fatal(err)
	}
	if sshd <= 1 {
		t.Fatalf("no sshd pid in output %q", s.String("w0"))
	}
	if e := res[0].Err; e == nil || !strings.Contains(e.Error(), "connection lost: no answer to keepalives for 600ms") {
		t.Fatalf("%+v", res[0])
	}
	// The 600ms keepalive message above says what noticed it; ctx bounds a hang.
	t.Logf("noticed after %s", time.Since(start).Round(time.Millisecond))
}

// TestAgentAuth logs in with a key held only by a real ssh-agent.
func TestAgentAuth(t *testing.T) {
	e, _ := rig(t)
	agentBin, err := exec.LookPath("ssh-agent")
	if err != nil {
		t.Skip("no ssh-agent: apt-get install -y openssh-client")
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	agentCmd := exec.Command(agentBin, "-D", "-a", sock)
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agentCmd.Process.Kill(); agentCmd.Wait() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("ssh-agent did not create its socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	add := exec.Command("ssh-add", e.Inventory.IdentityFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v: %s", err, out)
	}
	r, host := direct(t, e, "cp1", e.Inventory.KnownHosts)
	r.IdentityFiles = nil // the default files do not exist: only the agent has a key
	t.Setenv("HOME", t.TempDir())
	t.Setenv("SSH_AUTH_SOCK", sock)
	r.AgentSocket = ""
	res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("hostname", host))
	if res[0].Err != nil || s.String(host) != "cp1\n" {
		t.Fatalf("%+v %q", res[0], s.String(host))
	}
	// Without the agent there is nothing to log in with.
	r.AgentSocket = "none"
	res, _ = run(t, r, ctxT(t, 30*time.Second), scriptJob("hostname", host))
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "no SSH key to log in as root") {
		t.Errorf("no keys: %v", res[0].Err)
	}
}

// relay forwards connections on a loopback port to addr until t ends: a
// second address (and, as "localhost", a second name) for one real host.
func relay(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			pipe := func(a, b net.Conn) {
				defer a.Close()
				defer b.Close()
				_, _ = io.Copy(a, b)
			}
			wg.Go(func() { pipe(c, u) })
			wg.Go(func() { pipe(u, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestHostKeyOneIdentityPerAddress: a changed key stays refused under
// trust-on-first-use whatever spelling or name reaches the address (the
// review's High finding: [::ffff:127.0.0.1]:P ran on an impostor after
// 127.0.0.1:P was refused), and a key recorded under one spelling is known
// under all of them.
func TestHostKeyOneIdentityPerAddress(t *testing.T) {
	e, _ := rig(t)
	cp0, _ := e.Inventory.Host("cp0")
	cp1, _ := e.Inventory.Host("cp1")
	// A relay on loopback gives cp0 a 127.0.0.1 address, so the IPv4-mapped
	// spellings and the name localhost can be tried on a real sshd.
	addr := relay(t, cp0.Addr())
	_, port, _ := net.SplitHostPort(addr)
	a4 := netip.MustParseAddr("127.0.0.1").As4()
	hex := fmt.Sprintf("%x:%x", uint16(a4[0])<<8|uint16(a4[1]), uint16(a4[2])<<8|uint16(a4[3]))
	spellings := []string{
		"[::ffff:127.0.0.1]:" + port,
		"[::FFFF:" + hex + "]:" + port,
		"[0:0:0:0:0:ffff:127.0.0.1]:" + port,
		"[127.0.0.1]:" + port,
		"localhost:" + port, // another name: the address it reaches is known
	}

	t.Run("changed key refused under every spelling", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		// The address listed with cp1's key: cp0 now "presents another key".
		line := "[127.0.0.1]:" + port + " " + cp1.HostKey + "\n"
		if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		r, _ := direct(t, e, "cp0", kh)
		r.TrustOnFirstUse = true
		for _, sp := range append([]string{"127.0.0.1:" + port}, spellings...) {
			host := e.Inventory.User + "@" + sp
			res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("echo ran", host))
			if !errors.Is(res[0].Err, ErrHostKeyChanged) || s.String(host) != "" {
				t.Errorf("%s: %v (output %q), want HOST KEY CHANGED", sp, res[0].Err, s.String(host))
				continue
			}
			if !strings.Contains(res[0].Err.Error(), ssh.FingerprintSHA256(hostKey(t, cp1))) {
				t.Errorf("%s: error does not name the listed key: %v", sp, res[0].Err)
			}
		}
		if b, _ := os.ReadFile(kh); string(b) != line {
			t.Errorf("known_hosts gained lines:\n%s", b)
		}
	})

	t.Run("a key recorded once is known under every spelling", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		r, _ := direct(t, e, "cp0", kh)
		r.TrustOnFirstUse = true
		first := e.Inventory.User + "@localhost:" + port
		res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("hostname", first))
		if res[0].Err != nil || s.String(first) != "cp0\n" {
			t.Fatalf("first use: %+v %q", res[0], s.String(first))
		}
		b, _ := os.ReadFile(kh)
		if !strings.HasPrefix(string(b), "[localhost]:"+port+",[127.0.0.1]:"+port+" ") || strings.Count(string(b), "\n") != 1 {
			t.Fatalf("recorded %q, want the name and the address on one line", b)
		}
		r.TrustOnFirstUse = false
		for _, sp := range spellings {
			host := e.Inventory.User + "@" + sp
			res, _ := run(t, r, ctxT(t, 30*time.Second), scriptJob("true", host))
			if res[0].Err != nil {
				t.Errorf("%s after recording: %v", sp, res[0].Err)
			}
		}
	})

	t.Run("an alias of a known address with another key", func(t *testing.T) {
		// cp0's own address known with cp1's key; an ssh_config alias
		// whose HostName is spelled as a mapped address reaches it.
		kh := filepath.Join(t.TempDir(), "known_hosts")
		line := cp0.KnownAs + " " + cp1.HostKey + "\n"
		if err := os.WriteFile(kh, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(t.TempDir(), "config")
		host, p, _ := net.SplitHostPort(cp0.Addr())
		body := fmt.Sprintf("Host impostor\n  HostName ::ffff:%s\n  Port %s\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  StrictHostKeyChecking accept-new\n",
			host, p, e.Inventory.User, e.Inventory.IdentityFile, kh)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &Runner{ConfigFile: cfg, AgentSocket: "none"}
		res, s := run(t, r, ctxT(t, 30*time.Second), scriptJob("echo ran", "impostor"))
		if !errors.Is(res[0].Err, ErrHostKeyChanged) || s.String("impostor") != "" {
			t.Fatalf("alias: %v (output %q)", res[0].Err, s.String("impostor"))
		}
		if b, _ := os.ReadFile(kh); string(b) != line {
			t.Errorf("known_hosts gained lines:\n%s", b)
		}
	})
}

// TestParallelFollowsBlock: without MaxParallel, parallel= is how many
// hosts run at once (the old default capped it at 32, whatever it said).
func TestParallelFollowsBlock(t *testing.T) {
	e, r := rig(t)
	var hosts []string
	for range 2 {
		for _, h := range e.Inventory.Hosts {
			hosts = append(hosts, h.Name)
		}
	}
	job := scriptJob(`sleep 3`, hosts...)
	job.Block.Parallel = len(hosts)
	if peak := peakHosts(t, r, job); peak != len(hosts) {
		t.Errorf("peak %d hosts at once, want all %d", peak, len(hosts))
	}
	if c := parallelCeiling(); c < 64 || c > maxParallelCeiling {
		t.Errorf("ceiling %d", c)
	}
}

// TestAgentShared: hosts connecting at once share one connection to the
// agent, which closes when the last lets go.
func TestAgentShared(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, priv, _ := ed25519.GenerateKey(nil)
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() { _ = agent.ServeAgent(kr, c); c.Close() })
		}
	})
	var s agentShare
	ctx := ctxT(t, 30*time.Second)
	var releases []func()
	var mu sync.Mutex
	var got sync.WaitGroup
	for range 50 {
		got.Go(func() {
			ss, release, err := s.signers(ctx, sock)
			if err != nil || len(ss) != 1 {
				t.Errorf("signers: %d, %v", len(ss), err)
				return
			}
			if _, err := ss[0].Sign(rand.Reader, []byte("x")); err != nil {
				t.Error(err)
			}
			mu.Lock()
			releases = append(releases, release)
			mu.Unlock()
		})
	}
	got.Wait()
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d agent connections for 50 hosts, want 1", n)
	}
	for _, r := range releases {
		r()
		r() // twice is once
	}
	s.mu.Lock()
	left := s.conn
	s.mu.Unlock()
	if left != nil {
		t.Error("the agent connection outlived its last host")
	}
	if _, release, err := s.signers(ctx, sock); err != nil || accepted.Load() != 2 {
		t.Errorf("after all let go: %v, %d connections", err, accepted.Load())
	} else {
		release()
	}
}
