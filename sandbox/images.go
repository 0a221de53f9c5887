package sandbox

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/sandbox/imagebuild"
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

// ImageNodeShell is the image of target=node pods on sandbox nodes: what
// kubectl debug node's images give (nsenter, sleep, a shell and the tools
// the reaper of a cancelled run uses), for a cluster no registry serves.
var ImageNodeShell = sandboxRegistry + "/node-shell:v1"

// CCMImagesDir is the subdirectory of ImagesDir holding ImageKCMN and
// ImageCCM.
const CCMImagesDir = "ccm"

// NodeImage is one image a sandbox node's runtime holds, under the name and
// tag kubeadm asks for, so that kubelet never pulls (no registry is
// reachable here, and kubeadm's static pods and addons use IfNotPresent).
type NodeImage = imagebuild.Spec

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
		NodeShellImage(),
	}
}

// NodeShellImage is ImageNodeShell: Debian's nsenter, sleep, dash as
// /bin/sh, bash, and grep, tr and cat for the reaper. It holds no program
// built here.
func NodeShellImage() NodeImage {
	return NodeImage{
		Ref: ImageNodeShell,
		System: []string{"/usr/bin/nsenter", "/usr/bin/sleep", "/usr/bin/dash", "/usr/bin/bash",
			"/usr/bin/grep", "/usr/bin/tr", "/usr/bin/cat", "/usr/bin/env"},
		Links: map[string]string{"/bin/sh": "/usr/bin/dash", "/bin/bash": "/usr/bin/bash", "/usr/bin/sh": "dash"},
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
// rebuilt binary), and returns their paths (imagebuild.Ensure). A missing
// program is a MissingError (errors.Is ErrMissing).
func EnsureImages(ctx context.Context, binDir string, progress func(string)) ([]string, error) {
	return imagebuild.Ensure(ctx, ImagesDir(binDir), binDir, AllImages(), progress)
}
