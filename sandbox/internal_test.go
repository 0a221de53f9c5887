package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestProbeUnixLongPath: a socket whose path is longer than a socket
// address can hold (a state directory under a long test temp dir) is still
// probed, and a missing one still fails.
func TestProbeUnixLongPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 40))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "containerd.sock")
	if len(path) <= 108 {
		t.Fatalf("path %d bytes: not long enough to test", len(path))
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	l, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/containerd.sock", d.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := probeUnix(ctx, path); err != nil {
		t.Errorf("probe of a listening socket at a %d-byte path: %v", len(path), err)
	}
	if err := probeUnix(ctx, filepath.Join(dir, "none.sock")); err == nil {
		t.Error("probe of a missing socket passed")
	}
}

// TestUpRefusesNodesWithoutHosts: nodes are SSH hosts; asking for nodes and
// no hosts is an error that says so, before anything starts.
func TestUpRefusesNodesWithoutHosts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sb")
	_, err := Up(context.Background(), Options{StateDir: dir, Nodes: true, NoSSH: true})
	if err == nil || !strings.Contains(err.Error(), "--no-ssh") {
		t.Fatalf("Up(Nodes, NoSSH): %v", err)
	}
	if _, serr := os.Stat(dir); serr == nil {
		t.Errorf("%s made for a refused start", dir)
	}
}

// TestRaiseInotifyLimits: a limit below its minimum is raised and said so,
// one above it is left as it is, and a limit that cannot be written is an
// error that names the sysctl and how to set it.
func TestRaiseInotifyLimits(t *testing.T) {
	dir := t.TempDir()
	low, high := filepath.Join(dir, "fs", "inotify", "low"), filepath.Join(dir, "fs", "inotify", "high")
	if err := os.MkdirAll(filepath.Dir(low), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, v := range map[string]string{low: "128\n", high: "4096\n"} {
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var said []string
	progress := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }
	if err := raiseInotifyLimits([]inotifyLimit{{low, 1024}, {high, 1024}}, progress); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{low: "1024\n", high: "4096\n"} {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "from 128 to 1024") {
		t.Errorf("progress said %q, want one line about raising 128 to 1024", said)
	}
	err := raiseInotifyLimits([]inotifyLimit{{filepath.Join(dir, "missing"), 1}}, progress)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("a limit that cannot be read: %v", err)
	}
}
