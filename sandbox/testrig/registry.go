package testrig

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/mirror"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
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
	return RegistryCached(t, dir, "", archives)
}

// RegistryCached is Registry with the images' compressed layers kept in
// cache (an OCI layout, rebuilt when an archive changes): pushing from it
// copies bytes, where pushing an archive compresses every layer twice
// (once for its digest, once to send it) — 30 s or more of both cores for
// the sandbox's node images, every run.
func RegistryCached(t testing.TB, dir, cache string, archives map[string]string) string {
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

	images := map[string]v1.Image{}
	if cache != "" {
		if images, err = cachedImages(cache, archives); err != nil {
			t.Fatalf("registry: %v", err)
		}
	} else {
		for ref, archive := range archives {
			tag, err := name.NewTag(ref)
			if err != nil {
				t.Fatalf("registry: %s: %v", ref, err)
			}
			if images[ref], err = tarball.ImageFromPath(archive, &tag); err != nil {
				t.Fatalf("registry: %s from %s: %v", ref, archive, err)
			}
		}
	}
	// Two at a time.
	type push struct {
		ref string
		img v1.Image
	}
	work := make(chan push)
	errs := make(chan error, len(images))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				errs <- pushImage(host, p.ref, p.img)
			}
		}()
	}
	for ref, img := range images {
		work <- push{ref, img}
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

func pushImage(host, ref string, img v1.Image) error {
	dst, err := name.NewTag(host + "/" + strings.TrimPrefix(ref, "docker.io/"))
	if err != nil {
		return err
	}
	if err := remote.Write(dst, img); err != nil {
		return fmt.Errorf("push %s: %w", dst, err)
	}
	return nil
}

// cachedImages are the archives' images read from the layout in cache,
// written there first when it is missing or was made from other archives
// (a stamp of each archive's path, size and time says which).
func cachedImages(cache string, archives map[string]string) (map[string]v1.Image, error) {
	refs := make([]string, 0, len(archives))
	for ref := range archives {
		refs = append(refs, ref)
	}
	sort.Strings(refs)
	var stamp strings.Builder
	for _, ref := range refs {
		fi, err := os.Stat(archives[ref])
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&stamp, "%s %s %d %d\n", ref, archives[ref], fi.Size(), fi.ModTime().UnixNano())
	}
	stampFile := filepath.Join(cache, "cairn-stamp")
	if old, err := os.ReadFile(stampFile); err != nil || string(old) != stamp.String() {
		tmp := cache + ".part"
		os.RemoveAll(tmp)
		p, err := layout.Write(tmp, empty.Index)
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			tag, err := name.NewTag(ref)
			if err != nil {
				return nil, err
			}
			img, err := tarball.ImageFromPath(archives[ref], &tag)
			if err != nil {
				return nil, fmt.Errorf("%s from %s: %w", ref, archives[ref], err)
			}
			if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{mirror.AnnotationRefName: ref})); err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, "cairn-stamp"), []byte(stamp.String()), 0o644); err != nil {
			return nil, err
		}
		os.RemoveAll(cache)
		if err := os.Rename(tmp, cache); err != nil {
			return nil, err
		}
	}
	p, err := layout.FromPath(cache)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		ref := d.Annotations[mirror.AnnotationRefName]
		if archives[ref] == "" {
			continue
		}
		if out[ref], err = p.Image(d.Digest); err != nil {
			return nil, fmt.Errorf("%s in %s: %w", ref, cache, err)
		}
	}
	if len(out) != len(archives) {
		return nil, fmt.Errorf("%s holds %d of the %d images; remove it to rebuild", cache, len(out), len(archives))
	}
	return out, nil
}
