package testrig

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
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
	// Two at a time: pushing compresses every layer (most of the time).
	type push struct{ ref, archive string }
	work := make(chan push)
	errs := make(chan error, len(archives))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				errs <- pushArchive(host, p.ref, p.archive)
			}
		}()
	}
	for ref, archive := range archives {
		work <- push{ref, archive}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("registry: %v", err)
		}
	}
	return host
}

func pushArchive(host, ref, archive string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		return fmt.Errorf("%s from %s: %w", ref, archive, err)
	}
	dst, err := name.NewTag(host + "/" + strings.TrimPrefix(ref, "docker.io/"))
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img); err != nil {
		return fmt.Errorf("push %s: %w", dst, err)
	}
	return nil
}
