package targets

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
)

// whatStillWorks ends every message about a sandbox that cannot start.
const whatStillWorks = "local blocks still run; kube and ssh blocks need a cluster and hosts (--kubeconfig, --ssh-config)"

// StartSandbox brings a sandbox up in the background for `cairn serve
// --sandbox=start` (what `make run` runs) when none is healthy: it builds the
// server binaries first when they are missing and build (a command) is
// given, then runs `cairn sandbox up`. Each line either prints goes to say
// and to the page (the targets' sandbox view); follow switches the runners
// over once the sandbox answers. The sandbox outlives serve, so the next
// `make run` reuses it; a serve stopped half-way stops the build or the
// start-up with it.
func (x *Executor) StartSandbox(ctx context.Context, say func(string)) {
	x.background(ctx, func(ctx context.Context) { x.Targets.start(ctx, say) })
}

func (t *Set) start(ctx context.Context, say func(string)) {
	build := t.cfg.SandboxBuild
	st, err := sandbox.StatusOf(ctx, t.dir)
	if err == nil && st.Healthy() {
		return
	}
	fail := func(msg string) {
		t.setSandbox(SandboxView{State: "unavailable", Dir: t.dir, Message: msg + "; " + whatStillWorks})
		say("sandbox cannot start: " + msg + "; " + whatStillWorks)
	}
	if err := sandbox.CheckBins(sandbox.BinDir()); err != nil {
		if build == "" {
			fail(err.Error())
			return
		}
		msg := "building etcd, kube-apiserver, kube-controller-manager, kubeadm, kubectl and kubelet (first time only: about 20 minutes on 2 cores)"
		t.setSandbox(SandboxView{State: "building", Dir: t.dir, Message: msg})
		say("sandbox: " + msg + " with " + build)
		args := strings.Fields(build)
		if err := t.step(ctx, "building", args, nil, say); err != nil {
			if ctx.Err() == nil {
				fail("building the sandbox's binaries failed: " + err.Error())
			}
			return
		}
	}
	up := t.cfg.SandboxUp
	if len(up) == 0 {
		exe, err := os.Executable()
		if err != nil {
			fail(err.Error())
			return
		}
		up = []string{exe, "sandbox", "up"}
	}
	t.setSandbox(SandboxView{State: "starting", Dir: t.dir, Message: "starting etcd, kube-apiserver, kube-controller-manager and the SSH hosts"})
	say("sandbox: starting in " + t.dir)
	if err := t.step(ctx, "starting", append(slices.Clip(up), "--state-dir", t.dir), t.cfg.SandboxEnv, say); err != nil {
		if ctx.Err() == nil {
			fail("cairn sandbox up failed: " + err.Error())
		}
		return
	}
	t.setSandbox(SandboxView{State: "absent", Dir: t.dir}) // poll reads the real state
	t.poll(ctx, say)
}

// step runs argv in its own process group, bounded by ctx (which stops the
// whole group), and reports each line it prints as progress. The error holds
// the last lines.
func (t *Set) step(ctx context.Context, state string, argv, env []string, say func(string)) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	// Pdeathsig follows the forking thread, so this goroutine keeps its
	// thread until the child is gone: a serve killed with -9 takes the
	// build or start-up with it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" {
				continue
			}
			tail = append(tail, line)
			if len(tail) > 5 {
				tail = tail[1:]
			}
			t.setSandbox(SandboxView{State: state, Dir: t.dir, Message: line})
			say("sandbox: " + line)
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
	}
	pw.Close()
	wg.Wait()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(tail) > 0 {
			return fmt.Errorf("%v: %s", err, strings.Join(tail, " | "))
		}
		return err
	}
	return nil
}
