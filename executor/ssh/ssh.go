// Package ssh runs target=ssh blocks on remote hosts with
// golang.org/x/crypto/ssh: scripts with bash, and action=copy over SFTP.
//
// # Hosts and configuration
//
// Each value of job.Hosts is [user@]host[:port]. The host part is looked up
// in an OpenSSH client configuration file (Runner.ConfigFile, by default
// ~/.ssh/config), of which cairn reads Host and "Match all" sections,
// Include, HostName, Port, User, IdentityFile, IdentitiesOnly,
// UserKnownHostsFile, GlobalKnownHostsFile, StrictHostKeyChecking and
// ConnectTimeout; other keywords are ignored, except ProxyJump and
// ProxyCommand, which are refused because cairn would otherwise connect
// somewhere else than ssh does. Keys come from the identity files and from
// ssh-agent (SSH_AUTH_SOCK).
//
// # Host keys
//
// Host keys are checked against known_hosts. An unknown key is refused with
// an error that names the host, the key's fingerprint and how to add it,
// unless trust-on-first-use is on (Runner.TrustOnFirstUse, or
// StrictHostKeyChecking accept-new/no for the host in the config file): then
// the key is appended to the host's first known_hosts file. A changed or
// revoked key is always refused.
//
// # Host groups
//
// A block runs on the hosts in order, or Block.Parallel hosts at a time
// (at most Runner.MaxParallel connections are open at once). A host fails
// when it cannot be reached or its exit status is not the block's
// expect.exit (any status passes with expect.exit=any). After a failure no
// further host is started: in order, the hosts after the failing one are
// skipped; in parallel, the hosts already running finish and the rest are
// skipped. Skipped hosts have Exit -1 and Err ErrSkipped. Results are in the
// order of job.Hosts. Every host gets one host-end event; host-start only
// when it was started.
//
// # Scripts
//
// A script runs as `bash --noprofile --norc -euo pipefail -s` (under
// `sudo -n` with sudo=true), reading from standard input a preamble that
// exports the job's values, CAIRN_RUN_ID, CAIRN_BLOCK and CAIRN_HOST, each
// single-quoted, and then the script inside { … } so that bash parses it
// whole before running it and no command in it can read the script's own
// text from standard input. Exports inside the script survive sudo's
// env_reset. Standard error is joined to standard output on the host, so the
// output keeps its order.
//
// When ctx ends, the remote processes get SIGTERM, then SIGKILL after
// Runner.Grace, each sent two ways: through the SSH session (sshd signals
// the session's process group, but OpenSSH refuses signal requests on root
// logins) and from a second session that signals the remote session by its
// id, which the remote sh reports first thing (with sudo -n when the block
// uses sudo, so that root processes started through sudo die too). A
// process that started a session of its own (setsid) is found by the
// CAIRN_SESSION in its environment: when bash ends, normally or by a
// signal, the remote sh kills every process of the host that carries the
// session's id (through sudo -n for sudo blocks), so a block's background
// processes end with the run, as with the local runner; start what must
// outlive a block with systemctl, as on any server. What still escapes: a
// process that clears its environment (env -i) and setsid; and when the
// executor dies, the remote block runs until it ends or writes to the lost
// connection (SIGPIPE); only then are its leftovers killed. While a script runs, keepalives (Runner.KeepAlive)
// notice a host that stopped answering; its script is then out of reach and
// may still run.
//
// # Copies
//
// action=copy copies each SOURCE [DEST] of the block from job.From (a host;
// "" is this machine) to every host, streaming each file through this
// machine over SFTP. Paths may use $NAME and ${NAME} for parameters and
// captures, and CAIRN_HOST (the destination host), CAIRN_RUN_ID and
// CAIRN_BLOCK. A DEST that ends in / or is a directory receives the file
// under its source name. The destination's parent directories are created,
// the file is written to a temporary name beside it and renamed into place,
// and its permission bits are those of the source (ownership is the writing
// user's). With sudo=true both ends run OpenSSH's sftp-server under
// `sudo -n` (found in the usual libexec directories) instead of the sftp
// subsystem; files on this machine are read as the user running cairn.
// Each copied file is reported in the destination host's output with its
// byte count.
package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Runner runs target=ssh blocks. The zero value uses ~/.ssh/config,
// ~/.ssh/known_hosts, the default identity files and ssh-agent. A Runner is
// safe for concurrent use and must not be copied after first use.
type Runner struct {
	// ConfigFile is an OpenSSH client configuration (ssh -F FILE); "" is
	// ~/.ssh/config if it exists, "none" is no file.
	ConfigFile string
	// KnownHosts are the known_hosts files to check host keys against,
	// instead of the config file's UserKnownHostsFile; default
	// ~/.ssh/known_hosts. Trust-on-first-use appends to the first.
	KnownHosts []string
	// IdentityFiles are private keys to offer, before the config file's
	// IdentityFile ones. When neither names any, ~/.ssh/id_ed25519,
	// id_ecdsa and id_rsa are tried.
	IdentityFiles []string
	// AgentSocket is ssh-agent's socket; "" is $SSH_AUTH_SOCK, "none"
	// disables the agent.
	AgentSocket string
	// User is the login user for hosts whose value and config entry name
	// none; default the current user.
	User string
	// ConnectTimeout bounds connecting, the handshake and authentication
	// per host; default the config file's ConnectTimeout, else 10s.
	ConnectTimeout time.Duration
	// TrustOnFirstUse accepts an unknown host key and records it in the
	// first known_hosts file. A changed key is refused regardless.
	TrustOnFirstUse bool
	// MaxParallel caps a block's parallel= (the connections open at once).
	// Default: parallel= as written, up to a ceiling that keeps the
	// machine's open-file limit in reach (1,024 connections, fewer when
	// RLIMIT_NOFILE is low); see maxParallel.
	MaxParallel int
	// Grace is how long remote processes get between SIGTERM and SIGKILL
	// when a run is cancelled; default 2s.
	Grace time.Duration
	// KeepAlive is how often a connection running a script is probed
	// (keepalive@openssh.com), so that idle-dropping firewalls keep it and a
	// dead one is noticed: after three intervals without an answer the
	// connection is closed and the host fails. Default 15s; negative
	// disables.
	KeepAlive time.Duration

	tofuMu sync.Mutex // serialises trust-on-first-use appends
	agents agentShare
	// handshakes bounds the key exchanges and logins in progress at once:
	// they are CPU on both ends, and 100 connections opened at once on two
	// cores took 16.0 s a block against 9.3 s for 32 at a time
	// (BenchmarkFanOut100, 2026-12-06; turns themselves not yet measured).
	handshakes     chan struct{}
	handshakesOnce sync.Once
}

