package sandbox

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

// Image versions kubeadm KubeVersion names (`kubeadm config images list`).
// The binaries come from scripts/sandbox-bins.sh, built at these releases.
const (
	ImageEtcdTag    = "3.7.0-0"
	ImageCoreDNSTag = "v1.14.6"
	ImagePauseTag   = "3.10.2"
	imageRegistry   = "registry.k8s.io"
	// sandboxRegistry names images no registry serves: the sandbox's own
	// builds for the CCM runbook, which stand for a cloud provider's.
	sandboxRegistry = "cairn.internal"
)

// The CCM runbook's two controller managers as images, both with the
// fake cloud provider: version N's kube-controller-manager (v1.30, which
// still runs cloud controllers) and the N+1 cloud-controller-manager. They
// are archived in ImagesDir/ccm, apart from the images kubeadm lists, so
// that the kubeadm runbook's import leaves them out.
var (
	ImageKCMN = sandboxRegistry + "/kube-controller-manager:" + KCMNVersion
	ImageCCM  = sandboxRegistry + "/cloud-controller-manager:" + KubeVersion
)

// CCMImagesDir is the subdirectory of ImagesDir holding ImageKCMN and
// ImageCCM.
const CCMImagesDir = "ccm"

// NodeImage is one image a sandbox node's runtime holds, under the name and
// tag kubeadm asks for, so that kubelet never pulls (no registry is
// reachable here, and kubeadm's static pods and addons use IfNotPresent).
type NodeImage struct {
	Ref string // registry.k8s.io/kube-apiserver:v1.37.2
	// Bins are files of the bin directory, put at /usr/local/bin/NAME, at
	// Paths[NAME], or at Entrypoint[0] when that names the first one.
	Bins       []string
	Paths      map[string]string
	Entrypoint []string
	// Dir is the subdirectory of ImagesDir the archive goes to ("" for
	// the images kubeadm lists).
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
}

// Archive is the path of the image's archive below the images directory.
func (im NodeImage) Archive() string {
	name := im.Ref
	if host, rest, ok := strings.Cut(name, "/"); ok && strings.Contains(host, ".") {
		name = rest
	}
	return filepath.Join(im.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(name)+".tar")
}

// NodeImages are the images kubeadm KubeVersion's control plane and addons
// run, as the sandbox builds them: each holds the program built from the
// release kubeadm names, in the path kubeadm's manifests call it by.
func NodeImages() []NodeImage {
	kube := func(name string) NodeImage {
		return NodeImage{Ref: imageRegistry + "/" + name + ":" + KubeVersion, Bins: []string{name}}
	}
	proxy := kube("kube-proxy")
	// kube-proxy (iptables mode, its default) runs iptables-restore and
	// friends; Debian's are the nf_tables flavour, one multi-call binary.
	proxy.System = []string{"/usr/sbin/xtables-nft-multi"}
	proxy.Dirs = []string{"/usr/lib/x86_64-linux-gnu/xtables"}
	proxy.Links = map[string]string{}
	for _, n := range iptablesNames {
		proxy.Links["/usr/sbin/"+n] = "xtables-nft-multi"
		proxy.Links["/usr/sbin/"+strings.Replace(n, "tables", "tables-nft", 1)] = "xtables-nft-multi"
	}
	etcdBin := "etcd-v" + strings.TrimSuffix(ImageEtcdTag, "-0")
	etcd := NodeImage{Ref: imageRegistry + "/etcd:" + ImageEtcdTag, Bins: []string{etcdBin}, Paths: map[string]string{etcdBin: "/usr/local/bin/etcd"}}
	return []NodeImage{
		kube("kube-apiserver"),
		kube("kube-controller-manager"),
		kube("kube-scheduler"),
		proxy,
		etcd,
		{Ref: imageRegistry + "/coredns/coredns:" + ImageCoreDNSTag, Bins: []string{"coredns"}, Entrypoint: []string{"/coredns"}},
		{Ref: imageRegistry + "/pause:" + ImagePauseTag, Bins: []string{"pause"}, Entrypoint: []string{"/pause"}},
	}
}

// CCMImages are ImageKCMN and ImageCCM, each program at the path its
// static pod's command names.
func CCMImages() []NodeImage {
	return []NodeImage{
		{Ref: ImageKCMN, Dir: CCMImagesDir, Bins: []string{BinKCMN}, Paths: map[string]string{BinKCMN: "/usr/local/bin/kube-controller-manager"}},
		{Ref: ImageCCM, Dir: CCMImagesDir, Bins: []string{BinCCM}},
	}
}

// The Cilium runbook's images: the agent and the operator under the names
// and tags the v1.20.2 chart asks for (image.useDigest=false: the chart
// pins its own builds by digest, which an image built here cannot match),
// and the test workload's image, which no registry serves either.
var (
	ImageCilium         = "quay.io/cilium/cilium:v" + CiliumVersion
	ImageCiliumOperator = "quay.io/cilium/operator-generic:v" + CiliumVersion
	ImageWeb            = sandboxRegistry + "/web:v1"
)

