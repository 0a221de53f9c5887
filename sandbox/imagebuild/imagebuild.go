// Package imagebuild writes container images as Docker archives from
// programs built here and files of this machine, with the shared libraries
// they load: the sandbox's node images (kubeadm's control plane, the CCM
// and Cilium runbooks' images), which no registry serves here. It knows no
// image in particular; the sandbox's catalog (sandbox/images.go) does.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// DefaultPATH is an image's PATH when its Spec gives no Env: /usr/local
// first, where the programs built here go. The sandbox's nodes use it too.
const DefaultPATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultEnv is an image's environment when its Spec gives none.
var DefaultEnv = []string{DefaultPATH}

// ErrMissing is wrapped by MissingError: a prerequisite (a program, a
// Debian package) is not installed.
var ErrMissing = errors.New("missing prerequisite")

// MissingError reports a prerequisite that is not installed and how to
// install it. It wraps ErrMissing. (The sandbox reports its own missing
// prerequisites with it too: sandbox.MissingError is this type.)
type MissingError struct {
	Name    string // what is missing, e.g. "sshd"
	Where   string // where it was looked for
	Install string // the command that installs it
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s not found (looked in %s); install it with: %s", e.Name, e.Where, e.Install)
}

// Unwrap makes errors.Is(err, ErrMissing) true.
func (e *MissingError) Unwrap() error { return ErrMissing }

// Spec is one image: where its files come from and the name it is
// archived under.
type Spec struct {
	Ref string // registry.k8s.io/kube-apiserver:v1.37.2
	// Bins are files of the bin directory, put at /usr/local/bin/NAME, at
	// Paths[NAME], or at Entrypoint[0] when that names the first one.
	Bins       []string
	Paths      map[string]string
	Entrypoint []string
	// Dir is the subdirectory of the images directory the archive goes
	// to ("" for none).
	Dir string
	// System are programs of this machine copied in with the shared
	// libraries they load (kube-proxy's iptables), and Links are symlinks
	// (name → target) beside them.
	System []string
	Links  map[string]string
	// Dirs of this machine copied whole (iptables' extensions).
	Dirs []string
	// Trees are directories of the bin directory copied whole, by the
	// path they get in the image (Cilium's datapath sources).
	Trees map[string]string
	// Workdir is the image's working directory ("" for /).
	Workdir string
	// Env is the image's environment (KEY=value); default DefaultEnv.
	Env []string
}

// Archive is the path of the image's archive below the images directory.
func (im Spec) Archive() string {
	name := im.Ref
	if host, rest, ok := strings.Cut(name, "/"); ok && strings.Contains(host, ".") {
		name = rest
	}
	return filepath.Join(im.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
}

// Ensure writes the archive of every spec that is not in dir yet, or is
// older than a program it holds (a rebuilt binary), and returns their
// paths. Programs (Bins, Trees) are read from binDir. An archive is a Docker
// archive (what `ctr images import` and `docker load` read), written to a
// temporary name and renamed, with fixed times so that its digest depends
// only on its files.
func Ensure(ctx context.Context, dir, binDir string, specs []Spec, progress func(string)) ([]string, error) {
	var paths []string
	for _, im := range specs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		path := filepath.Join(dir, im.Archive())
		paths = append(paths, path)
		if current(path, binDir, im.Bins) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(fmt.Sprintf("images: writing %s (%s)", im.Ref, path))
		}
		if err := Write(path, binDir, im); err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Ref, err)
		}
	}
	return paths, nil
}

// current reports whether the archive at path exists and is newer than
// every one of bins.
func current(path, binDir string, bins []string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	for _, b := range bins {
		if bi, err := os.Stat(filepath.Join(binDir, b)); err == nil && bi.ModTime().After(fi.ModTime()) {
			return false
		}
	}
	return true
}

// imageFile is one regular file, directory or symlink of a layer.
type imageFile struct {
	name string // path in the image, without the leading slash
	src  string // file of this machine ("" for dirs, links and data)
	data []byte
	link string
	mode int64
	dir  bool
}

