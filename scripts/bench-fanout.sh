#!/usr/bin/env bash
# bench-fanout.sh: one block on 1, 4 and every sandbox node, over SSH and
# through the Kubernetes API (target=node), timed by the benchmark
# BenchmarkFanOut. Builds a cluster on sandbox nodes first (the kubeadm
# runbook: 3 control-plane nodes and WORKERS light workers, default 16:
# kubelet and containerd, no control-plane pods; about 4 minutes) in a
# state folder of its own, and removes it after. Needs root, like every
# sandbox with nodes, and about 1 GB of disk per node for its images.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
dir=$(mktemp -d /tmp/cairn-bench-fanout.XXXXXX)
bin="$dir/cairn"
cleanup() {
	"$bin" sandbox down --state-dir "$dir/sb" >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT
"$go" build -o "$bin" ./cmd/cairn
export CAIRN_SANDBOX_DIR="$dir/sb"
echo "bench-fanout: sandbox nodes in $dir/sb"
workers=${WORKERS:-16}
"$bin" sandbox up --nodes --workers "$workers" --etcd-hosts 0 >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }
names=$(seq -f 'w%g' -s ' ' 0 $((workers - 1)))
echo "bench-fanout: building the cluster with the kubeadm runbook (3 control-plane nodes, $workers workers)"
"$bin" run content/kubeadm-ha.md --sandbox yes --yes --kubeconfig "$dir/none" --journal "$dir/journal.db" \
	--param ETCD_TOPOLOGY=stacked --param CERT_DISTRIBUTION=upload --param FIRST_CP=cp0 \
	--param "CONTROL_PLANE_HOSTS=cp1 cp2" --param "WORKER_HOSTS=$names" >"$dir/kubeadm.log" 2>&1 ||
	{ tail -40 "$dir/kubeadm.log"; exit 1; }
echo "bench-fanout: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
CAIRN_NODETEST_CLUSTER="$dir/sb" "$go" test -run '^$' -bench FanOut -benchtime "${BENCHTIME:-10x}" -benchmem ./cmd/cairn/nodetest
echo "bench-fanout: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