// CiliumImagesDir is the subdirectory of ImagesDir holding CiliumImages.
const CiliumImagesDir = "cilium"

// BinWeb is the test workload's server (sandbox/build/web): it answers
// every HTTP request on :80 with its host name, as the runbook's nginx pods
// answer the connectivity checks.
const BinWeb = "web"

// CiliumImages are the images the chart's DaemonSet and Deployment run, and
// ImageWeb. The agent's holds what its pod runs: cilium-agent, cilium-dbg
// (the config init container, the runbook's `kubectl exec`), the CNI
// plugin and loopback its install script copies to the node, the chart's
// init and uninstall scripts, the datapath sources at the agent's default
// --lib-dir, Debian's clang 19 (LLVM 19, as Cilium's own image) with its
// headers, and the shell tools the chart's commands call (bash, mount,
// grep, iptables-save for its postStart hook). The web image has curl, which
// the runbook's connectivity checks run inside the test pods.
func CiliumImages() []NodeImage {
	scripts := filepath.Join("charts", "cilium-scripts")
	agent := NodeImage{
		Ref: ImageCilium, Dir: CiliumImagesDir,
		Bins: []string{BinCiliumAgent, BinCiliumDbg, BinCiliumCNI,
			filepath.Join(scripts, "init-container.sh"), filepath.Join(scripts, "install-plugin.sh"), filepath.Join(scripts, "cni-uninstall.sh")},
		Paths: map[string]string{
			BinCiliumAgent: "/usr/bin/cilium-agent",
			BinCiliumDbg:   "/usr/bin/cilium-dbg",
			BinCiliumCNI:   "/opt/cni/bin/cilium-cni",
			filepath.Join(scripts, "init-container.sh"): "/init-container.sh",
			filepath.Join(scripts, "install-plugin.sh"): "/install-plugin.sh",
			filepath.Join(scripts, "cni-uninstall.sh"):  "/cni-uninstall.sh",
		},
		Trees: map[string]string{"/var/lib/cilium/bpf": filepath.Join("charts", "cilium-bpf")},
		System: []string{
			"/usr/lib/llvm-19/bin/clang",
			"/usr/bin/bash", "/usr/bin/dash", "/usr/bin/mount", "/usr/bin/umount", "/usr/bin/grep",
			"/usr/bin/cp", "/usr/bin/mv", "/usr/bin/rm", "/usr/bin/mkdir", "/usr/bin/cat", "/usr/bin/ls",
			"/usr/bin/basename", "/usr/bin/find", "/usr/bin/sleep",
			"/usr/sbin/xtables-nft-multi", "/usr/lib/cni/loopback",
		},
		Dirs: []string{"/usr/lib/x86_64-linux-gnu/xtables", "/usr/lib/llvm-19/lib/clang/19/include"},
		Links: map[string]string{
			"/usr/bin/clang": "/usr/lib/llvm-19/bin/clang",
			"/usr/bin/sh":    "dash",
			"/bin/sh":        "/usr/bin/dash",
			"/bin/bash":      "/usr/bin/bash",
			"/cni/loopback":  "/usr/lib/cni/loopback",
		},
		Workdir: "/home/cilium",
	}
	for _, n := range iptablesNames {
		agent.Links["/usr/sbin/"+n] = "xtables-nft-multi"
	}
	return []NodeImage{
		agent,
		{Ref: ImageCiliumOperator, Dir: CiliumImagesDir, Bins: []string{BinCiliumOperator}, Paths: map[string]string{BinCiliumOperator: "/usr/bin/cilium-operator-generic"}},
		{Ref: ImageWeb, Dir: CiliumImagesDir, Bins: []string{BinWeb}, Entrypoint: []string{"/web"}, System: []string{"/usr/bin/curl"}},
	}
}

// iptablesNames are the names Debian's xtables-nft-multi answers to.
var iptablesNames = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

// AllImages are every image EnsureImages writes.
func AllImages() []NodeImage {
	return append(append(NodeImages(), CCMImages()...), CiliumImages()...)
}

// ImagesDir is where the node images' archives are cached, beside the
// binaries they are made of.
func ImagesDir(binDir string) string { return filepath.Join(binDir, "images") }

// EnsureImages writes the archive of every image of AllImages that is
// not in ImagesDir(binDir) yet, or is older than a program it holds (a
// rebuilt binary), and returns their paths. An archive is a Docker archive
// (what `ctr images import` and `docker load` read), written to a temporary
// name and renamed, with fixed times so that its digest depends only on its
// files.
func EnsureImages(ctx context.Context, binDir string, progress func(string)) ([]string, error) {
	dir := ImagesDir(binDir)
	var paths []string
	for _, im := range AllImages() {
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
		if err := writeImage(path, binDir, im); err != nil {
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

func writeImage(path, binDir string, im NodeImage) error {
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
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":        []string{nodePATH},
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
func imageFiles(binDir string, im NodeImage) ([]imageFile, error) {
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