var _ executor.Runner = (*Runner)(nil)

const (
	defaultConnectTimeout = 10 * time.Second
	maxParallelCeiling    = 1024
	defaultGrace          = 2 * time.Second
	defaultKeepAlive      = 15 * time.Second
)

// ErrSkipped is executor.ErrSkipped.
var ErrSkipped = executor.ErrSkipped

// Run implements executor.Runner.
func (r *Runner) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	b := job.Block
	if b == nil {
		return nil, errors.New("ssh: job has no block")
	}
	if len(job.Hosts) == 0 {
		return nil, fmt.Errorf("block %s: no hosts to run on (parameter %s is empty): %w", b.ID, b.Hosts, executor.ErrBadParam)
	}
	if err := executor.CheckScriptEnv(job); err != nil {
		return nil, err
	}
	res, err := r.newResolver()
	if err != nil {
		return nil, err
	}
	var run hostFunc
	switch b.Action {
	case "":
		run = func(ctx context.Context, h *Host) executor.HostResult { return r.runScript(ctx, job, h, out) }
	case "copy":
		cp := r.newCopier(ctx, job, res, out)
		defer cp.close()
		run = cp.copyTo
	default:
		return nil, fmt.Errorf("block %s: action %q is not an ssh action (known: copy)", b.ID, b.Action)
	}
	return r.group(ctx, job, res, run, out), nil
}

// hostFunc runs the block on one resolved host. It fills Exit and Err;
// executor.FanOut fills Host, Start and Duration.
type hostFunc func(ctx context.Context, h *Host) executor.HostResult

// group runs run on every host of the job (executor.FanOut: in order or
// Parallel at a time, at most MaxParallel; none started after a failure).
func (r *Runner) group(ctx context.Context, job *executor.Job, res *resolver, run hostFunc, out executor.Sink) []executor.HostResult {
	return executor.FanOut(ctx, job, job.Hosts, min(job.Block.Parallel, r.maxParallel()), func(ctx context.Context, name string) executor.HostResult {
		h, err := res.resolve(name)
		if err != nil {
			return executor.HostResult{Exit: -1, Err: err}
		}
		return run(ctx, h)
	}, out)
}

// maxParallel is the most connections a block opens at once: MaxParallel,
// or the ceiling: 1,024, and no more than half the open files the process
// may have beyond 128 kept for the executor itself (a connection holds one
// socket; copies open a file each; the agent connection is shared).
func (r *Runner) maxParallel() int {
	if r.MaxParallel > 0 {
		return r.MaxParallel
	}
	return parallelCeiling()
}

