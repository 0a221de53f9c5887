package nodetest

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

// fanBench is one block run on every node of a built sandbox cluster two
// ways: over SSH from this machine, and through the API (target=node: a
// pod pinned to each node, exec, delete).
const fanBench = "---\ntitle: fan-out bench\nparams:\n  - name: NODES\n    type: hosts\n---\n\n# Fan-out\n\n## Both {#both}\n\n" +
	"```bash {#over-ssh target=ssh hosts=NODES parallel=64}\nuname -n\n```\n\n" +
	"```bash {#through-api target=node nodes=$NODES namespace=kube-system parallel=64}\nuname -n\n```\n"

// BenchmarkFanOut runs the same block on 1 node, 4 and every node of a
// cluster already built on sandbox nodes (CAIRN_NODETEST_CLUSTER, as for
// TestOnRunningNodes), target=ssh and target=node in turn, through the
// engine as cairn serve wires it. ns/op is the wall time of one run over
// all its nodes; B/op and allocs/op the executor's. Not run in CI: it
// needs the cluster (make bench-fanout builds one, runs this, removes it).
//
//	CAIRN_NODETEST_CLUSTER=DIR go test -run '^$' -bench FanOut -benchtime 10x ./cmd/cairn/nodetest
func BenchmarkFanOut(b *testing.B) {
	dir := os.Getenv("CAIRN_NODETEST_CLUSTER")
	if dir == "" {
		b.Skip("CAIRN_NODETEST_CLUSTER is unset: build a cluster on sandbox nodes first")
	}
	sb, err := sandbox.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	inv := sb.Inventory()
	tmp := b.TempDir()
	kubeconfig := readerKubeconfig(b, inv, tmp, "bench-kubeconfig")
	path := filepath.Join(tmp, "fan.md")
	if err := os.WriteFile(path, []byte(fanBench), 0o644); err != nil {
		b.Fatal(err)
	}
	rb, err := runbook.Parse(path, []byte(fanBench))
	if err != nil {
		b.Fatal(err)
	}
	x, err := targets.Open(context.Background(), targets.Config{Kubeconfig: kubeconfig, NodeImage: sandbox.ImageNodeShell, Sandbox: "no",
		SSHConfig: inv.SSHConfig, KnownHosts: inv.KnownHosts, Identity: []string{inv.IdentityFile},
		Journal: filepath.Join(tmp, "journal.db")}, tmp)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	var all []string
	for _, h := range inv.Hosts {
		if !strings.HasPrefix(h.Name, "etcd") {
			all = append(all, h.Name)
		}
	}
	sizes := [][]string{all[:1]}
	if len(all) > 4 {
		sizes = append(sizes, all[:4])
	}
	for _, nodes := range append(sizes, all) {
		for _, block := range []string{"over-ssh", "through-api"} {
			b.Run(block+"/"+strconv.Itoa(len(nodes)), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					r, err := x.Engine.Prepare(executor.Request{Runbook: rb, BlockID: block, Params: map[string]string{"NODES": strings.Join(nodes, " ")}})
					if err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					rec := r.Execute(ctx, discard{})
					cancel()
					if rec.Status != executor.StatusVerified || len(rec.Hosts) != len(nodes) {
						b.Fatalf("%s on %d nodes: %s %v\n%s", block, len(nodes), rec.Status, rec.Reasons, rec.Output)
					}
				}
				// The executor's peak resident memory so far (this
				// process: the engine, its clients and connections).
				var ru syscall.Rusage
				if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
					b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
				}
			})
		}
	}
}

type discard struct{}

func (discard) Output(string, []byte) {}
func (discard) Event(executor.Event)  {}
