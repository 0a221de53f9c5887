package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

const runExamples = `  # Run every step of a runbook against the sandbox
  cairn run content/practice.md

  # One step, with parameters
  cairn run kubeadm-ha --step init-first-cp --param LOAD_BALANCER_DNS=lb.example.org

  # Resume after a failure, answering yes to confirmations
  cairn run cilium-multipool --from restart-remaining --yes

  # See what a run would do, block by block, without running anything
  cairn run kubeadm-ha --from join-control-plane --dry-run`

func runRun(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "run", "run RUNBOOK [--step ID | --from ID | --block ID] [--param K=V ...] [--yes]", runExamples)
	content := flags.String("content", "content", "content folder (a RUNBOOK given as a slug is looked up here)")
	step := flags.String("step", "", "run only this step")
	from := flags.String("from", "", "start at this step and run the rest")
	block := flags.String("block", "", "run only this block")
	yes := flags.Bool("yes", false, "answer yes to every confirmation and pass manual steps")
	dryRun := flags.Bool("dry-run", false, "print what would run, where, and what is skipped and why, then stop (nothing runs)")
	var params, captures stringList
	flags.Var(&params, "param", "parameter value NAME=VALUE (repeatable)")
	flags.Var(&captures, "capture", "value an earlier run captured, NAME=VALUE (repeatable; non-secret ones are taken from the journal)")
	var ef execFlags
	ef.register(flags)
	positional, err := parseInterleaved(flags, args)
	if err != nil {
		return done(err)
	}
	if len(positional) != 1 {
		return &usageError{cmd: "run", msg: "give exactly one RUNBOOK (a file or a slug)"}
	}
	if ef.Sandbox == "start" {
		return &usageError{cmd: "run", msg: "--sandbox=start is for cairn serve; start one with `cairn sandbox up`, then use --sandbox=yes"}
	}
	if (*step != "") && (*from != "") || (*step != "" || *from != "") && *block != "" {
		return &usageError{cmd: "run", msg: "use only one of --step, --from and --block"}
	}
	rb, contentDir, err := loadRunbook(positional[0], *content)
	if err != nil {
		return err
	}
	given, err := keyValues(params, "--param")
	if err != nil {
		return err
	}
	seeds, err := keyValues(captures, "--capture")
	if err != nil {
		return err
	}
	p, err := executor.NewPlan(rb, executor.Selection{Step: *step, From: *from, Block: *block})
	if err != nil {
		return &usageError{cmd: "run", msg: strings.TrimPrefix(err.Error(), executor.ErrSelection.Error()+": ")}
	}
	ef.Config.Scope = sandboxScope(p.Blocks, given)
	x, err := openExecutor(ctx, &ef, contentDir)
	if err != nil {
		return err
	}
	defer x.Close()
	// Only what concerns the blocks this run has: a runbook without kube
	// blocks hears nothing of the cluster.
	for _, n := range x.Notes {
		if n.Concerns(p.Blocks) {
			fmt.Fprintf(m.Stderr, "executor: %s\n", n)
		}
	}
	// Against the sandbox, what it knows of itself (its load balancer, its
	// nodes' images, ...) fills the parameters --param leaves out.
	var fromSandbox []string
	for k, v := range x.Targets.SandboxValues(rb) {
		if _, ok := given[k]; !ok {
			given[k] = v
			fromSandbox = append(fromSandbox, k+"="+v)
		}
	}
	if len(fromSandbox) > 0 {
		slices.Sort(fromSandbox)
		fmt.Fprintf(m.Stderr, "executor: from the sandbox: %s\n", strings.Join(fromSandbox, " "))
	}
	if _, err := executor.ResolveParams(rb, given); err != nil {
		return err
	}
	e := x.Engine
	// Non-secret captures of earlier runs let --from resume.
	prev, err := e.Journal.Captures(rb.Slug)
	if err != nil {
		return err
	}
	for k, v := range seeds {
		prev[k] = v
	}
	e.SetCaptures(rb, prev)
	// A run that would stop at a block for want of a captured value (a
	// secret one is never kept) is refused before anything runs, saying
	// where to start instead.
	sel := executor.Selection{Step: *step, From: *from, Block: *block}
	planned, err := e.Preview(p, sel, given, func(n string) bool { _, ok := prev[n]; return ok })
	if errors.Is(err, executor.ErrUnmet) {
		return &usageError{cmd: "run", msg: strings.TrimPrefix(err.Error(), executor.ErrUnmet.Error()+": ")}
	}
	if err != nil {
		return err
	}
	if *dryRun {
		printPlan(m.Stdout, rb, planned, true)
		return nil
	}
	term := &terminal{m: m, in: bufio.NewReader(m.Stdin), rb: rb}
	// At a terminal, a manual step can be done in a shell opened from the
	// prompt, here or on a host the runbook names.
	if f, ok := m.Stdin.(*os.File); ok && isTerminal(m.Stdin) && isTerminal(m.Stdout) && !*yes {
		term.shells = newRunShells(x, rb, f, m.Stdout)
	}
	// At a terminal, the plan first, then one question: a person sees what
	// runs where before anything does (scripts and --yes go straight on).
	if !*yes && isTerminal(m.Stdin) && len(planned) > 1 {
		printPlan(m.Stdout, rb, planned, false)
		fmt.Fprintf(m.Stdout, "\nStart? Blocks that change things still ask one by one. [y/N] ")
		line, _ := term.in.ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return fmt.Errorf("not started (see the whole plan with --dry-run)")
		}
	}

	opt := executor.PlanOptions{Params: given, Prompter: term, Yes: *yes}
	if ef.writeBack || rb.Meta.WriteBack {
		opt.WriteBack = func(rb *runbook.Runbook, rec *executor.Record) (*runbook.Runbook, error) {
			nrb, err := executor.WriteBackRecorded(e.Journal, rb, rec)
			if err != nil {
				fmt.Fprintf(m.Stderr, "  write-back: %v\n", err)
			}
			return nrb, err
		}
	}
	res, err := e.RunPlan(ctx, p, opt, term)
	if errors.Is(err, executor.ErrNotConfirmed) {
		return fmt.Errorf("%w (resume with: cairn run %s --from %s)", err, positional[0], executor.ResumeStep(term.cur))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "\n%d verified, %d skipped of %s\n", res.Verified, res.Skipped, count(res.Total, "block"))
	if res.Failed != nil {
		fmt.Fprintf(m.Stderr, "stopped at %s:%d (block %q); after fixing, resume with: cairn run %s --from %s\n",
			rb.Path, res.Failed.Pos.Line, res.Failed.ID, positional[0], executor.ResumeStep(res.Failed))
		return errSilent
	}
	if res.WriteBackFailed > 0 {
		return fmt.Errorf("%d verified outputs could not be written back to %s (see above)", res.WriteBackFailed, rb.Path)
	}
	return nil
}

