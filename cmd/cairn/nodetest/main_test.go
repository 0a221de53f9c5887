package nodetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the cairn binary built for this package's tests, as a reader
// builds it (`make build`): the runbooks run through the command itself, its
// local runner supervising blocks as it does for a reader.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "cairn-nodetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	return m.Run()
}

var (
	buildOnce sync.Once
	cairnBin  string
	buildErr  error
)

// buildCairn builds the cairn binary once, when the first test needs it
// (a skipped or -short run builds nothing).
func buildCairn(ctx context.Context) (string, error) {
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "cairn")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/cairn-dev/cairn/cmd/cairn").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building cairn: %v\n%s", err, out)
			return
		}
		cairnBin = bin
	})
	return cairnBin, buildErr
}

// cairn runs `cairn args...` with the given terminal. Cancelling ctx kills
// the command's whole process group (its ssh and kubectl children too).
func cairn(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) error {
	return cairnWith(ctx, nil, stdin, stdout, stderr, args...)
}

// cairnWith is cairn with env added to the test's environment.
func cairnWith(ctx context.Context, env []string, stdin io.Reader, stdout, stderr io.Writer, args ...string) error {
	cmd, err := startCairn(ctx, env, stdin, stdout, stderr, args...)
	if err != nil {
		return err
	}
	return cmd.Wait()
}

// startCairn starts `cairn args...` in a process group of its own
// (cancelling ctx kills the group) and returns it running.
func startCairn(ctx context.Context, env []string, stdin io.Reader, stdout, stderr io.Writer, args ...string) (*exec.Cmd, error) {
	bin, err := buildCairn(ctx)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child left holding the command's output after it exits is an
	// orphan: Wait says so (exec.ErrWaitDelay) instead of waiting for it.
	cmd.WaitDelay = 10 * time.Second
	return cmd, cmd.Start()
}
