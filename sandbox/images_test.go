package sandbox

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEnsureImages writes the node images from a bin directory of stand-in
// programs and reads the archives back the way `ctr images import` does:
// one manifest naming the image as kubeadm does, a config whose diff_ids
// name the layer, the program at the path kubeadm's manifests call, and
// (kube-proxy) iptables with the libraries it loads. A second call keeps
// the archives; a missing program is named with the script that builds it.
// That containerd imports and runs them is TestBundledKubeadmOnNodes's job.
func TestEnsureImages(t *testing.T) {
	bin := t.TempDir()
	for _, im := range AllImages() {
		for _, b := range im.Bins {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(bin, b)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\necho "+b+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, src := range im.Trees {
			if err := os.MkdirAll(filepath.Join(bin, src, "include"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bin, src, "bpf_lxc.c"), []byte("int x;\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	paths, err := EnsureImages(context.Background(), bin, nil)
	if errors.Is(err, ErrMissing) {
		t.Skip(err) // no iptables or ldd on this machine
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // image → a file it must hold
		"registry.k8s.io/kube-apiserver:" + KubeVersion: "usr/local/bin/kube-apiserver",
		"registry.k8s.io/kube-proxy:" + KubeVersion:     "usr/sbin/iptables-restore",
		"registry.k8s.io/etcd:3.7.0-0":                  "usr/local/bin/etcd",
		"registry.k8s.io/coredns/coredns:v1.14.6":       "coredns",
		"registry.k8s.io/pause:3.10.2":                  "pause",
		ImageKCMN:                                       "usr/local/bin/kube-controller-manager",
		ImageCCM:                                        "usr/local/bin/cloud-controller-manager",
		ImageCilium:                                     "var/lib/cilium/bpf/bpf_lxc.c",
		ImageCiliumOperator:                             "usr/bin/cilium-operator-generic",
		ImageWeb:                                        "usr/bin/curl",
		ImageNodeShell:                                  "usr/bin/nsenter",
	}
	seen := map[string]bool{}
	for _, p := range paths {
		ref, files, entry := readArchive(t, p)
		seen[ref] = true
		if f, ok := want[ref]; ok && !files[f] {
			t.Errorf("%s: no %s in %v", ref, f, keysOf(files))
		}
		if strings.Contains(ref, "coredns") && (len(entry) == 0 || entry[0] != "/coredns") {
			t.Errorf("%s: entrypoint %v", ref, entry)
		}
		if strings.Contains(ref, "kube-proxy") {
			var libs int
			for f := range files {
				if strings.Contains(f, "libxtables") || strings.HasPrefix(f, "lib64/ld-linux") {
					libs++
				}
			}
			if libs < 2 || !files["usr/sbin/xtables-nft-multi"] {
				t.Errorf("kube-proxy: iptables without its loader and libraries: %v", keysOf(files))
			}
		}
		if strings.HasPrefix(ref, ImageCilium) {
			for _, f := range []string{"usr/bin/cilium-agent", "usr/bin/cilium-dbg", "opt/cni/bin/cilium-cni", "init-container.sh", "install-plugin.sh", "cni-uninstall.sh", "cni/loopback", "bin/bash", "usr/sbin/iptables-save", "usr/bin/clang", "usr/lib/llvm-19/lib/clang/19/include/stddef.h", "home/cilium"} {
				if !files[f] {
					t.Errorf("%s: no %s", ref, f)
				}
			}
		}
		// The other runbooks' images lie apart: the kubeadm runbook
		// imports ImagesDir/*.tar on every node, and these are not
		// kubeadm's. The node pods' image is there too: every node has
		// it, as target=node blocks need.
		inRoot := strings.HasPrefix(ref, imageRegistry+"/") || ref == ImageNodeShell
		if apart := filepath.Dir(p) != ImagesDir(bin); apart != !inRoot {
			t.Errorf("%s archived at %s", ref, p)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, %v", p, fi.Mode(), err)
		}
	}
	for ref := range want {
		if !seen[ref] {
			t.Errorf("no archive for %s", ref)
		}
	}
	// Kept: a second call writes nothing.
	before, _ := os.Stat(paths[0])
	if _, err := EnsureImages(context.Background(), bin, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(paths[0]); !after.ModTime().Equal(before.ModTime()) {
		t.Error("the archive was written again")
	}
	// A rebuilt program: the archives holding it are written again.
	later := before.ModTime().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(bin, "kube-apiserver"), later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureImages(context.Background(), bin, nil); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(paths[0]); !after.ModTime().After(before.ModTime()) {
		t.Errorf("%s not rewritten after its program changed", paths[0])
	}
	// A missing program: a MissingError naming the build script.
	empty := t.TempDir()
	_, err = EnsureImages(context.Background(), empty, nil)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "sandbox-bins.sh") {
		t.Errorf("missing binaries: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(ImagesDir(empty), ".*-*.tar"))
	sub, _ := filepath.Glob(filepath.Join(ImagesDir(empty), "*", ".*-*.tar"))
	if left = append(left, sub...); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// readArchive returns a Docker archive's one image name, the files of its
// layer and its entrypoint, checking that the config's diff_id names the
// layer.
func readArchive(t *testing.T, path string) (string, map[string]bool, []string) {
	t.Helper()
	// Streamed, twice: the Cilium agent's layer is a quarter of a
	// gigabyte. First the small entries (manifest and config), then the
	// layer's own tar, read in place.
	each := func(fn func(h *tar.Header, r io.Reader)) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tr := tar.NewReader(f)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			fn(h, tr)
		}
	}
	entries := map[string][]byte{}
	each(func(h *tar.Header, r io.Reader) {
		if !strings.HasSuffix(h.Name, "/layer.tar") {
			entries[h.Name], _ = io.ReadAll(r)
		}
	})
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 || len(manifest[0].RepoTags) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("%s: manifest.json %s (%v)", path, entries["manifest.json"], err)
	}
	var cfg struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(entries[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("%s: config: %v", path, err)
	}
	layerName := manifest[0].Layers[0]
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+strings.TrimSuffix(layerName, "/layer.tar") {
		t.Errorf("%s: diff_ids %v do not name layer %s", path, cfg.RootFS.DiffIDs, layerName)
	}
	files := map[string]bool{}
	each(func(h *tar.Header, r io.Reader) {
		if h.Name != layerName {
			return
		}
		lr := tar.NewReader(r)
		for {
			h, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: layer: %v", path, err)
			}
			files[strings.TrimSuffix(h.Name, "/")] = true
		}
	})
	return manifest[0].RepoTags[0], files, cfg.Config.Entrypoint
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
