package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/site"
)

// execFlags are the executor flags serve, daemon and run share: where
// blocks run (targets.Config) and whether verified output is written back.
type execFlags struct {
	targets.Config
	writeBack bool
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (f *execFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.writeBack, "write-back", false, "write verified output back into the Markdown (also per runbook: write_back: true)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig for kube blocks (default $KUBECONFIG or ~/.kube/config; the sandbox's when it runs)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context (default current-context); runbooks refuse contexts they do not list")
	fs.StringVar(&f.NodeImage, "node-image", "", "image of the pods target=node blocks run through; it needs nsenter and sleep (default busybox:1.37; the sandbox's own when its nodes are the cluster)")
	fs.StringVar(&f.SSHConfig, "ssh-config", "", "OpenSSH client config for ssh blocks (Host, HostName, Port, User, IdentityFile)")
	fs.StringVar(&f.KnownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
	fs.Var((*stringList)(&f.Identity), "identity", "private key file for ssh blocks (repeatable; ssh-agent is used too)")
	fs.BoolVar(&f.TrustOnFirstUse, "trust-on-first-use", false, "accept and remember unknown SSH host keys (changed keys are always refused)")
	fs.StringVar(&f.Sandbox, "sandbox", "auto", "use the local sandbox's cluster and SSH hosts: auto (when it runs and no other flags say otherwise; followed as it comes and goes), yes (fail without one), no, start (serve: start one in the background when none runs)")
	fs.StringVar(&f.SandboxBuild, "sandbox-build", "", "with --sandbox=start: command that builds missing sandbox binaries first (make run passes scripts/sandbox-bins.sh)")
	fs.StringVar(&f.Journal, "journal", "", "run journal, an SQLite database several Cairn processes share (default CONTENT/.cairn/journal.db)")
}

// termFlags turn on the page's terminals (serve, daemon).
type termFlags struct {
	on    bool
	max   int
	grace time.Duration
}

func (f *termFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "terminal", false, "let the page open terminals: a shell on this machine or on a host the runbook names, each asked for on the page, recorded in the journal with its transcript (off by default)")
	fs.IntVar(&f.max, "max-terminals", 4, "with --terminal: terminals open at once")
	fs.DurationVar(&f.grace, "terminal-grace", 30*time.Second, "with --terminal: how long a terminal whose page went away waits for it to come back (a reload) before its shell is ended")
}

// selfEnv is added to the environment of this binary run as a child
// (`cairn sandbox up`); the test binary sets it so that it acts as cairn.
var selfEnv []string

// openExecutor wires the engine, runners and journal for serve, daemon
// and run (executor/targets), with this binary as the local runs'
// supervisor and as `cairn sandbox up`.
func openExecutor(ctx context.Context, f *execFlags, content string) (*targets.Executor, error) {
	cfg := f.Config
	cfg.Supervisor = local.SelfSupervisor()
	cfg.SandboxEnv = selfEnv
	return targets.Open(ctx, cfg, content)
}

// writeBack writes rec's output into the Markdown (recorded in rec and
// the journal) and swaps the re-read runbook into st; errors are reported,
// never fatal.
func writeBack(log io.Writer, st *daemon.Store, j *executor.Journal, rb *runbook.Runbook, rec *executor.Record) {
	nrb, err := executor.WriteBackRecorded(j, rb, rec)
	if err != nil {
		fmt.Fprintf(log, "write-back: %v\n", err)
	}
	if nrb == nil {
		return
	}
	st.Replace(nrb)
	fmt.Fprintf(log, "wrote verified output of %s into %s\n", rec.Block, rb.Path)
}

// journalResults bakes each block's last verified run into the page.
func journalResults(j *executor.Journal) func(rb *runbook.Runbook) map[string]site.BlockResult {
	return func(rb *runbook.Runbook) map[string]site.BlockResult {
		out := map[string]site.BlockResult{}
		latest, _ := j.Latest(rb.Slug, rb.BlockHashes()) // a journal error shows no results; runs report it
		for id, rec := range latest {
			out[id] = toBlockResult(rec)
		}
		return out
	}
}

func toBlockResult(rec executor.Record) site.BlockResult {
	exit := 0
	if len(rec.Hosts) > 0 {
		exit = rec.Hosts[0].Exit
	}
	where := rec.Where
	if where == "" {
		where = "local"
	}
	return site.BlockResult{Status: string(rec.Status), At: rec.Start.UTC().Format(time.RFC3339), Where: where,
		Exit: exit, Duration: fmt.Sprintf("%.1fs", rec.Duration), Output: rec.Output, Reasons: rec.Reasons}
}