func parallelCeiling() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return maxParallelCeiling
	}
	return max(1, min(maxParallelCeiling, (int(min(rl.Cur, 1<<20))-128)/2))
}

// handshake waits for a turn to connect and log in; done gives it back.
func (r *Runner) handshake(ctx context.Context) (done func(), err error) {
	r.handshakesOnce.Do(func() { r.handshakes = make(chan struct{}, max(8, 4*runtime.GOMAXPROCS(0))) })
	select {
	case r.handshakes <- struct{}{}:
		return sync.OnceFunc(func() { <-r.handshakes }), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ctxErr is executor.CtxErr.
func ctxErr(ctx context.Context) error { return executor.CtxErr(ctx) }

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return defaultGrace
}

// runScript connects to h and runs the block's script there.
func (r *Runner) runScript(ctx context.Context, job *executor.Job, h *Host, out executor.Sink) executor.HostResult {
	hr := executor.HostResult{Exit: -1}
	c, err := r.dial(ctx, h, func(msg string) { out.Event(executor.Event{Kind: "info", Host: h.Name, Message: msg}) })
	if err != nil {
		hr.Err = err
		return hr
	}
	defer c.Close()
	hr.Exit, hr.Err = r.execScript(ctx, c, job, out)
	return hr
}

// scriptCommand is the command line for the session. The login shell
// (whatever it is) only execs /bin/sh; sh reports its pid, which is the
// session id sshd gave the login shell, on standard error, and becomes bash
// (or sudo) with standard error joined to standard output.
func scriptCommand(sudo bool, session string) string {
	bash := "bash --noprofile --norc -euo pipefail -s"
	reap := executor.ReapCommands(session) // in sh itself: no process more than the grep
	if sudo {
		bash = "sudo -n " + bash
		reap = "sudo -n /bin/sh -c " + runbook.ShellQuote(executor.ReapScript(session))
	}
	// sh stays as the session leader, runs bash, and when bash ends (or a
	// signal ends the run) kills every process of the run left on the host:
	// they carry CAIRN_SESSION in their environment, even those that
	// started a session of their own.
	return "exec /bin/sh -c " + runbook.ShellQuote(`printf '`+sidPrefix+`%s\n' "$$" >&2
cairn_reap() { `+reap+`; } 2>/dev/null
trap 'cairn_reap; exit 143' TERM HUP INT
`+bash+` 2>&1
rc=$?
cairn_reap
exit $rc`)
}

const sidPrefix = "cairn-sid="

// execScript runs the script over one session on c and returns its exit
// status. It returns once the session and every goroutine it started are
// done.
func (r *Runner) execScript(ctx context.Context, c *client, job *executor.Job, out executor.Sink) (int, error) {
	h := c.host
	session := executor.NewID() // one host's part of a run (a run's hosts may share a process table, as the sandbox's do)
	sess, err := c.NewSession()
	if err != nil {
		return -1, fmt.Errorf("%s: open a session: %w", h, err)
	}
	defer sess.Close()
	stdout := &hostOutput{host: h.Name, out: out}
	ctl := &controlWriter{out: stdout, found: make(chan struct{})}
	sess.Stdout, sess.Stderr = stdout, ctl
	stdin, err := sess.StdinPipe()
	if err != nil {
		return -1, fmt.Errorf("%s: %w", h, err)
	}
	if err := sess.Start(scriptCommand(job.Block.Sudo, session)); err != nil {
		return -1, fmt.Errorf("%s: start bash: %w", h, err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	kaStop := make(chan struct{})
	defer close(kaStop) // before wg.Wait
	wg.Go(func() { r.keepAlive(c, kaStop) })
	wg.Go(func() {
		// Fails only when the session ends first; Wait reports why.
		_, _ = io.WriteString(stdin, executor.ScriptInput(job, h.Name, session))
		_ = stdin.Close()
	})
	done := make(chan error, 1)
	wg.Go(func() { done <- sess.Wait() })

	select {
	case err = <-done:
	case <-ctx.Done():
		r.stop(c, sess, ctl, job.Block.Sudo, session, done, &wg)
		return -1, ctxErr(ctx)
	}
	var ee *ssh.ExitError
	var em *ssh.ExitMissingError
	switch {
	case err == nil:
		return 0, nil
	case c.lost.Load():
		return -1, fmt.Errorf("%s: connection lost: no answer to keepalives for %s; the script may still be running on the host", h, 3*r.keepAliveInterval())
	case errors.As(err, &ee) && ee.Signal() != "":
		return -1, fmt.Errorf("%s: the script was killed by signal %s", h, ee.Signal())
	case errors.As(err, &ee):
		return ee.ExitStatus(), nil
	case errors.As(err, &em):
		return -1, fmt.Errorf("%s: the session ended without an exit status (did the connection drop or the host reboot?)", h)
	default:
		return -1, fmt.Errorf("%s: %w", h, err)
	}
}

func (r *Runner) keepAliveInterval() time.Duration {
	if r.KeepAlive == 0 {
		return defaultKeepAlive
	}
	return r.KeepAlive
}

// keepAlive probes c every interval until stop is closed, and closes c
// (marking it lost) when three intervals pass without an answer.
func (r *Runner) keepAlive(c *client, stop <-chan struct{}) {
	iv := r.keepAliveInterval()
	if iv < 0 {
		return
	}
	dead := time.AfterFunc(3*iv, func() {
		c.lost.Store(true)
		c.Close()
	})
	defer dead.Stop()
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		// OpenSSH answers with a failure, which is an answer.
		if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			return
		}
		dead.Reset(3 * iv)
	}
}

// stop ends a running script: SIGTERM, then SIGKILL after the grace
// period, each sent two ways: through the session (sshd signals the
// session's process group, but OpenSSH refuses this for root logins) and by
// a second session that signals the remote session by id (under sudo -n for
// sudo blocks, so root processes die too). The KILL round always runs, so
// nothing that ignored TERM or left the output survives. Then it closes the
// connection and waits for the session to end (done).
func (r *Runner) stop(c *client, sess *ssh.Session, ctl *controlWriter, sudo bool, session string, done <-chan error, wg *sync.WaitGroup) {
	grace := r.grace()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	// The id arrives as the script starts; a cancel just then waits for it.
	select {
	case <-ctl.found:
	case <-done:
	case <-timer.C:
	}
	sid := ctl.sid()
	signal := func(sig ssh.Signal) {
		_ = sess.Signal(sig)
		if sid <= 1 {
			return
		}
		reaped := make(chan struct{})
		wg.Go(func() {
			defer close(reaped)
			s, err := c.NewSession()
			if err != nil {
				return
			}
			defer s.Close()
			_ = s.Run(signalCommand(sid, string(sig), sudo, session))
		})
		select {
		case <-reaped:
		case <-time.After(grace):
		}
	}
	signal(ssh.SIGTERM)
	ended := false
	timer.Reset(grace)
	select {
	case <-done:
		ended = true
	case <-timer.C:
	}
	signal(ssh.SIGKILL)
	c.Close() // ends the session and a stuck signalling session
	if !ended {
		<-done
	}
}

// signalCommand sends sig to what is left of remote session sid: its
// process group, and every process in the session. With SIGKILL it also
// reaps the run's processes by CAIRN_SESSION from this second session: the
// KILL to the group may end the remote sh while its own reap still runs.
func signalCommand(sid int, sig string, sudo bool, session string) string {
	n := strconv.Itoa(sid)
	cmd := "kill -s " + sig + " -- -" + n + " 2>/dev/null; pkill -" + sig + " -s " + n + " 2>/dev/null; exit 0"
	if sig == string(ssh.SIGKILL) {
		cmd = "kill -s " + sig + " -- -" + n + " 2>/dev/null; pkill -" + sig + " -s " + n + " 2>/dev/null; " + executor.ReapScript(session)
	}
	if sudo {
		return "sudo -n /bin/sh -c " + runbook.ShellQuote(cmd) + " 2>/dev/null || { " + cmd + "; }"
	}
	return cmd
}

// hostOutput passes a host's output to the sink, copying each chunk since
// the caller reuses its buffer.
type hostOutput struct {
	host string
	out  executor.Sink
}

func (w *hostOutput) Write(p []byte) (int, error) {
	if len(p) > 0 {
		w.out.Output(w.host, bytes.Clone(p))
	}
	return len(p), nil
}

// controlWriter reads the session's standard error: the remote sh's
// "cairn-sid=N" line, and before it anything the login shell printed, which
// goes to the output.
type controlWriter struct {
	out   io.Writer
	found chan struct{} // closed when the id has arrived

	mu   sync.Mutex
	line []byte
	id   int
}

func (w *controlWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for w.id == 0 && len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			if len(w.line) > 4096 { // not ours: pass it on
				w.out.Write(w.line)
				w.line = nil
			}
			return n, nil
		}
		line := append(w.line, p[:i+1]...)
		w.line, p = nil, p[i+1:]
		if s, ok := strings.CutPrefix(strings.TrimSpace(string(line)), sidPrefix); ok {
			if id, err := strconv.Atoi(s); err == nil && id > 0 {
				w.id = id
				close(w.found)
				continue
			}
		}
		w.out.Write(line)
	}
	if len(p) > 0 {
		w.out.Write(p)
	}
	return n, nil
}

func (w *controlWriter) sid() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id
}
