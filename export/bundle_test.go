package export_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/export"
	"github.com/cairn-dev/cairn/sandbox/testrig"
	"github.com/cairn-dev/cairn/site"
)

func buildBundle(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := site.New(site.Options{Content: contentDir})
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Build(ctx)
	if err != nil || len(res.Diagnostics) > 0 {
		t.Fatalf("build: %v %v", err, res.Diagnostics)
	}
	sources := map[string]string{}
	for _, rb := range res.Runbooks {
		sources[rb.Path] = "content/" + filepath.Base(rb.Path)
	}
	var buf bytes.Buffer
	in := export.BundleInput{Version: "test", Runbooks: res.Runbooks, Sources: sources, Site: res.Files,
		Binaries: map[string][]byte{"cairn-linux-amd64": []byte("not really a binary\n")}}
	if err := export.Bundle(&buf, in); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unpack extracts the archive into dir, checking every header is fixed.
func unpack(t *testing.T, archive []byte, dir string) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header carries time %v / name %q", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if !strings.HasPrefix(h.Name, export.BundleRoot+"/") || strings.Contains(h.Name, "..") {
			t.Fatalf("entry outside the bundle folder: %s", h.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, os.FileMode(h.Mode)); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Error("entries are not in sorted order")
	}
	return names
}

func TestBundle(t *testing.T) {
	a, b := buildBundle(t), buildBundle(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two bundles of the same content differ")
	}
	dir := t.TempDir()
	names := unpack(t, a, dir)
	for _, want := range []string{"MANIFEST", "README.md", "REQUIRES.txt", "mirror.sh", "site/index.html", "site/practice/index.html",
		"scripts/practice.sh", "scripts/kubeadm-ha.sh", "scripts/cilium-multipool.sh", "scripts/ccm-leader-migration.sh",
		"manifests/practice/apply-objects.yaml", "runbooks/practice.md", "bin/cairn-linux-amd64"} {
		found := false
		for _, n := range names {
			found = found || n == export.BundleRoot+"/"+want
		}
		if !found {
			t.Errorf("bundle lacks %s", want)
		}
	}
	root := filepath.Join(dir, export.BundleRoot)
	req, _ := os.ReadFile(filepath.Join(root, "REQUIRES.txt"))
	for _, w := range []string{"image   quay.io/cilium/cilium (cilium-multipool)", "chart   cilium/cilium (cilium-multipool)", "binary  kubectl (kubeadm-ha, ccm-leader-migration, cilium-multipool)"} {
		if !strings.Contains(string(req), w) {
			t.Errorf("REQUIRES.txt lacks %q:\n%s", w, req)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "scripts", "practice.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("script mode: %v %v", fi, err)
	}
	if sc, err := exec.LookPath("shellcheck"); err == nil {
		runShellcheck(t, sc, filepath.Join(root, "mirror.sh"))
	}
	// A runbook that needs what the bundle cannot hold fails the bundle.
	if err := export.CheckOffline(map[string][]byte{"index.html": []byte(`<link rel=stylesheet href="https://fonts.example.com/a.css">`)}); err == nil {
		t.Error("an external style sheet passed the offline check")
	}
	if err := export.CheckOffline(map[string][]byte{"a.css": []byte(`@import "//cdn.example.com/x.css";`)}); err == nil {
		t.Error("a protocol-relative import passed the offline check")
	}
	if err := export.CheckOffline(map[string][]byte{"a.html": []byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg><code>curl https://127.0.0.1:10257/healthz https://ETCD_0_IP:2379</code>`)}); err != nil {
		t.Errorf("namespaces, loopback and placeholders are not network: %v", err)
	}
}

// TestBundleOffline unpacks the bundle and checks it inside a network
// namespace with no network: the MANIFEST verifies and the scripts run
// (--list, --help, --dry-run); then every page opens from file:// in
// headless Chromium without a single request that is not file: or data:.
func TestBundleOffline(t *testing.T) {
	dir := t.TempDir()
	unpack(t, buildBundle(t), dir)
	root := filepath.Join(dir, export.BundleRoot)

	t.Run("netns", func(t *testing.T) {
		unshare, err := exec.LookPath("unshare")
		if err != nil || os.Geteuid() != 0 {
			if testrig.InCI() {
				t.Fatalf("the offline check needs root and unshare under CI=true (euid %d, %v)", os.Geteuid(), err)
			}
			t.Skip("skipping: needs root and unshare (util-linux) for a network namespace")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		check := `set -e
ifaces=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' /proc/net/dev)
[ "$ifaces" = lo ] || { echo "network interfaces: $ifaces"; exit 1; }
sha256sum -c --quiet MANIFEST
echo MANIFEST-OK
for s in scripts/*.sh; do "$s" --list >/dev/null; "$s" --help >/dev/null; done
scripts/practice.sh --dry-run --log "$PWD/dry.log" >dry.out
grep -q 'would run kubectl' dry.out
grep -q 'cairn-practice' dry.out
echo SCRIPTS-OK`
		cmd := exec.CommandContext(ctx, unshare, "--net", "bash", "-c", check)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "MANIFEST-OK") || !strings.Contains(string(out), "SCRIPTS-OK") {
			t.Fatalf("offline check: %v\n%s", err, out)
		}
	})

	t.Run("chromium", func(t *testing.T) {
		// Chromium itself runs in a network namespace with no network, and
		// every request it makes is listened to as well.
		ctx := testrig.OfflineBrowser(t)
		var mu sync.Mutex
		var requests []string
		err := chromedp.Listen(ctx, func(ev any) {
			if e, ok := ev.(*network.EventRequestWillBeSent); ok {
				mu.Lock()
				requests = append(requests, e.Request.URL)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var pages []string
		err = filepath.WalkDir(filepath.Join(root, "site"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".html") {
				pages = append(pages, p)
			}
			return err
		})
		if err != nil || len(pages) < 5 {
			t.Fatalf("pages: %v %v", pages, err)
		}
		for _, p := range pages {
			u := "file://" + filepath.ToSlash(p)
			if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("document.readyState === 'complete'", chromedp.WithPollingTimeout(20*time.Second))); err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if err := chromedp.Do(ctx, chromedp.Sleep(300*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			title, err := chromedp.Run(ctx, chromedp.Title())
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if title == "" {
				t.Errorf("%s: no title", u)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		local := 0
		for _, r := range requests {
			switch {
			case strings.HasPrefix(r, "file://"), strings.HasPrefix(r, "data:"):
				local++
			default:
				t.Errorf("network request from the bundled site: %s", r)
			}
		}
		if local < len(pages) {
			t.Errorf("saw %d requests for %d pages: is the listener working?", local, len(pages))
		}
	})
}