// sandboxScope is the part of the sandbox blocks use: the cluster when one
// of them reaches it, the SSH hosts their host parameters name when each
// of those was given (else every host: a default or a value the sandbox
// fills in is known only later). Only these are probed before the run,
// and only their problems keep the sandbox from being used (#34: a block
// on 100 hosts waited for every other component's probe).
func sandboxScope(blocks []*runbook.Block, given map[string]string) *sandbox.Scope {
	sc := &sandbox.Scope{Hosts: []string{}}
	for _, b := range blocks {
		sc.Cluster = sc.Cluster || b.Target.UsesKube()
		if b.Target != runbook.TargetSSH || sc.Hosts == nil {
			continue
		}
		v, ok := given[b.Hosts]
		if !ok {
			sc.Hosts = nil
			continue
		}
		for _, h := range runbook.SplitHosts(v) {
			if hv, err := runbook.ParseHost(h); err == nil {
				sc.Hosts = append(sc.Hosts, hv.Host)
			}
		}
	}
	return sc
}

// terminal is cairn run's side of a plan: it asks on standard input and
// prints each block's progress and output.
type terminal struct {
	m      *Main
	in     *bufio.Reader
	shells *runShells // nil: not at a terminal
	rb     *runbook.Runbook
	step   *runbook.Step
	cur    *runbook.Block
	out    *termSink
}

func (t *terminal) Next(b *runbook.Block, n, total int) {
	t.cur = b
	if b.Step != t.step && b.Step != nil {
		fmt.Fprintf(t.m.Stdout, "\n== %d. %s (%s)\n", b.Step.Number, b.Step.Title, b.Step.ID)
		t.step = b.Step
	}
	fmt.Fprintf(t.m.Stdout, "[%d/%d] %s  %s\n", n, total, b.ID, b.Badge(t.rb))
}

func (t *terminal) Manual(ctx context.Context, p *executor.Prompt) error {
	w := t.m.Stdout
	fmt.Fprintf(w, "  manual step, do this by hand:\n%s", indent(p.What, "    "))
	ask := func(q string) string {
		fmt.Fprint(w, q)
		line, _ := t.in.ReadString('\n')
		return strings.TrimSpace(line)
	}
	for {
		if t.shells == nil {
			fmt.Fprint(w, "  press Enter when done (Ctrl+C stops) ")
		} else {
			where := "here"
			if len(p.Hosts) > 0 {
				where = "here, or t HOST on " + strings.Join(p.Hosts, ", ")
			}
			fmt.Fprintf(w, "  press Enter when done, t for a shell %s (Ctrl+C stops) ", where)
		}
		line, err := t.in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("manual step %q: no answer on standard input; pass --yes to go on", p.Block.ID)
		}
		a := strings.TrimSpace(line)
		if t.shells == nil || a != "t" && !strings.HasPrefix(a, "t ") {
			return nil
		}
		done, err := t.shells.open(ctx, p, strings.TrimSpace(strings.TrimPrefix(a, "t")), ask)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			fmt.Fprintf(w, "  %v\n", err)
		case done:
			fmt.Fprintln(w, "  done by hand in the shell (recorded in the journal)")
			return nil
		}
	}
}

