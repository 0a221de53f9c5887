#!/usr/bin/env bash
# sandbox-bins.sh builds the sandbox's server binaries (etcd, kube-apiserver,
# kube-controller-manager; kubeadm, kubectl and kubelet for the hosts; for
# the CCM runbook kube-controller-manager-n (v1.30) and
# cloud-controller-manager; for the Cilium runbook cilium-operator-generic,
# helm and Cilium's Helm chart) from the builder modules in sandbox/build and
# caches them outside the repo, keyed by version:
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/cairn/sandbox/v1.37.2-etcd3.6.16/bin/
#
# or into $CAIRN_SANDBOX_BIN when that is set. A binary already there is kept
# while what it is built from is unchanged (a stamp beside it), so a second
# run takes a second. A cold build (empty module and build caches)
# took 1199 s (20 min) on 2 cores on 2026-12-03: etcd 92 s, kube-apiserver
# 438 s, kube-controller-manager 137 s, kubeadm 28 s, kubectl 30 s, kubelet
# 45 s, kube-controller-manager-n 413 s, cloud-controller-manager 16 s. The
# Cilium parts, measured cold the same day with their own empty caches:
# cilium-operator-generic 665 s, helm 325 s (990 s): about 37 min in all.
# The node images' programs, cold with caches of their own (an upper bound:
# in one run they share kube-apiserver's): etcd v3.7.0 49 s, CoreDNS 69 s,
# kube-scheduler 271 s, kube-proxy 24 s, pause under a second: at most
# 44 min in all.
#
# Usage: scripts/sandbox-bins.sh [--core] [--force]
#   --core   only what `cairn sandbox up` starts (etcd, kube-apiserver,
#            kube-controller-manager, kubeadm, kubectl, kubelet, crictl:
#            ~21 min cold); make run uses it. The tests need everything.
set -euo pipefail

# Keep these in step with sandbox/build/go.mod, sandbox/build/etcd/go.mod and
# sandbox.Version in sandbox/bins.go.
KUBE_VERSION=v1.37.2
KUBE_MINOR=37
ETCD_VERSION=v3.6.16
KCM_N_VERSION=v1.30.14
# Keep in step with sandbox/build/cilium/go.mod, sandbox/build/helm/go.mod
# and sandbox.CiliumVersion.
CILIUM_VERSION=v1.20.2
HELM_VERSION=v4.3.2
# Keep in step with sandbox/build/crictl/go.mod.
CRICTL_VERSION=v1.37.0
# What kubeadm $KUBE_VERSION names for its images (keep in step with
# sandbox/build/etcd-image/go.mod, sandbox/build/coredns/go.mod and
# sandbox/images.go).
IMAGE_ETCD_VERSION=v3.7.0
COREDNS_VERSION=v1.14.6
PAUSE_VERSION=3.10.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
key="${KUBE_VERSION}-etcd${ETCD_VERSION#v}"
bin=${CAIRN_SANDBOX_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/cairn/sandbox/$key/bin}

force=0
core=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --core) core=1 ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
      exit 0
      ;;
    *)
      echo "sandbox-bins.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

if ! command -v go >/dev/null 2>&1; then
  echo "sandbox-bins.sh: go not found in PATH; install Go 1.26 (see go.mod)" >&2
  exit 1
fi

mkdir -p "$bin"
# One build at a time per cache dir: a second caller waits, then finds the
# binaries present.
exec 9>"$bin/.lock"
if ! flock -n 9; then
  echo "sandbox-bins: another build holds $bin/.lock; waiting for it"
  flock 9
fi

export GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0

# stamp NAME DIR PKG LDFLAGS TAGS: what a binary is built from, as one hash:
# the builder module's go.mod, go.sum and Go files, the package, the flags and
# the Go release. A binary whose $bin/.NAME.stamp differs (or is missing) is
# built again, so a change to a builder (say, the fake cloud the CCM
# registers) reaches a warm cache.
goversion=$(go env GOVERSION)
stamp() {
  local name=$1 dir=$2 pkg=$3 ldflags=$4 tags=$5
  {
    printf '%s\n' "$name" "$pkg" "$ldflags" "$tags" "$goversion"
    cat "$root/$dir/go.mod"
    # A module without dependencies (the test web server) has no go.sum.
    if [ -f "$root/$dir/go.sum" ]; then cat "$root/$dir/go.sum"; fi
    find "$root/$dir" -maxdepth 1 -name '*.go' -type f | LC_ALL=C sort | xargs -r cat
  } | sha256sum | cut -d' ' -f1
}

