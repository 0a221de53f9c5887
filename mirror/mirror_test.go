package mirror_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cairn-dev/cairn/mirror"
)

func TestResolve(t *testing.T) {
	list := []string{
		"# kubeadm config images list",
		"registry.k8s.io/kube-apiserver:v1.37.2",
		"registry.k8s.io/pause:3.10.2",
		"",
		"registry.k8s.io/coredns/coredns:v1.14.6",
	}
	got, err := mirror.Resolve([]string{"registry.k8s.io/kube-apiserver", "registry.k8s.io/pause", "busybox:1.37", "registry.k8s.io/coredns/coredns"}, list)
	if err != nil {
		t.Fatal(err)
	}
	want := "docker.io/library/busybox:1.37 registry.k8s.io/coredns/coredns:v1.14.6 registry.k8s.io/kube-apiserver:v1.37.2 registry.k8s.io/pause:3.10.2"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	for _, c := range []struct {
		req, list []string
		want      string
	}{
		{[]string{"quay.io/cilium/cilium", "registry.k8s.io/etcd"}, nil, "2 required images have no tag: quay.io/cilium/cilium, registry.k8s.io/etcd"},
		{[]string{"x"}, []string{"not a ref!"}, `image list: "not a ref!"`},
		{[]string{"UPPER/case"}, nil, `requires.images: "UPPER/case"`},
	} {
		if _, err := mirror.Resolve(c.req, c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: got %v, want %q", c.req, c.list, err, c.want)
		}
	}
}

// registryOn serves go-containerregistry's registry (an implementation of
// the OCI distribution spec) on loopback; corrupt, when set, changes the
// bytes of every blob it serves.
func registryOn(t *testing.T, corrupt *atomic.Bool) string {
	t.Helper()
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if corrupt.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/sha256:") {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// TestImages copies images from a real registry on loopback into an OCI
// layout, as the bundle's images/, under the names the runbooks use; a
// blob that does not match its digest and a digest the registry does not
// have fail with the image's name.
func TestImages(t *testing.T) {
	var corrupt atomic.Bool
	reg := registryOn(t, &corrupt)
	a, _ := random.Image(2048, 2)
	b, _ := random.Image(1024, 1)
	push(t, reg+"/k8s/kube-apiserver:v1.37.2", a)
	push(t, reg+"/k8s/pause:3.10.2", b)

	from, err := mirror.ParseFrom([]string{"registry.k8s.io=" + reg + "/k8s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "images")
	var said []string
	got, err := mirror.Images(ctx, []string{"registry.k8s.io/kube-apiserver:v1.37.2", "registry.k8s.io/pause:3.10.2"}, dir,
		mirror.Options{From: from, Progress: func(s string) { said = append(said, s) }})
	if err != nil {
		t.Fatal(err)
	}
	ad, _ := a.Digest()
	if len(got) != 2 || got[0].Pulled != ad.String() || got[0].Digest == got[0].Pulled || got[0].Source != reg+"/k8s/kube-apiserver:v1.37.2" || got[0].Size == 0 {
		t.Fatalf("pulled %+v", got)
	}
	if len(said) != 2 || !strings.Contains(said[0], "image 1/2 registry.k8s.io/kube-apiserver:v1.37.2 (from ") {
		t.Errorf("progress %q", said)
	}
	// The layout: what skopeo's oci: transport and Hauler read.
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 2 || im.Manifests[0].Annotations[mirror.AnnotationRefName] != "registry.k8s.io/kube-apiserver:v1.37.2" ||
		im.Manifests[1].Annotations[mirror.AnnotationContainer] != "registry.k8s.io/pause:3.10.2" {
		raw, _ := json.MarshalIndent(im, "", " ")
		t.Fatalf("index.json:\n%s", raw)
	}
	if mt := im.Manifests[0].MediaType; mt != types.OCIManifestSchema1 {
		t.Errorf("carried as %s, not as an OCI manifest", mt)
	}
	// skopeo (containers/image) reads the layout by the names the runbooks use.
	if sk, err := exec.LookPath("skopeo"); err == nil {
		out, err := exec.Command(sk, "inspect", "--raw", "oci:"+dir+":registry.k8s.io/pause:3.10.2").CombinedOutput()
		if err != nil || !strings.Contains(string(out), string(types.OCIManifestSchema1)) {
			t.Errorf("skopeo inspect: %v\n%s", err, out)
		}
	} else if os.Getenv("CI") == "true" {
		t.Error("skopeo is not installed (scripts/ci-deps.sh installs it)")
	}
	back, err := p.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if layers, err := back.Layers(); err != nil || len(layers) != 2 {
		t.Errorf("layers %d %v", len(layers), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		t.Error(err)
	}

	// Pinned by a digest the registry does not have.
	wrong := "registry.k8s.io/pause@sha256:" + strings.Repeat("0", 64)
	_, err = mirror.Images(ctx, []string{wrong}, filepath.Join(t.TempDir(), "x"), mirror.Options{From: from})
	if err == nil || !strings.Contains(err.Error(), "image "+wrong) {
		t.Errorf("wrong digest: %v", err)
	}
	// The registry serves other bytes than the digests name.
	corrupt.Store(true)
	_, err = mirror.Images(ctx, []string{"registry.k8s.io/kube-apiserver:v1.37.2"}, filepath.Join(t.TempDir(), "y"), mirror.Options{From: from})
	corrupt.Store(false)
	if err == nil || !strings.Contains(err.Error(), "image registry.k8s.io/kube-apiserver:v1.37.2") {
		t.Errorf("corrupt blob: %v", err)
	}
	t.Logf("corrupt blob: %v", err)
	// A layout is never appended to.
	if _, err := mirror.Images(ctx, nil, dir, mirror.Options{}); err == nil {
		t.Error("wrote into an existing layout")
	}
}

func TestParseFrom(t *testing.T) {
	for _, bad := range []string{"noequals", "=x", "x=", "https://a=b", "a=http://b"} {
		if _, err := mirror.ParseFrom([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
