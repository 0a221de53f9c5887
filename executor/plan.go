package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/paste"
)

// This file is how a whole runbook (or a part of it) runs: which blocks,
// in which order, what is skipped and why, what stops the run. cairn run
// and the daemon's plan runs both go through RunPlan, and the exported
// script's runtime keeps the same rules (export's TestRunPolicyMatchesPlan
// holds it to them).

// Selection picks the part of a runbook a plan runs; at most one field is
// set, and none means every executable block.
type Selection struct {
	Step  string // only this step's blocks
	From  string // this step and every one after it
	Block string // only this block
	// FromBlock: this block and every one after it (the page continues
	// a plan that stopped at a manual step there).
	FromBlock string
}

// ErrSelection means a Selection names no step or block of the runbook.
var ErrSelection = errors.New("no such step or block")

// Plan is the blocks a run goes through, in document order.
type Plan struct {
	Runbook *runbook.Runbook
	Blocks  []*runbook.Block
}

// NewPlan selects the executable blocks sel names (manual blocks
// included: the plan stops or asks there).
func NewPlan(rb *runbook.Runbook, sel Selection) (*Plan, error) {
	n := 0
	for _, s := range []string{sel.Step, sel.From, sel.Block, sel.FromBlock} {
		if s != "" {
			n++
		}
	}
	// A step and a first block in it: the rest of that step (a plan of one
	// step going on after a manual step).
	if n > 1 && !(n == 2 && sel.Step != "" && sel.FromBlock != "") {
		return nil, fmt.Errorf("%w: give only one of a step, a first step, a block and a first block", ErrSelection)
	}
	for _, id := range []string{sel.Step, sel.From} {
		if id != "" && rb.StepByID(id) == nil {
			ids := make([]string, len(rb.Steps))
			for i, s := range rb.Steps {
				ids[i] = s.ID
			}
			return nil, fmt.Errorf("%w: %s has no step %q (steps: %s)", ErrSelection, rb.Path, id, strings.Join(ids, ", "))
		}
	}
	p := &Plan{Runbook: rb}
	started := sel.From == "" && sel.FromBlock == ""
	for _, b := range rb.Blocks {
		if !b.Executable() {
			continue
		}
		switch {
		case sel.Block != "":
			if b.ID == sel.Block {
				p.Blocks = append(p.Blocks, b)
			}
			continue
		case sel.Step != "":
			if sel.FromBlock != "" && b.ID == sel.FromBlock {
				started = true
			}
			if b.Step != nil && b.Step.ID == sel.Step && (sel.FromBlock == "" || started) {
				p.Blocks = append(p.Blocks, b)
			}
			continue
		}
		if !started && (sel.From != "" && b.Step != nil && b.Step.ID == sel.From || sel.FromBlock != "" && b.ID == sel.FromBlock) {
			started = true
		}
		if started {
			p.Blocks = append(p.Blocks, b)
		}
	}
	for _, id := range []string{sel.Block, sel.FromBlock} {
		if id != "" && len(p.Blocks) == 0 {
			return nil, fmt.Errorf("%w: %s has no executable block %q", ErrSelection, rb.Path, id)
		}
	}
	return p, nil
}

// Prompt is what a person is asked before a block: to confirm a change or
// to do a manual step. Where and What are filled in for them to read, with
// secret values masked.
type Prompt struct {
	Block   *runbook.Block
	Message string // the block's confirm= text (or a default); "" for a manual step
	Where   string // where it runs: the kube context, the hosts, this machine ("" for a manual step)
	What    string // the command it runs, or the manual step's text
	// For a manual step: the hosts the runbook's host parameters name
	// (where a terminal may open), and the values of the run.
	Hosts  []string
	Values map[string]string
}