# build NAME MODULE_DIR PACKAGE [LDFLAGS [TAGS]]
build() {
  local name=$1 dir=$2 pkg=$3 ldflags=${4:-"-s -w"} tags=${5:-}
  local want
  want=$(stamp "$name" "$dir" "$pkg" "$ldflags" "$tags")
  if [[ $force == 0 && -x $bin/$name && $(cat "$bin/.$name.stamp" 2>/dev/null) == "$want" ]]; then
    echo "sandbox-bins: $name present ($bin/$name)"
    return
  fi
  if [[ -x $bin/$name ]]; then
    echo "sandbox-bins: building $name again: its builder, flags or Go release changed ..."
  else
    echo "sandbox-bins: building $name from $pkg (module $dir) ..."
  fi
  local start=$SECONDS
  go build -C "$root/$dir" -trimpath -tags "$tags" -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg"
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$want" >"$bin/.$name.stamp"
  echo "sandbox-bins: built $name in $((SECONDS - start))s"
}

kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$KUBE_MINOR"

total=$SECONDS
build etcd sandbox/build/etcd go.etcd.io/etcd/server/v3
build kube-apiserver sandbox/build k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager sandbox/build k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
# kubeadm for the kubeadm HA runbook: the sandbox's PKI is kubeadm's, and
# every SSH host has it on its PATH.
build kubeadm sandbox/build k8s.io/kubernetes/cmd/kubeadm "$kube_ldflags"
build kubectl sandbox/build k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
# kubelet: on the hosts' PATH (kubeadm's preflight and the runbook's version
# checks ask it); the sandbox-nodes mode will run it.
build kubelet sandbox/build k8s.io/kubernetes/cmd/kubelet "$kube_ldflags"
# crictl for the hosts (Debian 12 has no package): with --nodes each host's
# crictl finds that host's own containerd at the default socket.
build crictl sandbox/build/crictl sigs.k8s.io/cri-tools/cmd/crictl "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
if [[ $core == 1 ]]; then
  echo "sandbox-bins: core binaries ready in $bin ($((SECONDS - total))s)"
  exit 0
fi
# What the sandbox nodes' images hold (cairn sandbox up --nodes assembles
# the image archives from them): the control plane's other two servers, the
# etcd and CoreDNS releases kubeadm names (`kubeadm config images list`),
# and pause, compiled from the pause.c of the same Kubernetes module.
build kube-scheduler sandbox/build k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
build kube-proxy sandbox/build k8s.io/kubernetes/cmd/kube-proxy "$kube_ldflags"
build etcd-$IMAGE_ETCD_VERSION sandbox/build/etcd-image go.etcd.io/etcd/server/v3
build coredns sandbox/build/coredns . "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION"
if [[ $force == 1 || ! -x $bin/pause ]]; then
  go mod download -C "$root/sandbox/build" k8s.io/kubernetes
  kdir=$(go list -C "$root/sandbox/build" -m -f '{{.Dir}}' k8s.io/kubernetes)
  if ! command -v gcc >/dev/null 2>&1 || [[ ! -e /usr/lib/x86_64-linux-gnu/libc.a && ! -e /usr/lib/libc.a ]]; then
    echo "sandbox-bins: gcc and a static libc are needed for pause; run scripts/ci-deps.sh (apt-get install -y gcc libc6-dev)" >&2
    exit 1
  fi
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION" -o "$bin/.pause.tmp" "$kdir/build/pause/linux/pause.c"
  mv -f "$bin/.pause.tmp" "$bin/pause"
  echo "sandbox-bins: built pause $PAUSE_VERSION from $kdir/build/pause/linux/pause.c"
else
  echo "sandbox-bins: pause present ($bin/pause)"
