package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/paste"
)

const runExamples = `  # Run every step of a runbook against the sandbox
  cairn run content/practice.md

  # One step, with parameters
  cairn run kubeadm-ha --step init-first-cp --param LOAD_BALANCER_DNS=lb.example.org

  # Resume after a failure, answering yes to confirmations
  cairn run cilium-multipool --from restart-remaining --yes`

func runRun(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "run", "run RUNBOOK [--step ID | --from ID | --block ID] [--param K=V ...] [--yes]", runExamples)
	content := flags.String("content", "content", "content folder (a RUNBOOK given as a slug is looked up here)")
	step := flags.String("step", "", "run only this step")
	from := flags.String("from", "", "start at this step and run the rest")
	block := flags.String("block", "", "run only this block")
	yes := flags.Bool("yes", false, "answer yes to every confirmation and pass manual steps")
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
	if ef.useSandbox == "start" {
		return &usageError{cmd: "run", msg: "--sandbox=start is for cairn serve; start one with `cairn sandbox up`, then use --sandbox=yes"}
	}
	if n := countSet(*step, *from, *block); n > 1 {
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
	plan, err := planBlocks(rb, *step, *from, *block)
	if err != nil {
		return err
	}
	x, err := setupExecutor(ctx, &ef, contentDir)
	if err != nil {
		return err
	}
	defer x.Close()
	for _, n := range x.notes {
		fmt.Fprintf(m.Stderr, "executor: %s\n", n)
	}
	// Against the sandbox, what it knows of itself (its load balancer, its
	// nodes' images, ...) fills the parameters --param leaves out.
	var fromSandbox []string
	for k, v := range x.targets.sandboxValues(rb) {
		if _, ok := given[k]; !ok {
			given[k] = v
			fromSandbox = append(fromSandbox, k+"="+v)
		}
	}
	if len(fromSandbox) > 0 {
		slices.Sort(fromSandbox)
		fmt.Fprintf(m.Stderr, "executor: from the sandbox: %s\n", strings.Join(fromSandbox, " "))
	}
	values, err := executor.ResolveParams(rb, given)
	if err != nil {
		return err
	}
	e := x.engine
	// Non-secret captures of earlier runs let --from resume.
	prev, err := e.Journal.Captures(rb.Slug)
	if err != nil {
		return err
	}
	for k, v := range seeds {
		prev[k] = v
	}
	e.SetCaptures(rb, prev)

	in := bufio.NewReader(m.Stdin)
	total := len(plan)
	var lastStep *runbook.Step
	verified, skipped, wbFailed := 0, 0, 0
	var failed *runbook.Block // the first block that failed; then only always=true blocks run
	for i, b := range plan {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.Step != lastStep && b.Step != nil {
			fmt.Fprintf(m.Stdout, "\n== %d. %s (%s)\n", b.Step.Number, b.Step.Title, b.Step.ID)
			lastStep = b.Step
		}
		fmt.Fprintf(m.Stdout, "[%d/%d] %s  %s\n", i+1, total, b.ID, b.Badge(rb))
		if failed != nil && !b.Always {
			fmt.Fprintf(m.Stdout, "  not run: block %q failed (only always=true blocks run after a failure)\n", failed.ID)
			continue
		}
		if !b.When.Eval(values) {
			fmt.Fprintf(m.Stdout, "  skipped: %s is false\n", b.When.Src)
			skipped++
			continue
		}
		if b.Target == runbook.TargetManual {
			fmt.Fprintf(m.Stdout, "  manual step, do this by hand:\n%s", indent(manualShown(rb, b, values), "    "))
			if !*yes {
				fmt.Fprint(m.Stdout, "  press Enter when done (Ctrl+C stops) ")
				if _, err := in.ReadString('\n'); err != nil {
					return fmt.Errorf("manual step %q: no answer on standard input; pass --yes to go on", b.ID)
				}
			}
			continue
		}
		confirmed := *yes
		if b.Confirm && !*yes {
			msg := b.ConfirmMsg
			if msg == "" || msg == "true" {
				msg = "this step changes the target"
			}
			// Say what will happen before the reader answers.
			fmt.Fprintf(m.Stdout, "  %s\n  where: %s\n  what:\n%s", msg, whereShown(x, rb, b, values), indent(whatShown(rb, b, values), "    "))
			fmt.Fprint(m.Stdout, "  Run it? [y/N] ")
			ans, err := in.ReadString('\n')
			if err != nil && ans == "" {
				if failed != nil { // clean-up after a failure: skip it, keep the failure's hint
					fmt.Fprintf(m.Stdout, "\n  not run: it needs confirmation and standard input gave none (pass --yes)\n")
					continue
				}
				return fmt.Errorf("block %q needs confirmation and standard input gave none; pass --yes", b.ID)
			}
			if a := strings.ToLower(strings.TrimSpace(ans)); a != "y" && a != "yes" {
				return fmt.Errorf("block %q not confirmed; stopped (resume with: cairn run %s --from %s)", b.ID, positional[0], stepID(b))
			}
			confirmed = true
		}
		r, err := e.Prepare(executor.Request{Runbook: rb, BlockID: b.ID, Params: given, Confirmed: confirmed})
		if err != nil {
			return fmt.Errorf("%s:%d: block %q: %w", rb.Path, b.Pos.Line, b.ID, err)
		}
		if r.Where != "" && b.Target == runbook.TargetSSH {
			fmt.Fprintf(m.Stdout, "  on %s\n", r.Where)
		}
		sink := &termSink{w: m.Stdout, multi: len(r.Job.Hosts) > 1}
		rec := r.Execute(ctx, sink)
		sink.endLines()
		switch rec.Status {
		case executor.StatusVerified:
			verified++
			fmt.Fprintf(m.Stdout, "  ✓ verified in %.1fs\n", rec.Duration)
			if ef.writeBack || rb.Meta.WriteBack {
				src, err := executor.WriteBack(rb, rec)
				outcome := "written"
				if err != nil {
					outcome = err.Error()
					wbFailed++
					fmt.Fprintf(m.Stderr, "  write-back: %v\n", err)
				} else if nrb, err := runbook.Parse(rb.Path, src); err == nil {
					rb = nrb
				}
				_ = e.Journal.SetWriteBack(rec.ID, outcome)
			}
		default:
			fmt.Fprintf(m.Stdout, "  ✗ %s: %s\n", rec.Status, strings.Join(rec.Reasons, "; "))
			if failed == nil {
				failed = b
			}
		}
	}
	fmt.Fprintf(m.Stdout, "\n%d verified, %d skipped of %s\n", verified, skipped, count(total, "block"))
	if failed != nil {
		fmt.Fprintf(m.Stderr, "stopped at %s:%d (block %q); after fixing, resume with: cairn run %s --from %s\n",
			rb.Path, failed.Pos.Line, failed.ID, positional[0], stepID(failed))
		return errSilent
	}
	if wbFailed > 0 {
		return fmt.Errorf("%d verified outputs could not be written back to %s (see above)", wbFailed, rb.Path)
	}
	return nil
}

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

