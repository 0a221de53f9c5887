// Package testrig gives tests real servers from the sandbox: a running
// Kubernetes API (shared by the test binary, one namespace per test), SSH
// hosts, and a headless Chromium.
//
// A test package that uses it runs its tests through Main, which stops the
// shared servers when the tests are done:
//
//	func TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }
//
//	func TestApply(t *testing.T) {
//		k := testrig.Kube(t) // k.Client, k.Namespace, k.Kubeconfig
//		...
//	}
//
// A component that cannot start because a prerequisite is missing (a server
// binary, sshd, chromium) skips the test with the command that installs it;
// under CI=true it fails the test instead, so CI never passes by skipping.
// Any other start-up failure always fails. Under -short (and not CI) tests
// that need a server skip.
//
// The server binaries are looked for in sandbox.BinDir() (override with
// CAIRN_SANDBOX_BIN); scripts/sandbox-bins.sh builds them.
//
// The SSH hosts have their own network namespace and hostname. In netns mode
// each also has its own copy of sandbox.PrivateDirs (/etc/kubernetes,
// /var/lib/cairn-host), shared by every test of the binary: a test that
// writes there cleans up after itself. The rest of the file system is this
// machine's: a test that writes other files on a host writes under its own
// t.TempDir().
package testrig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
)

// rig holds the servers shared by one test binary. It is the package's one
// piece of global state: sharing servers across the tests of a binary is
// the point of the package, and Main bounds its lifetime.
type rig struct {
	mainCalled atomic.Bool

	kubeOnce sync.Once
	kube     *sandbox.Sandbox
	kubeErr  error

	sshOnce sync.Once
	ssh     *sandbox.Sandbox
	sshErr  error

	fullOnce sync.Once
	full     *sandbox.Sandbox
	fullErr  error

	mu   sync.Mutex
	dirs []string
}

var shared rig

// startTimeout bounds the start of one shared component.
const startTimeout = 3 * time.Minute

// Main runs the tests of m, then stops every server the rig started and
// removes their state. A failed teardown (something left running) turns a
// passing run into a failing one.
func Main(m *testing.M) int {
	shared.mainCalled.Store(true)
	code := m.Run()
	if err := shared.shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testrig: teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func (r *rig) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, sb := range []*sandbox.Sandbox{r.full, r.ssh, r.kube} {
		if sb != nil {
			if err := sb.Down(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.dirs {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// start brings up one shared sandbox in a fresh temporary state directory.
func (r *rig) start(opts sandbox.Options) (*sandbox.Sandbox, error) {
	dir, err := os.MkdirTemp("", "cairn-rig-")
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.dirs = append(r.dirs, dir)
	r.mu.Unlock()
	opts.StateDir = dir + "/sandbox"
	opts.DieWithParent = true // servers die with the test binary, even on a crash
	if os.Getenv("CAIRN_RIG_VERBOSE") != "" {
		opts.Progress = func(msg string) { fmt.Fprintln(os.Stderr, "testrig:", msg) }
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return sandbox.Up(ctx, opts)
}

// InCI reports whether the tests run in CI (CI=true), where a missing
// component fails instead of skipping.
func InCI() bool { return os.Getenv("CI") == "true" }

// unavailable skips or fails t because component could not be had.
func unavailable(t testing.TB, component string, err error) {
	t.Helper()
	switch {
	case InCI():
		t.Fatalf("testrig: %s is required under CI=true: %v", component, err)
	case errors.Is(err, sandbox.ErrMissing):
		t.Skipf("testrig: skipping, %s unavailable: %v", component, err)
	default:
		t.Fatalf("testrig: %s failed to start: %v", component, err)
	}
}

func requireMain(t testing.TB) {
	t.Helper()
	if testing.Short() && !InCI() {
		t.Skip("testrig: real servers are not started under -short")
	}
	if !shared.mainCalled.Load() {
		t.Fatal("testrig: the shared servers need testrig.Main to stop them; add to this package:\n\tfunc TestMain(m *testing.M) { os.Exit(testrig.Main(m)) }")
	}
}

// testName turns t.Name() into a DNS label fragment.
func testName(t testing.TB, max int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(t.Name()) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= max {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}