fi
# The CCM leader-migration runbook's two sides: a KCM of a release that still
# runs cloud controllers and Leader Migration (v1.30, "version N") and a
# cloud-controller-manager at the sandbox's release ("N+1"), both with
# k8s.io/cloud-provider's fake provider registered as "fake".
build kube-controller-manager-n sandbox/build/kcm-n . "-s -w -X k8s.io/component-base/version.gitVersion=$KCM_N_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=30"
build cloud-controller-manager sandbox/build/ccm . "$kube_ldflags"
# The Cilium runbook: the operator variant the chart runs by default
# (cilium-operator-generic: the operator's main package with the generic IPAM
# providers, as cilium's operator/Makefile builds it), helm, and the chart of
# the same release from the module's install/kubernetes/cilium.
build cilium-operator-generic sandbox/build/cilium github.com/cilium/cilium/operator "-s -w" ipam_provider_operator,osusergo
# The agent and its client, as cilium's Makefiles build them (osusergo, no
# cgo); the agent compiles its datapath from the module's bpf/ with clang-19
# when it starts (scripts/ci-deps.sh installs it).
build cilium-agent sandbox/build/cilium github.com/cilium/cilium/daemon "-s -w" osusergo
build cilium-dbg sandbox/build/cilium github.com/cilium/cilium/cilium-dbg "-s -w" osusergo
# The CNI plugin the agent's pod installs on its node, for Cilium on the
# sandbox nodes (the image sandbox/images.go assembles).
build cilium-cni sandbox/build/cilium github.com/cilium/cilium/plugins/cilium-cni "-s -w" osusergo
# The test pods' server (the runbook's nginx stands in for any workload).
build web sandbox/build/web . "-s -w"
build helm sandbox/build/helm helm.sh/helm/v4/cmd/helm "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
# copy_tree SRC NAME: the module's SRC directory as $bin/charts/NAME.
copy_tree() {
  local src=$1 name=$2
  if [[ $force == 0 && -d $bin/charts/$name ]]; then
    echo "sandbox-bins: $name present ($bin/charts/$name)"
    return
  fi
  go mod download -C "$root/sandbox/build/cilium" github.com/cilium/cilium
  local dir
  dir=$(go list -C "$root/sandbox/build/cilium" -m -f '{{.Dir}}' github.com/cilium/cilium)
  rm -rf "$bin/charts/.$name.tmp" && mkdir -p "$bin/charts"
  cp -r --no-preserve=mode "$dir/$src" "$bin/charts/.$name.tmp"
  rm -rf "${bin:?}/charts/$name" && mv "$bin/charts/.$name.tmp" "$bin/charts/$name"
  echo "sandbox-bins: copied $src of cilium $CILIUM_VERSION to $bin/charts/$name"
}
copy_tree install/kubernetes/cilium cilium
# The agent's datapath sources.
copy_tree bpf cilium-bpf
# Cilium's own CRDs, for tests that need them without an operator.
copy_tree pkg/k8s/apis/cilium.io/client/crds cilium-crds
# The scripts the chart's init containers and hooks run in Cilium's image.
if [[ $force == 1 || ! -d $bin/charts/cilium-scripts ]]; then
  dir=$(go list -C "$root/sandbox/build/cilium" -m -f '{{.Dir}}' github.com/cilium/cilium)
  rm -rf "$bin/charts/.cilium-scripts.tmp" && mkdir -p "$bin/charts/.cilium-scripts.tmp"
  cp --no-preserve=mode "$dir/images/cilium/init-container.sh" "$dir/plugins/cilium-cni/install-plugin.sh" \
    "$dir/plugins/cilium-cni/cni-uninstall.sh" "$bin/charts/.cilium-scripts.tmp/"
  rm -rf "${bin:?}/charts/cilium-scripts" && mv "$bin/charts/.cilium-scripts.tmp" "$bin/charts/cilium-scripts"
  echo "sandbox-bins: copied the Cilium image's scripts to $bin/charts/cilium-scripts"
fi
echo "sandbox-bins: binaries ready in $bin ($((SECONDS - total))s)"