// Write writes the image's Docker archive at path (through a temporary
// file and a rename: a reader never sees half an archive).
func Write(path, binDir string, im Spec) error {
	files, err := imageFiles(binDir, im)
	if err != nil {
		return err
	}
	// The layer goes to a temporary file, hashed on the way: the Cilium
	// agent's is a quarter of a gigabyte (clang and LLVM).
	layer, err := os.CreateTemp(filepath.Dir(path), ".layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	defer layer.Close()
	h := sha256.New()
	if err := writeLayer(io.MultiWriter(layer, h), files); err != nil {
		return err
	}
	layerSize, err := layer.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	layerSum := hex.EncodeToString(h.Sum(nil))
	env := im.Env
	if env == nil {
		env = DefaultEnv
	}
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":        env,
			"Entrypoint": im.Entrypoint,
			"WorkingDir": im.Workdir,
			"Labels":     map[string]string{"dev.cairn.sandbox": "built from source by cairn sandbox; see sandbox/images.go"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerSum}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfgJSON)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := layerSum + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{im.Ref}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	tw := tar.NewWriter(tmp)
	if err := addTarData(tw, cfgName, bytes.NewReader(cfgJSON), int64(len(cfgJSON)), 0o644); err != nil {
		return err
	}
	if err := addTarData(tw, layerName, layer, layerSize, 0o644); err != nil {
		return err
	}
	if err := addTarData(tw, "manifest.json", bytes.NewReader(manifest), int64(len(manifest)), 0o644); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// imageFiles lists an image's files: its binaries, the system programs with
// their libraries, and the few files every image has (/etc/passwd, /tmp).
func imageFiles(binDir string, im Spec) ([]imageFile, error) {
	var files []imageFile
	seen := map[string]bool{}
	add := func(f imageFile) {
		f.name = strings.TrimPrefix(f.name, "/")
		if seen[f.name] {
			return
		}
		// Parent directories first, as a tar from a filesystem has them.
		for d := filepath.Dir(f.name); d != "." && !seen[d]; d = filepath.Dir(d) {
			seen[d] = true
			files = append(files, imageFile{name: d, dir: true, mode: 0o755})
		}
		seen[f.name] = true
		files = append(files, f)
	}
	add(imageFile{name: "etc/passwd", data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"), mode: 0o644})
	add(imageFile{name: "etc/group", data: []byte("root:x:0:\nnogroup:x:65534:\n"), mode: 0o644})
	add(imageFile{name: "tmp", dir: true, mode: 0o1777})
	for i, b := range im.Bins {
		src := filepath.Join(binDir, b)
		if _, err := os.Stat(src); err != nil {
			return nil, &MissingError{Name: b, Where: binDir, Install: "scripts/sandbox-bins.sh"}
		}
		dst := "/usr/local/bin/" + b
		if p, ok := im.Paths[b]; ok {
			dst = p
		} else if i == 0 && len(im.Entrypoint) > 0 {
			dst = im.Entrypoint[0]
		}
		add(imageFile{name: dst, src: src, mode: 0o755})
	}
	var libs []string
	for _, p := range append(slices.Clone(im.System), im.Dirs...) {
		if _, err := os.Stat(p); err != nil {
			return nil, &MissingError{Name: p, Where: "this machine", Install: "scripts/ci-deps.sh (Debian packages)"}
		}
	}
	for _, p := range im.System {
		add(imageFile{name: p, src: p, mode: 0o755})
		libs = append(libs, p)
	}
	for _, d := range im.Dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if e.Type()&fs.ModeSymlink != 0 {
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				add(imageFile{name: p, link: t, mode: 0o777})
				return nil
			}
			add(imageFile{name: p, src: p, mode: 0o644})
			libs = append(libs, p)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(libs) > 0 {
		deps, err := sharedLibs(libs)
		if err != nil {
			return nil, err
		}
		for _, l := range deps {
			add(imageFile{name: l, src: l, mode: 0o755})
		}
	}
	trees := make([]string, 0, len(im.Trees))
	for dst := range im.Trees {
		trees = append(trees, dst)
	}
	sort.Strings(trees)
	for _, dst := range trees {
		root := filepath.Join(binDir, im.Trees[dst])
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return &MissingError{Name: im.Trees[dst], Where: binDir, Install: "scripts/sandbox-bins.sh"}
				}
				return err
			}
			rel, _ := filepath.Rel(root, p)
			name := filepath.Join(dst, rel)
			switch {
			case e.IsDir():
				add(imageFile{name: name, dir: true, mode: 0o755})
			case e.Type()&fs.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				add(imageFile{name: name, link: t, mode: 0o777})
			default:
				add(imageFile{name: name, src: p, mode: 0o644})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if im.Workdir != "" {
		add(imageFile{name: im.Workdir, dir: true, mode: 0o755})
	}
	names := make([]string, 0, len(im.Links))
	for n := range im.Links {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(imageFile{name: n, link: im.Links[n], mode: 0o777})
	}
	return files, nil
}

// sharedLibs returns the shared libraries (resolved, real paths) that the
// ELF files load, as ldd reports them, sorted.
func sharedLibs(files []string) ([]string, error) {
	ldd, err := exec.LookPath("ldd")
	if err != nil {
		return nil, &MissingError{Name: "ldd", Where: "PATH", Install: "apt-get install -y libc-bin"}
	}
	set := map[string]bool{}
	for _, f := range files {
		if !isELF(f) {
			continue // headers, scripts: one ldd each would cost seconds
		}
		out, err := exec.Command(ldd, f).Output()
		if err != nil {
			// Not dynamic (or not ELF): nothing to add.
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			var p string
			switch {
			case len(fields) >= 3 && fields[1] == "=>":
				p = fields[2]
			case len(fields) >= 1 && strings.HasPrefix(fields[0], "/"):
				p = fields[0]
			}
			if strings.HasPrefix(p, "/") {
				// clang's libraries are found through $ORIGIN/../lib.
				set[filepath.Clean(p)] = true
			}
		}
	}
	var out []string
	for p := range set {
		// The image gets the file under the name the loader asks for
		// (writeLayer copies the content a symlink resolves to).
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// isELF reports whether the file starts with the ELF magic.
func isELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = io.ReadFull(f, magic[:])
	return err == nil && string(magic[:]) == "\x7fELF"
}

func writeLayer(w io.Writer, files []imageFile) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Format: tar.FormatPAX}
		var src *os.File
		switch {
		case f.dir:
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		case f.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.link
		case f.src != "":
			// Read through symlinks: a library is stored under the name
			// the loader asks for.
			var err error
			if src, err = os.Open(f.src); err != nil {
				return err
			}
			fi, err := src.Stat()
			if err != nil {
				src.Close()
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			if src != nil {
				src.Close()
			}
			return err
		}
		switch {
		case src != nil:
			_, err := io.Copy(tw, src)
			src.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", f.src, err)
			}
		case h.Typeflag == tar.TypeReg:
			if _, err := tw.Write(f.data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func addTarData(tw *tar.Writer, name string, r io.Reader, size, mode int64) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: size}); err != nil {
		return err
	}
	_, err := io.Copy(tw, r)
	return err
}
