package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

const carryRunbook = `---
title: Carry
requires:
  images: [registry.k8s.io/pause, docker.io/library/busybox:1.37]
  charts: [demo/demo]
---

## S {#s}

` + "```bash {#a target=local}\necho a\n```\n"

// TestBundleCarriesImages: cairn export --bundle copies the required
// images from a real registry on loopback into the bundle's OCI layout and
// packs the chart; MANIFEST checks with sha256sum, skopeo reads the layout
// by the runbooks' names, the Hauler and Zarf files parse. Bad input fails
// with the name of what is wrong and writes no bundle.
func TestBundleCarriesImages(t *testing.T) {
	tmp := t.TempDir()
	reg := testrig.Registry(t, t.TempDir(), nil)
	for _, ref := range []string{"registry.k8s.io/pause:3.10.2", "docker.io/library/busybox:1.37"} {
		img, err := random.Image(4096, 2)
		if err != nil {
			t.Fatal(err)
		}
		dst, _ := name.NewTag(reg + "/" + ref)
		if err := remote.Write(dst, img); err != nil {
			t.Fatal(err)
		}
	}
	chart := filepath.Join(tmp, "demo")
	os.MkdirAll(filepath.Join(chart, "templates"), 0o755)
	os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: demo\nversion: 1.2.3\n"), 0o644)
	os.WriteFile(filepath.Join(chart, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n"), 0o644)
	list := filepath.Join(tmp, "images.txt")
	os.WriteFile(list, []byte("registry.k8s.io/pause:3.10.2\n"), 0o644)
	// Two runbooks require busybox: --omit leaves it out of both.
	content := contentDir(t, map[string]string{"carry.md": carryRunbook,
		"also.md": "---\ntitle: Also\nrequires:\n  images: [docker.io/library/busybox:1.37]\n---\n\n## S {#s}\n\n```bash {#b target=local}\necho b\n```\n"})
	from := []string{"--from", "registry.k8s.io=" + reg + "/registry.k8s.io", "--from", "docker.io=" + reg + "/docker.io"}

	out := filepath.Join(tmp, "b.tar.gz")
	args := append([]string{"export", "--bundle", out, "--content", content, "--images", list, "--chart", "demo/demo=" + chart}, from...)
	code, _, stderr := run(t, args...)
	if code != 0 || !strings.Contains(stderr, "2 images, 1 chart") || !strings.Contains(stderr, "image 1/2 docker.io/library/busybox:1.37 (from ") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	dir := filepath.Join(tmp, "u")
	os.MkdirAll(dir, 0o755)
	if b, err := exec.Command("tar", "-xzf", out, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, b)
	}
	root := filepath.Join(dir, "cairn-bundle")
	check := exec.Command("sha256sum", "--quiet", "-c", "MANIFEST")
	check.Dir = root
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c MANIFEST: %v\n%s", err, b)
	}
	manifest, _ := os.ReadFile(filepath.Join(root, "MANIFEST"))
	for _, want := range []string{"  images/index.json\n", "  images/oci-layout\n", "  images/blobs/sha256/", "  charts/demo-1.2.3.tgz\n", "  hauler-manifest.yaml\n", "  zarf.yaml\n", "  images.txt\n"} {
		if !strings.Contains(string(manifest), want) {
			t.Errorf("MANIFEST lacks %q", want)
		}
	}
	if sk, err := exec.LookPath("skopeo"); err == nil {
		if b, err := exec.Command(sk, "inspect", "--raw", "oci:"+filepath.Join(root, "images")+":docker.io/library/busybox:1.37").CombinedOutput(); err != nil {
			t.Errorf("skopeo inspect: %v\n%s", err, b)
		}
	} else if testrig.InCI() {
		t.Error("no skopeo (scripts/ci-deps.sh installs it)")
	}
	// mirror.sh, for a connected machine without cairn: skopeo pulls the
	// same images from the registry's mirror into docker archives named
	// as the runbooks name them, which skopeo reads back.
	if sk, err := exec.LookPath("skopeo"); err == nil {
		mout := filepath.Join(tmp, "mirror")
		cmd := exec.Command("bash", filepath.Join(root, "mirror.sh"), "--out", mout, "--images-only", "--plain-http",
			"--tag", "registry.k8s.io/pause=3.10.2", "--from", "registry.k8s.io="+reg+"/registry.k8s.io", "--from", "docker.io="+reg+"/docker.io")
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "mirror.sh: registry.k8s.io/pause:3.10.2 (from "+reg+"/registry.k8s.io/pause:3.10.2)") {
			t.Errorf("mirror.sh: %v\n%s", err, b)
		}
		t.Logf("mirror.sh:\n%s", b)
		for _, f := range []string{"registry.k8s.io_pause_3.10.2.tar", "docker.io_library_busybox_1.37.tar"} {
			arch := filepath.Join(mout, "images", f)
			if b, err := exec.Command(sk, "inspect", "docker-archive:"+arch).CombinedOutput(); err != nil || !strings.Contains(string(b), `"Digest": "sha256:`) {
				t.Errorf("skopeo inspect %s: %v\n%s", f, err, b)
			}
		}
		// A mirror without the image: a failure naming it, exit 1.
		cmd = exec.Command("bash", filepath.Join(root, "mirror.sh"), "--out", mout, "--images-only", "--plain-http",
			"--tag", "registry.k8s.io/pause=9.9", "--from", "registry.k8s.io="+reg+"/registry.k8s.io", "--from", "docker.io="+reg+"/docker.io")
		if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "registry.k8s.io/pause:9.9") {
			t.Errorf("mirror.sh with a missing image: %v\n%s", err, b)
		}
	}
	var hauler []map[string]any
	raw, _ := os.ReadFile(filepath.Join(root, "hauler-manifest.yaml"))
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("hauler-manifest.yaml: %v\n%s", err, raw)
		}
		hauler = append(hauler, m)
	}
	if len(hauler) != 2 || hauler[0]["kind"] != "Images" || hauler[1]["kind"] != "Charts" || !strings.Contains(string(raw), `- name: "registry.k8s.io/pause:3.10.2"`) {
		t.Errorf("hauler-manifest.yaml:\n%s", raw)
	}
	var zarf struct {
		Kind       string `json:"kind"`
		Components []struct {
			Images []string `json:"images"`
			Charts []struct {
				LocalPath string `json:"localPath"`
			} `json:"charts"`
		} `json:"components"`
	}
	raw, _ = os.ReadFile(filepath.Join(root, "zarf.yaml"))
	if err := yaml.Unmarshal(raw, &zarf); err != nil || zarf.Kind != "ZarfPackageConfig" || len(zarf.Components) != 1 ||
		len(zarf.Components[0].Images) != 2 || !strings.Contains(zarf.Components[0].Images[0], "@sha256:") || zarf.Components[0].Charts[0].LocalPath != "charts/demo-1.2.3.tgz" {
		t.Errorf("zarf.yaml (%v):\n%s", err, raw)
	}
	// --omit: a required image the site has is left out, and said so.
	omitted := filepath.Join(tmp, "omit.tar.gz")
	if code, _, stderr := run(t, append([]string{"export", "--bundle", omitted, "--content", content, "--images", list, "--chart", "demo/demo=" + chart, "--omit", "docker.io/library/busybox:1.37"}, from...)...); code != 0 || !strings.Contains(stderr, "1 image, 1 chart") {
		t.Errorf("--omit: exit %d\n%s", code, stderr)
	}
	if b, err := exec.Command("tar", "-xzOf", omitted, "cairn-bundle/images.txt").Output(); err != nil || !strings.Contains(string(b), "# not carried (the site provides it): docker.io/library/busybox:1.37") {
		t.Errorf("images.txt of an --omit bundle: %v\n%s", err, b)
	}
	os.Remove(omitted)
	if b, err := exec.Command("tar", "-tzf", filepath.Join(root, "charts", "demo-1.2.3.tgz")).Output(); err != nil || !strings.Contains(string(b), "demo/Chart.yaml") {
		t.Errorf("chart archive: %v %s", err, b)
	}

	// Bad input: an error naming what is wrong, and no bundle.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no version", append([]string{"--with-images", "--chart", "demo/demo=" + chart}, from...), "1 required images have no tag: registry.k8s.io/pause"},
		{"chart not given", append([]string{"--images", list}, from...), "the runbooks require charts not given: demo/demo"},
		{"omit nobody needs", append([]string{"--images", list, "--chart", "demo/demo=" + chart, "--omit", "quay.io/x"}, from...), "--omit quay.io/x: no runbook requires that image"},
		{"images not asked for", []string{"--chart", "demo/demo=" + chart}, "1 required images have no tag: registry.k8s.io/pause"},
		{"chart nobody needs", []string{"--chart", "other/x=" + chart}, "--chart other/x: no runbook requires that chart"},
		{"not a chart", append([]string{"--images", list, "--chart", "demo/demo=" + list}, from...), "chart demo/demo"},
		{"registry gone", []string{"--images", list, "--chart", "demo/demo=" + chart, "--from", "registry.k8s.io=127.0.0.1:1/x", "--from", "docker.io=127.0.0.1:1/x"}, "image docker.io/library/busybox:1.37: pull 127.0.0.1:1/x/library/busybox:1.37"},
		{"missing image", append([]string{"--images", writeFile(t, tmp, "l2", "registry.k8s.io/pause:9.9\n"), "--chart", "demo/demo=" + chart}, from...), "image registry.k8s.io/pause:9.9"},
	} {
		bad := filepath.Join(tmp, "bad.tar.gz")
		code, _, stderr := run(t, append([]string{"export", "--bundle", bad, "--content", content}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want %q:\n%s", c.name, code, c.want, stderr)
		}
		if _, err := os.Stat(bad); err == nil {
			t.Errorf("%s: a bundle was written", c.name)
		}
		os.Remove(bad)
		if left, _ := filepath.Glob(filepath.Join(tmp, ".*")); len(left) > 0 {
			t.Errorf("%s: left behind %q", c.name, left)
		}
	}
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
