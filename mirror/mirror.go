// Package mirror brings what runbooks require (front matter requires.images
// and requires.charts) onto the connected side of an air gap: container
// images copied from a registry into one OCI image layout (what Hauler,
// skopeo, crane, oras and `ctr images import` read), and Helm charts as
// .tgz files. cmd/cairn packs both into the offline bundle (package
// export).
//
// Images are copied with go-containerregistry, which checks every blob
// against its digest as it reads it; an image pinned by digest that the
// registry serves differently fails with the image's name.
package mirror

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations every image in the layout carries: the OCI name (skopeo's
// oci:DIR:REF, Hauler, oras) and containerd's, so that `ctr images import`
// of the layout names the image as the runbook and kubeadm know it.
const (
	AnnotationRefName   = "org.opencontainers.image.ref.name"
	AnnotationContainer = "io.containerd.image.name"
)

// Resolve gives every required image a tag or digest: as written when it
// has one, else from list (full references, such as `kubeadm config images
// list` prints), matched by repository. Images of list that no runbook
// names are kept too. What stays without a version is an error that names
// every such image.
func Resolve(required, list []string) ([]string, error) {
	byRepo := map[string][]string{}
	seen := map[string]bool{}
	var out, untagged []string
	add := func(ref string) {
		if !seen[ref] {
			seen[ref] = true
			out = append(out, ref)
		}
	}
	for _, l := range list {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		ref, err := name.ParseReference(l)
		if err != nil || !hasVersion(l) {
			return nil, fmt.Errorf("image list: %q: %v (give full references: registry/repository:tag or @sha256:…)", l, err)
		}
		repo := ref.Context().Name()
		byRepo[repo] = append(byRepo[repo], canonical(l))
	}
	for _, r := range required {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if hasVersion(r) {
			if _, err := name.ParseReference(r); err != nil {
				return nil, fmt.Errorf("requires.images: %q: %v", r, err)
			}
			add(canonical(r))
			continue
		}
		repo, err := name.NewRepository(r)
		if err != nil {
			return nil, fmt.Errorf("requires.images: %q: %v", r, err)
		}
		refs := byRepo[repo.Name()]
		if len(refs) == 0 {
			untagged = append(untagged, r)
			continue
		}
		for _, ref := range refs {
			add(ref)
		}
	}
	if len(untagged) > 0 {
		return nil, fmt.Errorf("%d required images have no tag: %s\n  give the versions your site runs in an image list (--images FILE: one full reference per line, e.g. the output of kubeadm config images list), or pin them in the runbooks' requires.images",
			len(untagged), strings.Join(untagged, ", "))
	}
	for _, refs := range byRepo {
		for _, ref := range refs {
			add(ref)
		}
	}
	sort.Strings(out)
	return out, nil
}

// hasVersion: the reference names a tag or a digest (ParseReference
// cannot say: it supplies "latest").
func hasVersion(s string) bool {
	return strings.Contains(s, "@") || strings.Contains(s[strings.LastIndexByte(s, '/')+1:], ":")
}

// canonical is a reference written out in full, as containerd and kubelet
// name it (docker.io/library/nginx:1, not go-containerregistry's
// index.docker.io).
func canonical(s string) string {
	ref, err := name.ParseReference(s)
	if err != nil {
		return s
	}
	n := ref.Name()
	if rest, ok := strings.CutPrefix(n, name.DefaultRegistry+"/"); ok {
		n = "docker.io/" + rest
	}
	return n
}

// Options of Images.
type Options struct {
	// From maps a registry, or a registry and path prefix, to where the
	// images are pulled from instead ("registry.k8s.io" →
	// "mirror.example:5000/k8s"): the site's connected mirror, or in tests
	// a registry on loopback. The image keeps its own name in the layout.
	From map[string]string
	// Platform picks one image of a multi-platform index (default
	// linux/amd64).
	Platform v1.Platform
	// Progress is told about each image as it is copied.
	Progress func(string)
}

// Pulled is one image in the layout.
type Pulled struct {
	Ref    string // as the runbooks and the site know it
	Source string // where it was pulled from
	Digest string // the manifest's digest in the layout
	Pulled string // the manifest's digest as the registry served it (differs when converted to OCI)
	Size   int64  // bytes of its blobs
}

// Images copies refs into an OCI image layout at dir (created; it must
// not hold one already). On error the layout may be partial: the caller
// removes dir.
func Images(ctx context.Context, refs []string, dir string, opts Options) ([]Pulled, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return nil, fmt.Errorf("%s already holds an image layout", dir)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return nil, err
	}
	plat := opts.Platform
	if plat.OS == "" {
		plat = v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	var out []Pulled
	for i, r := range refs {
		src := source(r, opts.From)
		if opts.Progress != nil {
			msg := fmt.Sprintf("image %d/%d %s", i+1, len(refs), r)
			if src != r {
				msg += " (from " + src + ")"
			}
			opts.Progress(msg)
		}
		ref, err := name.ParseReference(src)
		if err != nil {
			return out, fmt.Errorf("image %s: %v", r, err)
		}
		img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(plat), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return out, fmt.Errorf("image %s: pull %s: %w", r, src, err)
		}
		pulledDigest, err := img.Digest()
		if err != nil {
			return out, fmt.Errorf("image %s: %w", r, describe(err))
		}
		if img, err = toOCI(img); err != nil {
			return out, fmt.Errorf("image %s: %w", r, describe(err))
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{AnnotationRefName: r, AnnotationContainer: r})); err != nil {
			return out, fmt.Errorf("image %s: %w", r, describe(err))
		}
		dg, err := img.Digest()
		if err != nil {
			return out, fmt.Errorf("image %s: %w", r, err)
		}
		var size int64
		if m, err := img.Manifest(); err == nil {
			size = m.Config.Size
			for _, l := range m.Layers {
				size += l.Size
			}
		}
		out = append(out, Pulled{Ref: r, Source: src, Digest: dg.String(), Pulled: pulledDigest.String(), Size: size})
	}
	return out, nil
}

