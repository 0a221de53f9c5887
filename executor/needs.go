package executor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// Unmet is a captured value a block of a plan reads that no block before
// it in the plan captures (with the plan's parameters) and no earlier run
// left: a run started there would stop at that block.
type Unmet struct {
	Block  *runbook.Block // the block that reads it
	Name   string
	Secret bool // some block captures it as a secret: never kept between runs
	// By are the blocks of the runbook before Block that capture it.
	By []*runbook.Block
}

// ErrUnmet means a run would reach a block whose captured values it
// cannot have; the message says where to start instead.
var ErrUnmet = errors.New("captured values missing")

// Unmet lists, in plan order and once per name, the captured values the
// plan's blocks would read without having them. known says whether a
// value is at hand before the plan starts (kept by an earlier run, or
// given with --capture). Blocks whose when= is false for values do not
// run, so they neither read nor capture; manual blocks capture nothing.
// The exported script checks the same (export/runtime.bash,
// cairn_check_needs), with the same words (UnmetError).
func (p *Plan) Unmet(values map[string]string, known func(name string) bool) []Unmet {
	rb := p.Runbook
	have := map[string]bool{}
	var out []Unmet
	for _, b := range p.Blocks {
		if b.Target == runbook.TargetManual || !b.When.Eval(values) {
			continue
		}
		for _, ref := range b.Refs {
			if rb.ParamByName(ref) != nil || have[ref] || known(ref) {
				continue
			}
			u := Unmet{Block: b, Name: ref}
			before := true
			for _, x := range rb.Blocks {
				before = before && x != b
				for _, c := range x.Captures {
					if c.Name == ref {
						if before {
							u.By = append(u.By, x)
						}
						u.Secret = u.Secret || c.Secret
					}
				}
			}
			out = append(out, u)
			have[ref] = true // once per name
		}
		for _, c := range b.Captures {
			have[c.Name] = true
		}
	}
	return out
}

// UnmetErr is UnmetError's error: its words, and the first unmet value
// with the steps that capture it, for a caller that says it otherwise
// (the daemon's missing_capture parts). It is ErrUnmet.
type UnmetErr struct {
	First Unmet
	Steps []CapturingStep
	msg   string
}

func (e *UnmetErr) Error() string        { return ErrUnmet.Error() + ": " + e.msg }
func (e *UnmetErr) Is(target error) bool { return target == ErrUnmet }

// UnmetError says, for the first unmet value, which block needs it and
// how to have it: start at a step that captures it (saying when a
// capturing block's condition is false now) or give it with --capture.
// sel is how the run was chosen (--from, --step, --block).
func UnmetError(rb *runbook.Runbook, sel Selection, values map[string]string, us []Unmet) error {
	if len(us) == 0 {
		return nil
	}
	u := us[0]
	var b strings.Builder
	switch {
	case sel.From != "":
		fmt.Fprintf(&b, "cannot start at step %q: ", sel.From)
	case sel.Step != "":
		fmt.Fprintf(&b, "cannot run step %q alone: ", sel.Step)
	case sel.Block != "":
		fmt.Fprintf(&b, "cannot run block %q alone: ", sel.Block)
	case sel.FromBlock != "":
		fmt.Fprintf(&b, "cannot start at block %q: ", sel.FromBlock)
	default:
		b.WriteString("cannot run: ")
	}
	fmt.Fprintf(&b, "block %q (%s:%d) needs $%s, which no block before it in this run captures", u.Block.ID, rb.Path, u.Block.Pos.Line, u.Name)
	if u.Secret {
		b.WriteString(" (a secret capture: it is not kept between runs)")
	}
	capturing := u.CapturingSteps(rb, values)
	var steps []string
	for _, cs := range capturing {
		s := cs.Step
		if cs.When != "" {
			s += fmt.Sprintf(" (block %q runs when %s)", cs.Block, cs.When)
		}
		steps = append(steps, s)
	}
	if len(steps) > 0 && sel.Block == "" {
		fmt.Fprintf(&b, "; start at a step that captures it: --from %s", strings.Join(steps, ", --from "))
		fmt.Fprintf(&b, "; or give it: --capture %s=VALUE", u.Name)
	} else {
		fmt.Fprintf(&b, "; give it: --capture %s=VALUE", u.Name)
	}
	if len(us) > 1 {
		names := make([]string, 0, len(us)-1)
		for _, o := range us[1:] {
			names = append(names, "$"+o.Name)
		}
		fmt.Fprintf(&b, " (also missing: %s)", strings.Join(names, " "))
	}
	return &UnmetErr{First: u, Steps: capturing, msg: b.String()}
}

// CapturingStep is a step a run may start at to have an unmet value:
// Block captures it; When is Block's condition when that is false with
// the values (and no other block of the step captures it).
type CapturingStep struct {
	Step, Block, When string
}

// CapturingSteps are the steps before u's block that capture its value,
// in order, once each.
func (u Unmet) CapturingSteps(rb *runbook.Runbook, values map[string]string) []CapturingStep {
	var out []CapturingStep
	seen := map[string]bool{}
	for _, x := range u.By {
		if x.Step == nil {
			continue // before the first step: only a whole run has it
		}
		if seen[x.Step.ID] {
			continue
		}
		seen[x.Step.ID] = true
		cs := CapturingStep{Step: x.Step.ID, Block: x.ID}
		if !x.When.Eval(values) && !stepRuns(rb, x, u.Name, values) {
			cs.When = x.When.Src
		}
		out = append(out, cs)
	}
	return out
}

// stepRuns is whether another block of x's step captures name with these
// values: then the step captures it, whatever x's own condition.
func stepRuns(rb *runbook.Runbook, x *runbook.Block, name string, values map[string]string) bool {
	if x.Step == nil {
		return false
	}
	for _, y := range rb.Blocks {
		if y.Step != x.Step || !y.When.Eval(values) {
			continue
		}
		for _, c := range y.Captures {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}
