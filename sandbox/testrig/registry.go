package testrig

import (
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry starts an OCI registry on loopback for the test (the
// distribution-spec registry of go-containerregistry, blobs on disk in
// dir) and pushes images to it: ref → a Docker archive holding it (what
// the sandbox builds). Each image lands at HOST/REGISTRY/REPO:TAG, so that
// `--from REGISTRY=HOST/REGISTRY` finds it. It returns HOST (127.0.0.1:port).
func Registry(t testing.TB, dir string, archives map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	host := ln.Addr().String()
	for ref, archive := range archives {
		tag, err := name.NewTag(ref)
		if err != nil {
			t.Fatalf("registry: %s: %v", ref, err)
		}
		img, err := tarball.ImageFromPath(archive, &tag)
		if err != nil {
			t.Fatalf("registry: %s from %s: %v", ref, archive, err)
		}
		dst, err := name.NewTag(host + "/" + strings.TrimPrefix(ref, "docker.io/"))
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(dst, img); err != nil {
			t.Fatalf("registry: push %s: %v", dst, err)
		}
	}
	return host
}