// toOCI gives a Docker schema 2 image as an OCI image: the same layers
// (a gzip'd tar is a gzip'd tar) and configuration under OCI media types.
// An OCI image layout is meant to hold OCI manifests, and some readers
// (skopeo's oci: transport among them) skip any other.
func toOCI(img v1.Image) (v1.Image, error) {
	mt, err := img.MediaType()
	if err != nil || mt != types.DockerManifestSchema2 {
		return img, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		lmt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		switch lmt {
		case types.DockerLayer:
			lmt = types.OCILayer
		case types.DockerUncompressedLayer:
			lmt = types.OCIUncompressedLayer
		case types.DockerForeignLayer:
			lmt = types.OCIRestrictedLayer
		}
		adds[i] = mutate.Addendum{Layer: l, MediaType: lmt}
	}
	oci, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, err
	}
	// The image's own configuration (history, diff IDs), not Append's.
	return mutate.ConfigFile(oci, cfg)
}

// describe names a digest mismatch as such: go-containerregistry reports
// it from deep inside a blob's reader.
func describe(err error) error {
	if strings.Contains(err.Error(), "error verifying") || strings.Contains(err.Error(), "digest") && strings.Contains(err.Error(), "mismatch") {
		return fmt.Errorf("a blob does not match its digest (the registry serves other content than the image's manifest names): %w", err)
	}
	return err
}

// source is where ref is pulled from, by the longest From key that is its
// registry or a path prefix of its repository.
func source(r string, from map[string]string) string {
	full := canonical(r)
	best := ""
	for k := range from {
		if (full == k || strings.HasPrefix(full, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return full
	}
	return strings.TrimSuffix(from[best], "/") + strings.TrimPrefix(full, best)
}

// ParseFrom reads --from flags: ORIGIN=MIRROR.
func ParseFrom(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || v == "" || strings.Contains(k, "://") || strings.Contains(v, "://") {
			return nil, fmt.Errorf("--from %q: use REGISTRY[/PREFIX]=MIRROR[/PREFIX], without a scheme (registry.k8s.io=127.0.0.1:5000/k8s)", f)
		}
		out[strings.TrimSuffix(k, "/")] = v
	}
	return out, nil
}
