package sandbox_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
)

// TestNodesRuntime: with Nodes, every host runs a real containerd of its
// own, in its own mount namespace: an image imported on cp0 is in cp0's
// store and not in cp1's, runc runs a container from it on cp0, and down
// stops every runtime.
func TestNodesRuntime(t *testing.T) {
	skipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("nodes need network and mount namespaces (root)")
	}
	for _, tool := range []string{"containerd", "runc", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not installed (scripts/ci-deps.sh installs containerd and runc)", tool)
			}
			t.Skipf("%s not installed (apt-get install -y containerd runc)", tool)
		}
	}
	dir := t.TempDir() + "/sb"
	sb, err := sandbox.Up(ctxT(t, 3*time.Minute), sandbox.Options{StateDir: dir, DieWithParent: true, NoKube: true, Nodes: true,
		Hosts:    []sandbox.HostSpec{{Name: "cp0", Groups: []string{"control-plane"}}, {Name: "cp1", Groups: []string{"control-plane"}}},
		Progress: func(m string) { t.Log(m) }})
	if err != nil {
		if errors.Is(err, sandbox.ErrMissing) && os.Getenv("CI") != "true" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Down(ctxT(t, time.Minute)) })
	inv := sb.Inventory()
	var runtimes []int
	for _, c := range sb.Status(ctxT(t, 10*time.Second)).Components {
		if strings.HasPrefix(c.Name, "containerd-") {
			if !c.Healthy || c.Probe.Kind != sandbox.ProbeUnix {
				t.Errorf("%s: healthy %v (%s), probe %v", c.Name, c.Healthy, c.Err, c.Probe)
			}
			runtimes = append(runtimes, c.PIDs...)
		}
	}
	if len(runtimes) != len(inv.Hosts) {
		t.Fatalf("%d containerd processes for %d hosts", len(runtimes), len(inv.Hosts))
	}

	on := func(host, cmd string) string {
		t.Helper()
		out, err := exec.Command("ssh", "-F", inv.SSHConfig, host, cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %s: %v\n%s", host, cmd, err, out)
		}
		return string(out)
	}
	if out := on("cp0", "ctr version"); !strings.Contains(out, "Server:") {
		t.Errorf("ctr version on cp0:\n%s", out)
	}
	// An image of one static program, as `docker save` writes it.
	src := t.TempDir()
	_ = os.WriteFile(filepath.Join(src, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644)
	_ = os.WriteFile(filepath.Join(src, "main.go"), []byte(`package main

import ("fmt"; "os")

func main() { h, _ := os.Hostname(); fmt.Println("hello from a container on", h) }
`), 0o644)
	build := exec.Command("go", "build", "-o", "hello", ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prog, err := os.ReadFile(filepath.Join(src, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "hello.tar")
	if err := os.WriteFile(img, dockerArchive(t, "cairn.test/hello:1", "hello", prog), 0o644); err != nil {
		t.Fatal(err)
	}
	on("cp0", "ctr -n k8s.io images import "+img)
	// crictl (the hosts' own, at the default socket) sees it through CRI,
	// as the runbook's air-gapped recipe checks with crictl images.
	if _, err := os.Stat(filepath.Join(sandbox.BinDir(), "crictl")); err == nil {
		if out := on("cp0", "crictl images 2>/dev/null"); !strings.Contains(out, "cairn.test/hello") {
			t.Errorf("crictl images on cp0:\n%s", out)
		}
		if out := on("cp1", "crictl images 2>/dev/null"); strings.Contains(out, "cairn.test/hello") {
			t.Errorf("crictl images on cp1 lists cp0's image:\n%s", out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Errorf("crictl not built: %v (scripts/sandbox-bins.sh)", err)
	}
	// runc starts a real container from it, in cp0's runtime.
	if out := on("cp0", "timeout 60 ctr -n k8s.io run --rm cairn.test/hello:1 hello-1 /hello"); !strings.Contains(out, "hello from a container on cp0") {
		t.Errorf("the container on cp0 said:\n%s", out)
	}
	if out := on("cp0", "ctr -n k8s.io images ls -q"); !strings.Contains(out, "cairn.test/hello:1") {
		t.Errorf("cp0's images after the import:\n%s", out)
	}
	if out := on("cp1", "ctr -n k8s.io images ls -q"); strings.Contains(out, "cairn.test/hello") {
		t.Errorf("cp1 sees cp0's image: its runtime is not its own:\n%s", out)
	}
	if err := sb.Down(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, pid := range runtimes {
		if err := syscall.Kill(pid, 0); err == nil {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
				t.Errorf("containerd pid %d outlived down", pid)
			}
		}
	}
}

// dockerArchive is a one-layer image in `docker save` form, as the
// air-gapped recipe imports them.
func dockerArchive(t *testing.T, ref, name string, content []byte) []byte {
	t.Helper()
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	_ = lw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(0, 0)})
	_, _ = lw.Write(content)
	_ = lw.Close()
	sum := sha256.Sum256(layer.Bytes())
	diffID := "sha256:" + hex.EncodeToString(sum[:])
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"config": map[string]any{},
	})
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{ref}, "Layers": []string{"layer.tar"}}})
	var out bytes.Buffer
	w := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer.Bytes()}, {cfgName, cfg}, {"manifest.json", manifest}} {
		_ = w.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)})
		_, _ = w.Write(f.data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
