package testrig

import (
	"bytes"
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cairn-dev/cairn/sandbox"
)

// SSHEnv is the test binary's shared SSH hosts.
type SSHEnv struct {
	Inventory     *sandbox.Inventory
	InventoryPath string // inventory.json
}

// SSH returns the shared SSH hosts (sandbox.DefaultHosts: cp0, cp1, cp2, w0).
func SSH(t testing.TB) *SSHEnv {
	t.Helper()
	requireMain(t)
	shared.sshOnce.Do(func() {
		shared.ssh, shared.sshErr = shared.start(sandbox.Options{NoKube: true})
	})
	if shared.sshErr != nil {
		unavailable(t, "the sandbox SSH hosts (sshd)", shared.sshErr)
	}
	return &SSHEnv{Inventory: shared.ssh.Inventory(), InventoryPath: shared.ssh.Dir() + "/inventory.json"}
}

// Dial opens an SSH connection to the named host, closed at t's cleanup.
func (e *SSHEnv) Dial(t testing.TB, host string) *ssh.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := e.Inventory.Dial(ctx, host, nil)
	if err != nil {
		t.Fatalf("testrig: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Run runs cmd on host and returns its standard output; it fails t if the
// command fails.
func (e *SSHEnv) Run(t testing.TB, host, cmd string) string {
	t.Helper()
	c := e.Dial(t, host)
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("testrig: session on %s: %v", host, err)
	}
	defer s.Close()
	var stdout, stderr bytes.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		c.Close()
		<-done
		t.Fatalf("testrig: %s: %q did not finish in 60s", host, cmd)
	}
	if err != nil {
		t.Fatalf("testrig: %s: %q: %v\n%s", host, cmd, err, stderr.String())
	}
	return stdout.String()
}
