package sandbox

import (
	"archive/tar"
	"bytes"
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
	for _, im := range append(NodeImages(), CCMImages()...) {
		for _, b := range im.Bins {
			if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\necho "+b+"\n"), 0o755); err != nil {
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
		// The CCM runbook's images lie apart: the kubeadm runbook imports
		// ImagesDir/*.tar, and these are not kubeadm's.
		if inCCM := filepath.Dir(p) == filepath.Join(ImagesDir(bin), CCMImagesDir); inCCM != strings.HasPrefix(ref, sandboxRegistry+"/") {
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
	if left, _ := filepath.Glob(filepath.Join(ImagesDir(empty), ".image-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// readArchive returns a Docker archive's one image name, the files of its
// layer and its entrypoint, checking that the config's diff_id names the
// layer.
func readArchive(t *testing.T, path string) (string, map[string]bool, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		data, _ := io.ReadAll(tr)
		entries[h.Name] = data
	}
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
	lr := tar.NewReader(bytes.NewReader(entries[layerName]))
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
	return manifest[0].RepoTags[0], files, cfg.Config.Entrypoint
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