func stepID(b *runbook.Block) string {
	if b.Step == nil {
		return b.ID
	}
	return b.Step.ID
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

func planBlocks(rb *runbook.Runbook, step, from, block string) ([]*runbook.Block, error) {
	var out []*runbook.Block
	started := from == ""
	if from != "" && rb.StepByID(from) == nil {
		return nil, unknownStep(rb, from)
	}
	if step != "" && rb.StepByID(step) == nil {
		return nil, unknownStep(rb, step)
	}
	for _, b := range rb.Blocks {
		if !b.Executable() {
			continue
		}
		switch {
		case block != "":
			if b.ID == block {
				out = append(out, b)
			}
			continue
		case step != "":
			if b.Step != nil && b.Step.ID == step {
				out = append(out, b)
			}
			continue
		}
		if !started && b.Step != nil && b.Step.ID == from {
			started = true
		}
		if started {
			out = append(out, b)
		}
	}
	if block != "" && len(out) == 0 {
		return nil, &usageError{cmd: "run", msg: fmt.Sprintf("%s has no executable block %q", rb.Path, block)}
	}
	return out, nil
}

func unknownStep(rb *runbook.Runbook, id string) error {
	ids := make([]string, len(rb.Steps))
	for i, s := range rb.Steps {
		ids[i] = s.ID
	}
	return &usageError{cmd: "run", msg: fmt.Sprintf("%s has no step %q (steps: %s)", rb.Path, id, strings.Join(ids, ", "))}
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
}

func (s *termSink) Output(host string, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bol == nil {
		s.bol = map[string]bool{}
	}
	pfx := "  │ "
	if s.multi {
		pfx = fmt.Sprintf("  │ %s: ", host)
	}
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		// Another host's line is open: end it, so that each line on the
		// terminal is one host's (that host's next output starts anew).
		s.endOpen(host)
		if !s.bol[host] {
			io.WriteString(s.w, pfx)
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

// manualShown is a manual step's text with the values filled in, for a
// person to follow: a shell script (bash, sh) with each value quoted for
// where it stands, so that it can be pasted as it is; other text as
// shownText has it (prose often holds a command, so values that are not
// plain words are shell-quoted there too). Secret values are masked.
func manualShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	if !runbook.IsShellLang(b.Lang) {
		return shownText(rb, b.Content, values)
	}
	shown := map[string]string{}
	for k, v := range values {
		if p := rb.ParamByName(k); p != nil && p.Secret {
			v = executor.Mask
		}
		shown[k] = v
	}
	return runbook.ShowShell(b.Content, shown)
}

// shownText is text with parameter values filled in for a reader to read
// or copy: secret ones masked, others shell-quoted when they are not plain.
func shownText(rb *runbook.Runbook, text string, values map[string]string) string {
	shown := map[string]string{}
	for k, v := range values {
		switch p := rb.ParamByName(k); {
		case p != nil && p.Secret:
			shown[k] = executor.Mask
		case v == "":
			shown[k] = v
		default:
			shown[k] = runbook.ShellWord(v)
		}
	}
	return runbook.Substitute(text, shown, false)
}

// whereShown is where a block would run: the kube context, the hosts, or
// this machine.
func whereShown(x *execSetup, rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	switch b.Target {
	case runbook.TargetKube:
		if x.engine.KubeWhere == nil {
			return "no kube context configured"
		}
		w, err := x.engine.KubeWhere(rb)
		if err != nil {
			return err.Error()
		}
		if b.Namespace != "" {
			w += ", namespace " + shownText(rb, b.Namespace, values)
		}
		return w
	case runbook.TargetSSH:
		w := "ssh " + strings.Join(runbook.SplitHosts(values[b.Hosts]), " ")
		if b.Sudo {
			w += " (sudo)"
		}
		return w
	}
	return "this machine"
}

// whatShown is what a block would do: the command a reader would paste
// (runbook/paste, as the page's Copy and confirmation give it), with the
// values known so far; secrets and values not captured yet are named, not
// shown.
func whatShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	t := paste.Build(rb, b)
	if t == nil {
		return b.Content
	}
	return t.Fill(values)
}
