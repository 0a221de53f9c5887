package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procState records one process the sandbox started, so that Down (maybe in
// another process) stops exactly it. StartTime guards against a recycled pid.
type procState struct {
	Name      string `json:"name"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Log       string `json:"log"`
}

// child is a process started by this Sandbox value; done closes when it has
// exited and been reaped.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// spawner starts processes from one OS thread that stays alive until the
// sandbox is down. Linux sends Pdeathsig when the *thread* that forked a child
// exits, not the process, so children started with Pdeathsig from Go's
// ordinary threads could be killed at random; a locked, long-lived thread
// makes "die with the test binary" mean exactly that.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
}

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: when this goroutine returns the thread exits,
		// which is what Pdeathsig watches. It returns only after close(quit),
		// when every child has already been stopped.
		close(ready)
		for {
			select {
			case r := <-s.reqs:
				r.res <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	<-ready
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	res := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd, res}:
	case <-s.quit:
		return errors.New("sandbox is shutting down")
	}
	return <-res
}

func (s *spawner) stop() { close(s.quit) }

// spawn starts argv as a daemon named name: in its own session (so a
// terminal's ^C or hang-up does not reach it), stdout and stderr appended to
// its log file, stdin from /dev/null. It records the process in the state file
// before returning.
func (sb *Sandbox) spawn(name string, argv []string, env []string) (*child, error) {
	logPath := sb.path("logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", name, err)
	}
	defer logf.Close() // the child holds its own copy
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if sb.spawner != nil {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		err = sb.spawner.start(cmd)
	} else {
		err = cmd.Start()
	}
	if err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // reap; the exit status is in the log
		close(c.done)
	}()
	st, _ := procStartTime(cmd.Process.Pid)
	sb.mu.Lock()
	sb.children[cmd.Process.Pid] = c
	sb.state.Procs = append(sb.state.Procs, procState{Name: name, PID: cmd.Process.Pid, StartTime: st, Log: logPath})
	sb.mu.Unlock()
	if err := sb.saveState(); err != nil {
		return c, err
	}
	return c, nil
}

// exited reports whether c has exited, with the tail of its log.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// procStat returns the fields of /proc/PID/stat after the command name
// (which is in parentheses and may hold spaces): f[0] is field 3 (state),
// f[1] field 4 (parent pid), f[19] field 22 (start time in clock ticks).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("parse /proc/%d/stat: short", pid)
	}
	return f, nil
}

// procStartTime reads field 22 of /proc/PID/stat (start time in clock ticks).
func procStartTime(pid int) (uint64, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// procAlive reports whether p still runs (not a zombie) as the same process.
func procAlive(p procState) bool {
	f, err := procStat(p.PID)
	if err != nil || f[0] == "Z" || f[0] == "X" {
		return false
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return err == nil && (p.StartTime == 0 || st == p.StartTime)
}

// allPIDs lists the processes in /proc.
func allPIDs() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killWhere SIGKILLs every process (but this one) for which match holds and
// waits, bounded even after ctx ends, until none of them is alive; what
// names them in the error.
func killWhere(ctx context.Context, what string, match func(pid int) bool) error {
	find := func() []procState {
		var out []procState
		for _, pid := range allPIDs() {
			if pid == os.Getpid() || !match(pid) {
				continue
			}
			if st, err := procStartTime(pid); err == nil {
				out = append(out, procState{PID: pid, StartTime: st})
			}
		}
		return out
	}
	left := find()
	if len(left) == 0 {
		return nil
	}
	for _, p := range left {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if waitFor(context.WithoutCancel(ctx), 5*time.Second, func() bool {
		for _, p := range find() {
			if procAlive(p) {
				return false
			}
		}
		return true
	}) {
		return nil
	}
	return fmt.Errorf("processes %s still run: %v", what, find())
}

// stopProc stops p and its process group: SIGTERM, then SIGKILL after grace,
// and waits until it has exited. It returns an error only if the process is
// still there after SIGKILL.
func (sb *Sandbox) stopProc(ctx context.Context, p procState, grace time.Duration) error {
	sb.mu.Lock()
	c := sb.children[p.PID]
	sb.mu.Unlock()
	gone := func() bool {
		if c != nil {
			return c.exited()
		}
		return !procAlive(p)
	}
	// Children that left the group (sshd's per-connection processes call
	// setsid; a reader's session may hold a shell) are remembered now: once
	// the leader is gone they are orphans nobody else would stop, and Down
	// must not return while any of them runs.
	kids := descendants(p.PID)
	if gone() && len(kids) == 0 {
		return nil
	}
	// The process is a session (and group) leader: -pid reaches the group.
	_ = syscall.Kill(-p.PID, syscall.SIGTERM)
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	allGone := func() bool {
		if !gone() {
			return false
		}
		for _, k := range kids {
			if procAlive(k) {
				return false
			}
		}
		return true
	}
	if waitFor(ctx, grace, gone) && allGone() {
		return nil
	}
	_ = syscall.Kill(-p.PID, syscall.SIGKILL)
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	for _, k := range kids {
		if procAlive(k) {
			_ = syscall.Kill(k.PID, syscall.SIGKILL)
		}
	}
	// SIGKILL cannot be ignored; give the kernel a bounded moment even if ctx
	// is done, so that data is never deleted under a live process.
	if waitFor(context.WithoutCancel(ctx), 5*time.Second, allGone) {
		return nil
	}
	return fmt.Errorf("stop %s (pid %d): it or a process it started still runs after SIGKILL", p.Name, p.PID)
}

// descendants lists every live process below pid (children, their children,
// ...) with start times, so that a recycled pid is never signalled.
func descendants(pid int) []procState {
	children := map[int][]int{}
	for _, n := range allPIDs() {
		if f, err := procStat(n); err == nil {
			if pp, err := strconv.Atoi(f[1]); err == nil {
				children[pp] = append(children[pp], n)
			}
		}
	}
	var out []procState
	queue := append([]int(nil), children[pid]...)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if st, err := procStartTime(n); err == nil {
			out = append(out, procState{PID: n, StartTime: st})
		}
		queue = append(queue, children[n]...)
	}
	return out
}

// waitFor polls cond every 20ms until it holds, d passes or ctx is done.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
		}
	}
}

// logTail returns the last lines of a log file, for error messages.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// run runs a short helper command (ip, nsenter) and returns its combined
// output in the error.
func run(ctx context.Context, stdin string, argv ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
