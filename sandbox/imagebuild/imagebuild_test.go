package imagebuild

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestWriteArchive: an archive is one manifest naming the image, a config
// whose diff_id is the layer's, and a layer with the programs at their
// paths, parents first; a missing program names what installs it and no
// temporary file is left.
func TestWriteArchive(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "hello"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Ref: "example.internal/hello:v1", Bins: []string{"hello"}, Entrypoint: []string{"/hello"},
		Links: map[string]string{"/bin/hi": "/hello"}, Workdir: "/work", Dir: "sub"}
	if got, want := spec.Archive(), filepath.Join("sub", "hello_v1.tar"); got != want {
		t.Errorf("Archive() = %q, want %q", got, want)
	}
	out := t.TempDir()
	paths, err := Ensure(context.Background(), out, bin, []Spec{spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	f, err := os.Open(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	if !slices.Equal(manifest[0].RepoTags, []string{spec.Ref}) {
		t.Errorf("RepoTags %v", manifest[0].RepoTags)
	}
	var cfg struct {
		Config struct {
			Env        []string
			Entrypoint []string
			WorkingDir string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[manifest[0].Config], &cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Config.Env, DefaultEnv) || !slices.Equal(cfg.Config.Entrypoint, spec.Entrypoint) || cfg.Config.WorkingDir != "/work" {
		t.Errorf("config %+v", cfg.Config)
	}
	if len(cfg.RootFS.DiffIDs) != 1 || "sha256:"+strings.TrimSuffix(manifest[0].Layers[0], "/layer.tar") != cfg.RootFS.DiffIDs[0] {
		t.Errorf("diff_ids %v, layers %v", cfg.RootFS.DiffIDs, manifest[0].Layers)
	}
	var names []string
	lr := tar.NewReader(strings.NewReader(string(files[manifest[0].Layers[0]])))
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"etc/passwd", "tmp/", "hello", "work/", "bin/", "bin/hi"} {
		if !slices.Contains(names, want) {
			t.Errorf("layer has no %s: %v", want, names)
		}
	}

	_, err = Ensure(context.Background(), out, t.TempDir(), []Spec{{Ref: "x.internal/gone:v1", Bins: []string{"gone"}}}, nil)
	var me *MissingError
	if !errors.As(err, &me) || me.Name != "gone" || !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "image x.internal/gone:v1: ") {
		t.Errorf("missing program: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(out, "*", ".*-*.tar")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
