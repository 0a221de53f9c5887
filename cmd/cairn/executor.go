package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/site"
)

// execFlags are the executor flags serve, daemon and run share.
type execFlags struct {
	writeBack  bool
	kubeconfig string
	context    string
	sshConfig  string
	knownHosts string
	identity   stringList
	tofu       bool
	useSandbox string // auto, yes, no, start
	// sandboxBuild builds missing sandbox binaries before --sandbox=start
	// starts one (make run passes scripts/sandbox-bins.sh).
	sandboxBuild string
	journal      string
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (f *execFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.writeBack, "write-back", false, "write verified output back into the Markdown (also per runbook: write_back: true)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig for kube blocks (default $KUBECONFIG or ~/.kube/config; the sandbox's when it runs)")
	fs.StringVar(&f.context, "context", "", "kubeconfig context (default current-context); runbooks refuse contexts they do not list")
	fs.StringVar(&f.sshConfig, "ssh-config", "", "OpenSSH client config for ssh blocks (Host, HostName, Port, User, IdentityFile)")
	fs.StringVar(&f.knownHosts, "known-hosts", "", "known_hosts file (default ~/.ssh/known_hosts)")
	fs.Var(&f.identity, "identity", "private key file for ssh blocks (repeatable; ssh-agent is used too)")
	fs.BoolVar(&f.tofu, "trust-on-first-use", false, "accept and remember unknown SSH host keys (changed keys are always refused)")
	fs.StringVar(&f.useSandbox, "sandbox", "auto", "use the local sandbox's cluster and SSH hosts: auto (when it runs and no other flags say otherwise; followed as it comes and goes), yes (fail without one), no, start (serve: start one in the background when none runs)")
	fs.StringVar(&f.sandboxBuild, "sandbox-build", "", "with --sandbox=start: command that builds missing sandbox binaries first (make run passes scripts/sandbox-bins.sh)")
	fs.StringVar(&f.journal, "journal", "", "run journal, an SQLite database several Cairn processes share (default CONTENT/.cairn/journal.db)")
}

// exec is a wired engine and what it needs closed.
type execSetup struct {
	engine  *executor.Engine
	targets *targets
	kubeErr error
	notes   []string
	closers []func()
}

func (x *execSetup) Close() {
	for i := len(x.closers) - 1; i >= 0; i-- {
		x.closers[i]()
	}
}

// wire gives the API server the targets' view, the sandbox's values and
// the reader's acceptance of another sandbox (serve and daemon alike).
func (x *execSetup) wire(d *daemon.Server, say func(string)) {
	d.Targets = x.targets.View
	d.SandboxValues = x.targets.sandboxValues
	d.AcceptSandbox = func(ctx context.Context, id string) error { return x.targets.accept(ctx, id, say) }
}

// follow keeps the targets in step with the sandbox until Close; say gets
// one line per change.
func (x *execSetup) follow(ctx context.Context, say func(string)) {
	x.background(ctx, func(ctx context.Context) { x.targets.follow(ctx, followInterval, say) })
}

// background runs f until Close, which cancels it and waits for it.
// Closers run in reverse, so it stops before the targets it uses close.
func (x *execSetup) background(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	x.closers = append(x.closers, func() { cancel(); <-done })
}

// followInterval is how often a server looks at the sandbox.
const followInterval = 2 * time.Second

// setupExecutor builds the engine with every runner it can.
func setupExecutor(ctx context.Context, f *execFlags, content string) (*execSetup, error) {
	x := &execSetup{}
	journalPath := f.journal
	if journalPath == "" {
		journalPath = filepath.Join(content, ".cairn", "journal.db")
	}
	j, err := openJournal(journalPath)
	if err != nil {
		return nil, err
	}
	x.closers = append(x.closers, func() { j.Close() })

	t, err := newTargets(ctx, f)
	if err != nil {
		j.Close()
		return nil, err
	}
	x.targets = t
	x.closers = append(x.closers, t.Close)
	x.notes = append(x.notes, t.cur.notes...)
	x.kubeErr = t.cur.kubeErr
	runners := map[string]executor.Runner{executor.RunnerLocal: &local.Runner{Supervisor: supervisor()}}
	for _, key := range []string{executor.RunnerKube, executor.RunnerKubeShell, executor.RunnerSSH} {
		runners[key] = slot{t: t, key: key}
	}
	e := &executor.Engine{Runners: runners, Journal: j, Objects: kube.Checker{}, KubeWhere: t.kubeWhere, CheckRequires: true}
	x.engine = e
	return x, nil
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

// openJournal opens the journal; next to a new default journal, an older
// Cairn's journal.jsonl is read in once and renamed *.imported.
func openJournal(path string) (*executor.Journal, error) {
	_, statErr := os.Stat(path)
	j, err := executor.OpenJournal(path)
	if err != nil || !os.IsNotExist(statErr) || filepath.Base(path) != "journal.db" {
		return j, err
	}
	legacy := filepath.Join(filepath.Dir(path), "journal.jsonl")
	f, err := os.Open(legacy)
	if err != nil {
		return j, nil
	}
	defer f.Close()
	if _, err := j.Import(context.Background(), f); err != nil {
		return j, nil // a damaged old journal is left where it is, untouched
	}
	_ = os.Rename(legacy, legacy+".imported")
	return j, nil
}