func (t *terminal) Confirm(ctx context.Context, p *executor.Prompt) (bool, error) {
	// Say what will happen before the reader answers.
	fmt.Fprintf(t.m.Stdout, "  %s\n  where: %s\n  what:\n%s", p.Message, p.Where, indent(p.What, "    "))
	fmt.Fprint(t.m.Stdout, "  Run it? [y/N] ")
	ans, err := t.in.ReadString('\n')
	if err != nil && ans == "" {
		fmt.Fprintln(t.m.Stdout)
		return false, fmt.Errorf("block %q needs confirmation and standard input gave none; pass --yes", p.Block.ID)
	}
	a := strings.ToLower(strings.TrimSpace(ans))
	return a == "y" || a == "yes", nil
}

func (t *terminal) Start(r *executor.Run) executor.Sink {
	b := r.Job.Block
	if r.Where != "" && b.Target.Fans() {
		fmt.Fprintf(t.m.Stdout, "  on %s\n", r.Where)
	}
	// Pods and nodes are known only once the block runs: one or many,
	// each line says whose it is.
	t.out = &termSink{w: t.m.Stdout, multi: len(r.Job.Hosts) > 1 || b.Target == runbook.TargetPod || b.Target == runbook.TargetNode}
	if len(b.Mute) > 0 {
		t.out.mute, t.out.dim = b.Muted, isTerminal(t.m.Stdout)
	}
	return t.out
}

func (t *terminal) Done(o executor.Outcome) {
	w := t.m.Stdout
	switch {
	case o.Skip == executor.SkipCondition:
		fmt.Fprintf(w, "  skipped: %s\n", o.Why)
	case o.Skip == executor.SkipManual:
	case o.Skip != "":
		fmt.Fprintf(w, "  not run: %s\n", o.Why)
	case o.Record.Status == executor.StatusVerified:
		t.out.endLines()
		fmt.Fprintf(w, "  ✓ verified in %.1fs\n", o.Record.Duration)
	default:
		t.out.endLines()
		fmt.Fprintf(w, "  ✗ %s: %s\n", o.Record.Status, strings.Join(o.Record.Reasons, "; "))
	}
	if o.Record != nil && t.out.muted > 0 {
		fmt.Fprintf(w, "  %s known and harmless (%s)\n", count(t.out.muted, "line"), o.Block.MuteWhy)
	}
	if o.Record != nil && o.Record.Session != nil {
		// Where the shell session is now: what its next block starts from.
		for _, h := range slices.Sorted(maps.Keys(o.Record.Session.Hosts)) {
			st := o.Record.Session.Hosts[h]
			at := ""
			if h != "" {
				at = " on " + h
			}
			vars := make([]string, 0, len(st.Vars))
			for _, k := range slices.Sorted(maps.Keys(st.Vars)) {
				vars = append(vars, k+"="+strconv.Quote(st.Vars[k]))
			}
			fmt.Fprintf(w, "  session %s%s: in %s%s\n", o.Record.Session.Name, at, st.Dir, prefixed(" with ", strings.Join(vars, " ")))
		}
	}
}

// prefixed is p+s, or "" when s is.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// loadRunbook reads a runbook by path or by slug in the content folder, and
// says which content folder it belongs to (for the journal).
func loadRunbook(arg, content string) (*runbook.Runbook, string, error) {
	path := arg
	if _, err := os.Stat(path); err != nil {
		path = filepath.Join(content, arg+".md")
		if _, err := os.Stat(path); err != nil {
			set, _ := runbook.LoadDir(content)
			if set != nil {
				if rb := set.BySlug(arg); rb != nil {
					path = rb.Path
				}
			}
		}
	}
	dir := content
	if abs, _ := filepath.Abs(path); abs != "" {
		if cabs, _ := filepath.Abs(content); !strings.HasPrefix(abs, cabs+string(filepath.Separator)) {
			dir = filepath.Dir(path)
		}
	}
	src, err := runbook.ReadContent(dir, path)
	var ds runbook.Diagnostics
	if errors.As(err, &ds) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", &usageError{cmd: "run", msg: fmt.Sprintf("no runbook %q (neither a file nor a slug in %s)", arg, content)}
	}
	rb, err := runbook.Parse(path, src)
	if err != nil {
		return nil, "", fmt.Errorf("%w\n%s has problems; fix them first (cairn check %s)", err, path, path)
	}
	return rb, dir, nil
}

