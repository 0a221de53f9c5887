package targets

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/sandbox"
)

// Config is where blocks run: the executor flags serve, daemon and run
// share.
type Config struct {
	Kubeconfig string // kubeconfig for kube blocks ("": $KUBECONFIG, ~/.kube/config or the sandbox's)
	Context    string // its context ("": current-context)
	// NodeImage is the image of target=node pods ("": the sandbox's when
	// its nodes are the cluster, else kube.DefaultNodeImage).
	NodeImage  string
	SSHConfig  string // OpenSSH client config for ssh blocks
	KnownHosts string
	Identity   []string // private key files
	// TrustOnFirstUse accepts and remembers unknown host keys (changed keys
	// are always refused).
	TrustOnFirstUse bool
	// Sandbox: auto (when it runs and no other setting says otherwise;
	// followed as it comes and goes), yes (fail without one), no, start
	// (StartSandbox starts one when none runs).
	Sandbox string
	// SandboxDir is the sandbox's state folder (default
	// sandbox.DefaultStateDir()).
	SandboxDir string
	// Scope is the part of the sandbox the caller will use (cairn run: its
	// plan's blocks): only those components are probed, and only their
	// problems keep the sandbox from being used. Nil: all of it (cairn
	// serve, whose reader may run any block).
	Scope *sandbox.Scope
	// SandboxBuild is a command that builds missing sandbox binaries
	// before StartSandbox starts one.
	SandboxBuild string
	// SandboxUp starts a sandbox (default: this binary's `sandbox up`);
	// --state-dir is added. SandboxEnv is added to its environment.
	SandboxUp  []string
	SandboxEnv []string
	// Journal is the run journal (default CONTENT/.cairn/journal.db).
	Journal string
	// Supervisor is the command local runs go through (a supervisor per
	// run that kills the process group when its parent dies).
	Supervisor []string
}

// Executor is a wired engine and what it needs closed.
type Executor struct {
	Engine  *executor.Engine
	Targets *Set
	// KubeErr is why kube blocks are off, if they are.
	KubeErr error
	// Notes say where blocks will run, one line each.
	Notes      []Note
	closers    []func()
	supervisor []string // Config.Supervisor, for terminals
}

// Open builds the engine with every runner it can, and the journal of the
// content folder (or cfg.Journal).
func Open(ctx context.Context, cfg Config, content string) (*Executor, error) {
	x := &Executor{supervisor: cfg.Supervisor}
	journalPath := cfg.Journal
	if journalPath == "" {
		journalPath = filepath.Join(content, ".cairn", "journal.db")
	}
	j, err := openJournal(journalPath)
	if err != nil {
		return nil, err
	}
	x.closers = append(x.closers, func() { j.Close() })

	t, err := New(ctx, cfg)
	if err != nil {
		j.Close()
		return nil, err
	}
	x.Targets = t
	x.closers = append(x.closers, t.Close)
	x.Notes = append(x.Notes, t.cur.notes...)
	x.KubeErr = t.cur.kubeErr
	runners := map[string]executor.Runner{executor.RunnerLocal: &local.Runner{Supervisor: cfg.Supervisor}}
	for _, key := range []string{executor.RunnerKube, executor.RunnerKubeShell, executor.RunnerPod, executor.RunnerNode, executor.RunnerSSH} {
		runners[key] = slot{t: t, key: key}
	}
	x.Engine = &executor.Engine{Runners: runners, Journal: j, Objects: kube.Checker{}, KubeWhere: t.KubeWhere, CheckRequires: true}
	return x, nil
}

// Close stops what Follow and StartSandbox started, then the runners and
// the journal.
func (x *Executor) Close() {
	for i := len(x.closers) - 1; i >= 0; i-- {
		x.closers[i]()
	}
}

// Wire gives the API server the engine, the targets' view, the sandbox's
// values and the reader's acceptance of another sandbox (serve and daemon
// alike).
func (x *Executor) Wire(d *daemon.Server, say func(string)) {
	d.Engine = x.Engine
	d.Where = x.Engine.KubeWhere
	d.Targets = x.Targets.View
	d.SandboxValues = x.Targets.SandboxValues
	d.AcceptSandbox = func(ctx context.Context, id string) error { return x.Targets.Accept(ctx, id, say) }
}

// FollowInterval is how often a server looks at the sandbox.
const FollowInterval = 2 * time.Second

// Follow keeps the targets in step with the sandbox until Close; say gets
// one line per change.
func (x *Executor) Follow(ctx context.Context, say func(string)) {
	x.background(ctx, func(ctx context.Context) { x.Targets.Follow(ctx, FollowInterval, say) })
}

// SweepNodePods deletes, in the background and within half a minute, the
// node pods an executor of this machine and user left when it was killed
// (kube.Runner.SweepNodePods); serve and daemon call it once at start, so
// a killed one's pods go without waiting for the next node block. say gets
// a line when there were some.
func (x *Executor) SweepNodePods(ctx context.Context, say func(string)) {
	x.background(ctx, func(ctx context.Context) {
		kr := x.Targets.get().kube
		if kr == nil {
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		n, err := kr.SweepNodePods(ctx, "")
		switch {
		case err != nil && ctx.Err() == nil:
			say("node pods an earlier executor left: " + err.Error())
		case n > 0:
			say(fmt.Sprintf("deleted %d node pod(s) an earlier executor of this machine left (it was killed)", n))
		}
	})
}

// background runs f until Close, which cancels it and waits for it.
// Closers run in reverse, so it stops before the targets it uses close.
func (x *Executor) background(ctx context.Context, f func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	x.closers = append(x.closers, func() { cancel(); <-done })
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
