package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SuperviseArg is the hidden first argument with which a program that
// links this package runs Supervise (cairn's "__supervise"; the test
// binaries that run local blocks answer it too).
const SuperviseArg = "__supervise"

// SelfSupervisor is the Runner's Supervisor that re-runs this program with
// SuperviseArg; nil when the program cannot be found (a cancel still kills
// bash's process group).
func SelfSupervisor() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, SuperviseArg}
}

// Supervise is the small process that stands between the executor and a
// block's bash (cairn's hidden "__supervise" command). It exists so that a
// run's processes end with the run and with the executor, whatever they do:
//
//   - It is started with a parent-death signal (SIGTERM), so it hears of
//     the executor's death even by kill -9, and kills the run.
//   - It is a child subreaper: a process that double-forks or calls setsid
//     is re-parented to it, not to init, so it can still be found and killed.
//   - Where a writable cgroup v2 hierarchy exists, bash is born in a cgroup
//     of the run's own; cgroup.kill then ends every process in it at once,
//     even one that escaped the process tree.
//
// When bash exits (normally, or after SIGTERM and the grace period), every
// process left is killed: a block's background processes end with the run.
// A process that moved itself to another cgroup and reparented away from
// the subreaper (only root can) is the case that still escapes.
//
// args is the command to run (bash and its arguments). The exit status is
// bash's; 128+N when a signal N ended it.
func Supervise(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "supervise: no command")
		return 2
	}
	grace := 2 * time.Second
	if g, err := time.ParseDuration(os.Getenv("CAIRN_SUPERVISE_GRACE")); err == nil && g > 0 {
		grace = g
	}
	os.Unsetenv("CAIRN_SUPERVISE_GRACE")
	parent, _ := strconv.Atoi(os.Getenv("CAIRN_SUPERVISE_PARENT"))
	os.Unsetenv("CAIRN_SUPERVISE_PARENT")
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	if parent > 0 && os.Getppid() != parent {
		return 128 + int(syscall.SIGTERM) // the executor died before we could hear of it
	}

	// A terminal's shell (CAIRN_SUPERVISE_TTY=1) reads the terminal and
	// leads its foreground process group, as a login shell would; it is
	// ended with SIGHUP (an interactive bash ignores SIGTERM), what a
	// terminal closing sends.
	tty := os.Getenv("CAIRN_SUPERVISE_TTY") == "1"
	os.Unsetenv("CAIRN_SUPERVISE_TTY")
	stop := syscall.SIGTERM
	cg := newRunCgroup()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if tty {
		cmd.Stdin = os.Stdin
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
		stop = syscall.SIGHUP
	}
	if cg != nil {
		cg.enter()
	}
	err := cmd.Start()
	if cg != nil {
		cg.leave() // bash stays in the run's cgroup; we do not
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "start %s: %v\n", args[0], err)
		cg.remove()
		return 127
	}
	pgid := cmd.Process.Pid
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waitc:
	case <-sigs:
		_ = syscall.Kill(-pgid, stop)
		select {
		case werr = <-waitc:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			werr = <-waitc
		}
	}
	killAll(pgid, cg)
	cg.remove()
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if werr != nil {
		return 127
	}
	return 0
}

// killAll kills what is left of the run: the cgroup at once where there is
// one, else bash's process group and every process re-parented to us
// (and its group), and reaps them, until nothing is left (bounded).
func killAll(pgid int, cg *runCgroup) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		cg.kill()
		for _, pid := range children(os.Getpid()) {
			if pg, err := syscall.Getpgid(pid); err == nil && pg == pid {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		reap()
		if (cg == nil || cg.empty()) && len(children(os.Getpid())) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// children lists pid's child processes (of every thread).
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// runCgroup is a cgroup v2 directory of the run's own, beside the
// supervisor's cgroup.
type runCgroup struct {
	dir, parent string
}

// newRunCgroup makes the run's cgroup, or returns nil where cgroup v2 is
// not mounted or not writable (then the subreaper does the work).
func newRunCgroup() *runCgroup {
	mnt := cgroup2Mount()
	if mnt == "" {
		return nil
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	own := ""
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			own = rest
		}
	}
	if own == "" {
		return nil
	}
	parent := filepath.Join(mnt, filepath.Clean("/"+own))
	dir := filepath.Join(parent, "cairn-run-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		os.Remove(dir) // a kernel before 5.14: no cgroup.kill
		return nil
	}
	return &runCgroup{dir: dir, parent: parent}
}

func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4]
			}
		}
	}
	return ""
}

// enter moves this process (every thread: cgroup.procs) into the run's
// cgroup, so that bash is born there; leave moves it back. The thread is
// locked in between so that the fork happens from inside.
func (c *runCgroup) enter() {
	runtime.LockOSThread()
	_ = os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte("0"), 0)
}

func (c *runCgroup) leave() {
	_ = os.WriteFile(filepath.Join(c.parent, "cgroup.procs"), []byte("0"), 0)
	runtime.UnlockOSThread()
}

func (c *runCgroup) kill() {
	if c != nil {
		_ = os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	}
}

func (c *runCgroup) empty() bool {
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	return err != nil || strings.TrimSpace(string(data)) == ""
}

func (c *runCgroup) remove() {
	if c == nil {
		return
	}
	for i := 0; i < 50; i++ {
		if os.Remove(c.dir) == nil || errors.Is(os.Remove(c.dir), os.ErrNotExist) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
