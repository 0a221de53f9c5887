#!/usr/bin/env bash
# ci-deps.sh installs the Debian packages that the sandbox and its tests use:
# openssh-server (sshd for the SSH hosts), openssh-client (ssh, ssh-keygen),
# iproute2 (ip: network namespaces, bridge, veth), util-linux (unshare,
# nsenter, flock), chromium (headless page tests), shellcheck (script lint) and
# sudo (the ssh runner's sudo=true blocks and copies, tested on the SSH hosts),
# haproxy (the sandbox's load balancer in front of kube-apiserver), netcat-openbsd
# (nc: the kubeadm runbook's load-balancer check), curl, and nftables (the test
# that makes the load balancer drop traffic), containerd and runc (each sandbox
# host's own container runtime with --nodes) and containernetworking-plugins
# (the nodes' bridge and host-local CNI plugins), tini (the reaping init of
# each node's PID namespace), iptables (what the nodes' kube-proxy image
# carries), gcc with libc6-dev (pause, compiled static from its C source) and
# clang-19 (what the sandbox's cilium-agent compiles its datapath with: LLVM 19,
# the release cilium v1.20's own image carries), skopeo (reads the offline
# bundle's OCI image layout in the tests, as a site would).
# With --bench it adds what `make bench` compares against: pssh (parallel-ssh)
# and ansible, for the fan-out.
# It is idempotent: packages already installed are left alone, and apt-get runs
# only when something is missing. Run as root (CI runs as root).
set -euo pipefail

want=(openssh-server openssh-client iproute2 util-linux chromium shellcheck ca-certificates sudo haproxy netcat-openbsd curl nftables openssl containerd runc containernetworking-plugins tini iptables gcc libc6-dev clang-19 skopeo)
if [[ ${1:-} == --bench ]]; then
  want+=(pssh ansible)
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "ci-deps: all present (${want[*]})"
  exit 0
fi

if [[ $(id -u) != 0 ]]; then
  echo "ci-deps: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "ci-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# --no-install-recommends keeps chromium's install small; sshd is never started
# as a service here (policy-rc.d is not needed: the package's service start
# fails harmlessly without systemd, and the sandbox runs its own sshd).
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "ci-deps: installed ${missing[*]}"
