// Package local runs bash blocks on this machine.
package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/executor"
)

// Runner runs a block's script with bash -euo pipefail in its own process
// group, so that a timeout or cancel kills everything the script started.
type Runner struct {
	// Bash is the shell to use; default "bash" from PATH.
	Bash string
	// Dir is the working directory; default the current one.
	Dir string
	// ExtraEnv is added to every run (KUBECONFIG for pinned kube shells).
	ExtraEnv []string
	// Grace is how long a cancelled group gets between SIGTERM and SIGKILL.
	Grace time.Duration
	// Supervisor, when set, is the command that runs bash for us (cairn's
	// "__supervise", which calls Supervise): the run's processes then end
	// with the run and with this process, even after kill -9 and setsid.
	// Without it, a cancel kills bash's process group only.
	Supervisor []string
}

var _ executor.Runner = (*Runner)(nil)

// Run implements executor.Runner.
func (r *Runner) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	res := executor.HostResult{Host: "", Exit: -1, Start: time.Now()}
	exit, err := r.run(ctx, job.Script(), r.env(job), func(p []byte) { out.Output("", p) })
	res.Exit, res.Err, res.Duration = exit, err, time.Since(res.Start)
	return []executor.HostResult{res}, nil
}

func (r *Runner) env(job *executor.Job) []string {
	env := executor.BaseEnv(os.LookupEnv)
	env = append(env, r.ExtraEnv...)
	names := make([]string, 0, len(job.Env))
	for k := range job.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+job.Env[k])
	}
	senv := job.SessionEnv("")
	for _, k := range slices.Sorted(maps.Keys(senv)) {
		env = append(env, k+"="+senv[k])
	}
	return append(env, "CAIRN_RUN_ID="+job.RunID, "CAIRN_BLOCK="+job.Block.ID)
}

// run starts bash and waits for it. The script is passed with -c as one
// argument; parameter values only ever travel in env.
func (r *Runner) run(ctx context.Context, script string, env []string, output func([]byte)) (int, error) {
	bash := r.Bash
	if bash == "" {
		bash = "bash"
	}
	grace := r.Grace
	if grace == 0 {
		grace = 2 * time.Second
	}
	argv := []string{bash, "--noprofile", "--norc", "-e", "-u", "-o", "pipefail", "-c", script}
	supervised := len(r.Supervisor) > 0
	argv, env = r.supervised(argv, env, grace)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = r.Dir
	cmd.Stdin = nil
	// The supervisor hears of our death (SIGTERM), even by kill -9.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if supervised {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return -1, fmt.Errorf("start bash: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := start(cmd); err != nil {
		pr.Close()
		pw.Close()
		return -1, fmt.Errorf("start bash: %w", err)
	}
	pw.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 32<<10)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				output(append([]byte(nil), buf[:n]...))
			}
			if err != nil {
				return
			}
		}
	}()
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var werr error
	killed := false
	select {
	case werr = <-waitc:
	case <-ctx.Done():
		killed = true
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		wait := grace
		if supervised {
			wait += 5 * time.Second // its own grace, then its clean-up
		}
		select {
		case werr = <-waitc:
		case <-time.After(wait):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			werr = <-waitc
		}
	}
	// Children that outlived bash may still hold the pipe: kill the group so
	// the reader ends, and no orphan survives the run.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-copied:
	case <-time.After(grace):
		pr.Close()
		<-copied
	}
	pr.Close()
	if killed {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return -1, executor.ErrTimeout
		}
		return -1, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		return ee.ExitCode(), nil
	}
	if werr != nil {
		return -1, werr
	}
	return 0, nil
}

// supervised is argv as the Supervisor runs it, with the environment the
// supervisor reads (this process, the grace period, and extra settings),
// or argv and env as they are without a Supervisor.
func (r *Runner) supervised(argv, env []string, grace time.Duration, extra ...string) ([]string, []string) {
	if len(r.Supervisor) == 0 {
		return argv, env
	}
	argv = append(append([]string(nil), r.Supervisor...), argv...)
	env = append(env[:len(env):len(env)], "CAIRN_SUPERVISE_PARENT="+strconv.Itoa(os.Getpid()), "CAIRN_SUPERVISE_GRACE="+grace.String())
	return argv, append(env, extra...)
}

// Pdeathsig belongs to the thread that forked the child: the supervisor
// would get SIGTERM whenever the Go runtime retired that thread. So every
// child is started from one goroutine locked to a thread that never exits.
var (
	spawnOnce sync.Once
	spawnc    = make(chan spawnReq)
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func start(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for req := range spawnc {
				req.done <- req.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnc <- spawnReq{cmd: cmd, done: done}
	return <-done
}