// HostsNamed are the hosts a runbook's host and hosts parameters name with
// these values, each once in its one spelling, sorted: the hosts a
// terminal may open on.
func HostsNamed(rb *runbook.Runbook, values map[string]string) []string {
	var out []string
	for _, p := range rb.Params {
		if p.Type != runbook.TypeHost && p.Type != runbook.TypeHosts {
			continue
		}
		for _, h := range runbook.SplitHosts(values[p.Name]) {
			if h = runbook.CanonicalHost(h); !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Prompter asks a person. The terminal (cairn run), the daemon (the
// reader's answers sent with a plan) and tests implement it.
type Prompter interface {
	// Confirm asks whether a block that changes things may run. An error
	// means no answer could be had (no input): the plan stops there,
	// unless a failure already stopped it and only clean-up is left.
	Confirm(ctx context.Context, p *Prompt) (bool, error)
	// Manual shows a manual step and returns when it is done; an error
	// stops the plan there.
	Manual(ctx context.Context, p *Prompt) error
}

// Skip says why a block of a plan did not run.
type Skip string

const (
	// SkipCondition: its when= is false for these parameters.
	SkipCondition Skip = "condition"
	// SkipAfterFailure: an earlier block failed and it is not always=true.
	SkipAfterFailure Skip = "after-failure"
	// SkipManual: a manual step, done by hand.
	SkipManual Skip = "manual"
	// SkipUnconfirmed: clean-up after a failure that needed a confirmation
	// no one could give.
	SkipUnconfirmed Skip = "unconfirmed"
)

// Outcome is what became of one block of a plan.
type Outcome struct {
	Block  *runbook.Block
	Skip   Skip    // "" when it ran
	Why    string  // for a skip, in words
	Record *Record // when it ran
	// WriteBack is the write-back's error, if one was attempted and failed.
	WriteBack error
}

// PlanSink hears how a plan goes.
type PlanSink interface {
	// Next is called as each block comes up (n counts from 1).
	Next(b *runbook.Block, n, total int)
	// Start is called when a prepared block is about to run; its output
	// goes to the Sink returned.
	Start(r *Run) Sink
	// Done is called when a block has run or was skipped.
	Done(o Outcome)
}

// PlanOptions are how RunPlan runs a plan.
type PlanOptions struct {
	Params   map[string]string
	Prompter Prompter
	// Yes confirms every block without asking (and passes manual steps).
	Yes bool
	// Hashes, if set, are the block hashes the reader was shown (the page);
	// a block of the plan whose hash differs or is missing stops the plan.
	Hashes map[string]string
	// WriteBack, if set, is called with each verified record; it returns
	// the runbook to go on with (re-read after the write) and the
	// write-back's error.
	WriteBack func(rb *runbook.Runbook, rec *Record) (*runbook.Runbook, error)
}

// PlanResult sums a plan up.
type PlanResult struct {
	Total, Verified, Skipped int
	// Failed is the first block that did not verify; after it only
	// always=true blocks ran.
	Failed *runbook.Block
	// WriteBackFailed counts verified blocks whose output could not be
	// written back.
	WriteBackFailed int
}

// ResumeStep is the step a run that stopped at b resumes from.
func ResumeStep(b *runbook.Block) string {
	if b.Step == nil {
		return b.ID
	}
	return b.Step.ID
}

// ErrNotConfirmed means a person answered no to a confirmation.
var ErrNotConfirmed = errors.New("not confirmed")

// RunPlan runs a plan's blocks in order: a block whose when= is false is
// skipped; a manual step is shown to the Prompter; a block that needs
// confirmation runs only when confirmed; after the first failure only
// always=true blocks run. It returns an error when the plan stopped
// before its end for a reason other than a failed block (no
// confirmation, a block refused by Prepare, cancellation); the result
// says how far it got.
func (e *Engine) RunPlan(ctx context.Context, p *Plan, opt PlanOptions, sink PlanSink) (*PlanResult, error) {
	rb := p.Runbook
	res := &PlanResult{Total: len(p.Blocks)}
	values, err := ResolveParams(rb, opt.Params)
	if err != nil {
		return res, err
	}
	for i, pb := range p.Blocks {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		// After a write-back the runbook was read again: its blocks are new
		// values with the same ids.
		b := rb.BlockByID(pb.ID)
		if b == nil {
			return res, fmt.Errorf("%w: %s no longer has block %q", ErrUnknownBlock, rb.Path, pb.ID)
		}
		sink.Next(b, i+1, len(p.Blocks))
		if opt.Hashes != nil && opt.Hashes[b.ID] != b.Hash {
			return res, fmt.Errorf("%w: block %q changed since the page was loaded; reload the page", ErrHashMismatch, b.ID)
		}
		if res.Failed != nil && !b.Always {
			sink.Done(Outcome{Block: b, Skip: SkipAfterFailure,
				Why: fmt.Sprintf("block %q failed (only always=true blocks run after a failure)", res.Failed.ID)})
			continue
		}
		if !b.When.Eval(values) {
			res.Skipped++
			sink.Done(Outcome{Block: b, Skip: SkipCondition, Why: conditionFalse(b)})
			continue
		}
		if b.Target == runbook.TargetManual {
			if !opt.Yes {
				pr := &Prompt{Block: b, What: ManualShown(rb, b, values), Hosts: HostsNamed(rb, values), Values: values}
				if err := opt.Prompter.Manual(ctx, pr); err != nil {
					return res, err
				}
			}
			sink.Done(Outcome{Block: b, Skip: SkipManual, Why: "done by hand"})
			continue
		}
		confirmed := opt.Yes
		if b.Confirm && !opt.Yes {
			pr := &Prompt{Block: b, Message: confirmMessage(b), Where: e.WhereShown(rb, b, values) + e.TargetsShown(ctx, rb, b, opt.Params), What: CommandShown(rb, b, values)}
			ok, err := opt.Prompter.Confirm(ctx, pr)
			switch {
			case err != nil && res.Failed != nil: // clean-up after a failure: skip it, keep the failure
				sink.Done(Outcome{Block: b, Skip: SkipUnconfirmed, Why: err.Error()})
				continue
			case err != nil:
				return res, err
			case !ok:
				return res, fmt.Errorf("block %q %w; stopped", b.ID, ErrNotConfirmed)
			}
			confirmed = true
		}
		r, err := e.Prepare(Request{Runbook: rb, BlockID: b.ID, Params: opt.Params, Confirmed: confirmed})
		if err != nil {
			return res, fmt.Errorf("%s:%d: block %q: %w", rb.Path, b.Pos.Line, b.ID, err)
		}
		rec := r.Execute(ctx, sink.Start(r))
		o := Outcome{Block: b, Record: rec}
		if rec.Status == StatusVerified {
			res.Verified++
			if opt.WriteBack != nil {
				nrb, err := opt.WriteBack(rb, rec)
				if err != nil {
					o.WriteBack = err
					res.WriteBackFailed++
				}
				if nrb != nil {
					rb = nrb
				}
			}
		} else if res.Failed == nil {
			res.Failed = b
		}
		sink.Done(o)
		if rec.Status == StatusCancelled {
			return res, context.Canceled
		}
	}
	return res, nil
}

// TargetsShown is, for a pod or node block, the pods or nodes it would
// run on now, as a confirmation names them (" — now: a, b, c"), or why
// they cannot be listed; "" for other blocks. It asks the cluster (at most
// 10 s).
func (e *Engine) TargetsShown(ctx context.Context, rb *runbook.Runbook, b *runbook.Block, params map[string]string) string {
	if b.Target != runbook.TargetPod && b.Target != runbook.TargetNode {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names, err := e.Resolve(ctx, rb, b.ID, params)
	if err != nil {
		return " (cannot list them now: " + err.Error() + ")"
	}
	return " — now: " + ShortList(names, 20)
}

// ShortList is names joined with ", ", the first max of them and how many
// more.
func ShortList(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// conditionFalse is why a block whose when= is false is skipped.
func conditionFalse(b *runbook.Block) string { return b.When.Src + " is false" }

// confirmMessage is what a person is asked before a block that needs
// confirmation.
func confirmMessage(b *runbook.Block) string {
	if b.ConfirmMsg == "" || b.ConfirmMsg == "true" {
		return "this step changes the target"
	}
	return b.ConfirmMsg
}

// Planned is one block of a plan as it would go with the given values,
// before anything runs: what a person confirms once for a whole plan (the
// page's run-a-step dialog, cairn run --dry-run).
type Planned struct {
	Block   *runbook.Block
	Skip    Skip   // SkipCondition, SkipManual, or "" when it runs
	Why     string // for a skip, in words
	Confirm string // the confirmation it asks, if any
	Where   string // where it runs ("" for a manual step or a skip)
	What    string // the block's text under the parameter values it reads (or the manual step's, filled in); secrets masked
}

// Preview is how RunPlan would go through p with these parameters if
// every block verified: which blocks run, where, which ask for a
// confirmation, which are manual and which are skipped and why. A plan that
// would stop for want of a captured value is an ErrUnmet error (known says
// which values are at hand).
func (e *Engine) Preview(p *Plan, sel Selection, params map[string]string, known func(string) bool) ([]Planned, error) {
	rb := p.Runbook
	values, err := ResolveParams(rb, params)
	if err != nil {
		return nil, err
	}
	if err := UnmetError(rb, sel, values, p.Unmet(values, known)); err != nil {
		return nil, err
	}
	out := make([]Planned, 0, len(p.Blocks))
	for _, b := range p.Blocks {
		pl := Planned{Block: b}
		switch {
		case !b.When.Eval(values):
			pl.Skip, pl.Why = SkipCondition, conditionFalse(b)
		case b.Target == runbook.TargetManual:
			pl.Skip, pl.Why, pl.What = SkipManual, "done by hand", ManualShown(rb, b, values)
		default:
			pl.Where, pl.What = e.WhereShown(rb, b, values), bodyShown(rb, b, values)
			if b.Confirm {
				pl.Confirm = confirmMessage(b)
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

// bodyShown is a block's text as written, under one comment line with the
// values of the parameters it reads (secret ones masked): what a dry run
// shows. Filling values into the text would misquote them where the text
// quotes them itself.
func bodyShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	var with []string
	for _, ref := range b.Refs {
		p := rb.ParamByName(ref)
		if p == nil {
			continue
		}
		v := values[ref]
		if p.Secret && v != "" {
			v = Mask
		}
		with = append(with, ref+"="+runbook.ShellWord(v))
	}
	if len(with) == 0 {
		return b.Content
	}
	return "# with " + strings.Join(with, " ") + "\n" + b.Content
}

// ManualShown is a manual step's text with the values filled in, for a
// person to follow: a shell script (bash, sh) with each value quoted for
// where it stands, so that it can be pasted as it is; other text as
// TextShown has it (prose often holds a command, so values that are not
// plain words are shell-quoted there too). Secret values are masked.
func ManualShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	if !runbook.IsShellLang(b.Lang) {
		return TextShown(rb, b.Content, values)
	}
	shown := map[string]string{}
	for k, v := range values {
		if p := rb.ParamByName(k); p != nil && p.Secret {
			v = Mask
		}
		shown[k] = v
	}
	return runbook.ShowShell(b.Content, shown)
}

// TextShown is text with parameter values filled in for a reader to read
// or copy: secret ones masked, others shell-quoted when they are not plain.
func TextShown(rb *runbook.Runbook, text string, values map[string]string) string {
	shown := map[string]string{}
	for k, v := range values {
		switch p := rb.ParamByName(k); {
		case p != nil && p.Secret:
			shown[k] = Mask
		case v == "":
			shown[k] = v
		default:
			shown[k] = runbook.ShellWord(v)
		}
	}
	return runbook.Substitute(text, shown, false)
}

// WhereShown is where a block would run: the kube context, the hosts, or
// this machine.
func (e *Engine) WhereShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	switch b.Target {
	case runbook.TargetKube:
		if e.KubeWhere == nil {
			return "no kube context configured"
		}
		w, err := e.KubeWhere(rb)
		if err != nil {
			return err.Error()
		}
		if b.Namespace != "" {
			w += ", namespace " + TextShown(rb, b.Namespace, values)
		}
		return w
	case runbook.TargetPod, runbook.TargetNode:
		if e.KubeWhere == nil {
			return "no kube context configured"
		}
		w, err := e.KubeWhere(rb)
		if err != nil {
			return err.Error()
		}
		return w + ", " + PodsOrNodesShown(rb, b, values)
	case runbook.TargetSSH:
		w := "ssh " + strings.Join(runbook.SplitHosts(values[b.Hosts]), " ")
		if b.Sudo {
			w += " (sudo)"
		}
		return w
	}
	return "this machine"
}

// PodsOrNodesShown names the pods or nodes a pod or node block chooses,
// as its attributes say (they are listed only when it runs).
func PodsOrNodesShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	ns := ""
	if b.Namespace != "" {
		ns = " in namespace " + TextShown(rb, b.Namespace, values)
	}
	switch {
	case b.Target == runbook.TargetNode && b.Nodes != "":
		return "nodes " + TextShown(rb, b.Nodes, values)
	case b.Target == runbook.TargetNode:
		return "nodes with labels " + TextShown(rb, b.Selector, values)
	case b.Workload != "":
		return "pods of " + TextShown(rb, b.Workload, values) + ns
	case b.Name != "":
		return "pod " + TextShown(rb, b.Name, values) + ns
	}
	return "pods with labels " + TextShown(rb, b.Selector, values) + ns
}

// CommandShown is what a block would do: the command a reader would paste
// (runbook/paste, as the page's Copy and confirmation give it), with the
// values known so far; secrets and values not captured yet are named, not
// shown.
func CommandShown(rb *runbook.Runbook, b *runbook.Block, values map[string]string) string {
	t := paste.Build(rb, b)
	if t == nil {
		return b.Content
	}
	return t.Fill(values)
}