func keyValues(list []string, flagName string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, &usageError{cmd: "run", msg: fmt.Sprintf("%s %q: use NAME=VALUE", flagName, kv)}
		}
		out[k] = v
	}
	return out, nil
}

func indent(s, pfx string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(pfx + l)
		}
	}
	return b.String()
}

// termSink prints output indented, prefixed by host when there are several.
type termSink struct {
	mu    sync.Mutex
	w     io.Writer
	multi bool
	bol   map[string]bool
	seen  map[string]bool // info notices already shown (retries repeat them)
	// mute says which lines the block calls known and harmless: output is
	// then printed a whole line at a time, those lines dimmed at a
	// terminal (dim), and counted (muted).
	mute    func(string) bool
	dim     bool
	muted   int
	pending map[string]string
}

func (s *termSink) Output(host string, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := string(p)
	if s.mute != nil {
		if s.pending == nil {
			s.pending = map[string]string{}
		}
		text = s.pending[host] + text
		cut := strings.LastIndexByte(text, '\n') + 1
		s.pending[host] = text[cut:]
		text = text[:cut]
	}
	s.write(host, text)
}

// write prints text as host's output. The caller holds s.mu.
func (s *termSink) write(host, text string) {
	if s.bol == nil {
		s.bol = map[string]bool{}
	}
	pfx := "  │ "
	if s.multi {
		pfx = fmt.Sprintf("  │ %s: ", host)
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		if line == "" {
			continue
		}
		// Another host's line is open: end it, so that each line on the
		// terminal is one host's (that host's next output starts anew).
		s.endOpen(host)
		if !s.bol[host] {
			io.WriteString(s.w, pfx)
		}
		if s.mute != nil && s.mute(strings.TrimSuffix(line, "\n")) {
			s.muted++
			if s.dim {
				line = "\x1b[2m" + strings.TrimSuffix(line, "\n") + "\x1b[0m\n"
			}
		}
		io.WriteString(s.w, line)
		s.bol[host] = !strings.HasSuffix(line, "\n")
	}
}

// endLines ends any output line left open (output without a final
// newline, like curl's "ok"), so that the block's outcome starts a line.
func (s *termSink) endLines() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, rest := range s.pending {
		if rest != "" {
			s.write(h, rest)
		}
	}
	clear(s.pending)
	s.endOpen()
}

// endOpen ends the open output line of every host but those in except.
// The caller holds s.mu.
func (s *termSink) endOpen(except ...string) {
	for h, mid := range s.bol {
		if mid && !slices.Contains(except, h) {
			io.WriteString(s.w, "\n")
			s.bol[h] = false
		}
	}
}

func (s *termSink) Event(ev executor.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case "info":
		if s.seen == nil {
			s.seen = map[string]bool{}
		}
		if !s.seen[ev.Message] {
			s.seen[ev.Message] = true
			fmt.Fprintf(s.w, "  … %s\n", ev.Message)
		}
	case "retry":
		fmt.Fprintf(s.w, "  … %s\n", ev.Message)
	case "host-end":
		if ev.Message != "" {
			fmt.Fprintf(s.w, "  %s: %s\n", ev.Host, ev.Message)
		}
	}
}

// printPlan is cairn run --dry-run: each block of the plan as it would go,
// with bodies the text it would run (under the values it reads, secrets
// masked) indented under it.
func printPlan(w io.Writer, rb *runbook.Runbook, planned []executor.Planned, bodies bool) {
	runs := 0
	for _, pl := range planned {
		if pl.Skip == "" {
			runs++
		}
	}
	if bodies {
		fmt.Fprintf(w, "dry run of %s: %d of %s would run; nothing runs now\n", rb.Path, runs, count(len(planned), "block"))
	} else {
		fmt.Fprintf(w, "plan of %s: %d of %s run\n", rb.Path, runs, count(len(planned), "block"))
	}
	step := ""
	for i, pl := range planned {
		b := pl.Block
		if b.Step != nil && b.Step.ID != step {
			step = b.Step.ID
			fmt.Fprintf(w, "\n== %s (%s)\n", b.Step.Title, step)
		}
		fmt.Fprintf(w, "[%d/%d] %s  ", i+1, len(planned), b.ID)
		switch pl.Skip {
		case executor.SkipCondition:
			fmt.Fprintf(w, "skipped: %s\n", pl.Why)
			continue
		case executor.SkipManual:
			fmt.Fprintf(w, "manual step, done by hand\n")
		default:
			fmt.Fprintf(w, "%s\n", pl.Where)
			if pl.Confirm != "" {
				fmt.Fprintf(w, "  asks first: %s\n", pl.Confirm)
			}
		}
		if !bodies {
			continue
		}
		for _, line := range strings.Split(strings.TrimRight(pl.What, "\n"), "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}
