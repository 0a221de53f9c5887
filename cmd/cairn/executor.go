package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/executor"
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
	fs.StringVar(&f.SSHConfig, "ssh-config", "", "OpenSSH client config for ssh blocks (Host, HostName, Port, User, IdentityFile)")
	fs.StringVar(&f.KnownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
	fs.Var((*stringList)(&f.Identity), "identity", "private key file for ssh blocks (repeatable; ssh-agent is used too)")
	fs.BoolVar(&f.TrustOnFirstUse, "trust-on-first-use", false, "accept and remember unknown SSH host keys (changed keys are always refused)")
	fs.StringVar(&f.Sandbox, "sandbox", "auto", "use the local sandbox's cluster and SSH hosts: auto (when it runs and no other flags say otherwise; followed as it comes and goes), yes (fail without one), no, start (serve: start one in the background when none runs)")
	fs.StringVar(&f.SandboxBuild, "sandbox-build", "", "with --sandbox=start: command that builds missing sandbox binaries first (make run passes scripts/sandbox-bins.sh)")
	fs.StringVar(&f.Journal, "journal", "", "run journal, an SQLite database several Cairn processes share (default CONTENT/.cairn/journal.db)")
}

// selfEnv is added to the environment of this binary run as a child
// (`cairn sandbox up`); the test binary sets it so that it acts as cairn.
var selfEnv []string

// openExecutor wires the engine, runners and journal for serve, daemon
// and run (executor/targets), with this binary as the local runs'
// supervisor and as `cairn sandbox up`.
func openExecutor(ctx context.Context, f *execFlags, content string) (*targets.Executor, error) {
	cfg := f.Config
	cfg.Supervisor = supervisor()
	cfg.SandboxEnv = selfEnv
	return targets.Open(ctx, cfg, content)
}

// store is the loaded content the daemon may run blocks of.
type store struct {
	mu  sync.RWMutex
	rbs []*runbook.Runbook
}

func (s *store) Runbooks() []*runbook.Runbook {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rbs
}

func (s *store) set(rbs []*runbook.Runbook) {
	s.mu.Lock()
	s.rbs = rbs
	s.mu.Unlock()
}

// replace swaps in a re-parsed runbook (after write-back).
func (s *store) replace(rb *runbook.Runbook) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*runbook.Runbook, 0, len(s.rbs))
	for _, x := range s.rbs {
		if x.Path == rb.Path {
			x = rb
		}
		out = append(out, x)
	}
	s.rbs = out
}

// writeBack writes a verified run into the runbook's source and re-parses
// it; errors are reported, never fatal.
// writeBack writes rec's output into the Markdown and records the outcome
// in rec.WriteBack and the journal, so that the page and the API say when
// it failed.
func writeBack(log io.Writer, st *store, j *executor.Journal, rb *runbook.Runbook, rec *executor.Record) {
	src, err := executor.WriteBack(rb, rec)
	rec.WriteBack = "written"
	if err != nil {
		rec.WriteBack = err.Error()
		fmt.Fprintf(log, "write-back: %v\n", err)
	}
	if j != nil {
		if jerr := j.SetWriteBack(rec.ID, rec.WriteBack); jerr != nil {
			fmt.Fprintf(log, "write-back: %v\n", jerr)
		}
	}
	if err != nil {
		return
	}
	if nrb, err := runbook.Parse(rb.Path, src); err == nil {
		st.replace(nrb)
	}
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
