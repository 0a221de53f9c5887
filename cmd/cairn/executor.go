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
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
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
	useSandbox string // auto, yes, no
	journal    string
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
	fs.StringVar(&f.useSandbox, "sandbox", "auto", "use the local sandbox's kubeconfig and SSH hosts: auto (when it runs and no other flags say otherwise), yes, no")
	fs.StringVar(&f.journal, "journal", "", "run journal, an SQLite database several Cairn processes share (default CONTENT/.cairn/journal.db)")
}

// exec is a wired engine and what it needs closed.
type execSetup struct {
	engine  *executor.Engine
	kube    *kube.Runner
	kubeErr error
	notes   []string
	closers []func()
}

func (x *execSetup) Close() {
	for i := len(x.closers) - 1; i >= 0; i-- {
		x.closers[i]()
	}
}

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

	// The sandbox, when it runs and nothing else was asked for.
	var inv *sandbox.Inventory
	if f.useSandbox == "yes" || f.useSandbox == "auto" && f.kubeconfig == "" && f.sshConfig == "" && os.Getenv("KUBECONFIG") == "" {
		st, err := sandbox.StatusOf(ctx, sandbox.DefaultStateDir())
		if err == nil && st.Healthy() && st.Inventory != nil {
			inv = st.Inventory
			x.notes = append(x.notes, "using the running sandbox ("+sandbox.DefaultStateDir()+")")
		}
		if inv == nil && f.useSandbox == "yes" {
			return nil, fmt.Errorf("--sandbox=yes: no running sandbox; start one with: cairn sandbox up")
		}
	}
	kubeconfig, kctx := f.kubeconfig, f.context
	if inv != nil && kubeconfig == "" && inv.Kubeconfig != "" {
		kubeconfig = inv.Kubeconfig
		if kctx == "" {
			kctx = inv.KubeContext
		}
	}

	runners := map[string]executor.Runner{executor.RunnerLocal: &local.Runner{Supervisor: supervisor()}}
	e := &executor.Engine{Runners: runners, Journal: j, Objects: kube.Checker{}}
	if kr, err := kube.New(kube.Config{Kubeconfig: kubeconfig, Context: kctx}); err == nil {
		x.kube = kr
		runners[executor.RunnerKube] = kr
		e.KubeWhere = kr.Where
		dir, err := os.MkdirTemp("", "cairn-kube-")
		if err != nil {
			return nil, err
		}
		x.closers = append(x.closers, func() { os.RemoveAll(dir) })
		path, cleanup, err := kr.PinnedKubeconfig(dir)
		if err == nil {
			x.closers = append(x.closers, func() { cleanup() })
			runners[executor.RunnerKubeShell] = &local.Runner{ExtraEnv: []string{"KUBECONFIG=" + path}, Supervisor: supervisor()}
		}
		x.notes = append(x.notes, "kube blocks use "+kr.Target().String())
	} else {
		x.kubeErr = err
		x.notes = append(x.notes, "kube blocks are off: "+err.Error()+" (start the sandbox with `make sandbox`, or pass --kubeconfig and --context)")
		e.KubeWhere = func(*runbook.Runbook) (string, error) {
			return "", fmt.Errorf("%w: %v (pass --kubeconfig/--context, or start the sandbox)", executor.ErrContextRefused, err)
		}
	}
	if sr, note, err := newSSHRunner(f, inv); err == nil {
		runners[executor.RunnerSSH] = sr
		if note != "" {
			x.notes = append(x.notes, note)
		}
	} else {
		x.notes = append(x.notes, "ssh blocks are off: "+err.Error())
	}
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
		hashes := map[string]string{}
		for _, b := range rb.Blocks {
			if b.Executable() {
				hashes[b.ID] = b.Hash
			}
		}
		out := map[string]site.BlockResult{}
		latest, _ := j.Latest(rb.Slug, hashes) // a journal error shows no results; runs report it
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
