package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// PlanRequest is the body of POST /api/plans: run a step, every step from
// one on, or one block, as cairn run does. The page asks its reader first
// and sends the answers: the blocks confirmed, the manual steps done. A
// block that needs a confirmation not given stops the plan there (after a
// failure, only that clean-up block is skipped); a manual step not marked
// done stops it too.
type PlanRequest struct {
	Runbook string `json:"runbook"`
	Step    string `json:"step,omitempty"`
	From    string `json:"from,omitempty"`
	Block   string `json:"block,omitempty"`
	// FromBlock: this block and the rest (a plan that stopped at a
	// manual step goes on from there once the reader did it).
	FromBlock string            `json:"from_block,omitempty"`
	Hashes    map[string]string `json:"hashes"` // every block of the plan, as the page showed it
	Params    map[string]string `json:"params"`
	Confirm   []string          `json:"confirm"`
	Done      []string          `json:"done"` // manual steps the reader has done
}

// DecodePlanRequest reads a plan request strictly, as DecodeRunRequest
// does a run request.
func DecodePlanRequest(body io.Reader) (*PlanRequest, error) {
	var req PlanRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if req.Runbook == "" || req.Step == "" && req.From == "" && req.Block == "" && req.FromBlock == "" {
		return nil, errors.New("bad request body: runbook and one of step, from, block and from_block are required")
	}
	if len(req.Params) > 256 || len(req.Hashes) > 1024 || len(req.Confirm) > 1024 || len(req.Done) > 1024 {
		return nil, errors.New("bad request body: too many entries")
	}
	if err := checkParams(req.Params); err != nil {
		return nil, err
	}
	return &req, nil
}

// startPlan answers POST /api/plans with the plan's id (its events are at
// /api/runs/{id}/events, and it is cancelled as a run is) and the blocks
// it will go through.
func (s *Server) startPlan(w http.ResponseWriter, r *http.Request) {
	req, rb, p, _, ok := s.planRequest(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.base)
	id := executor.NewID()
	lr := s.register(id, rb.Slug, "", cancel)
	ids := make([]string, len(p.Blocks))
	for i, b := range p.Blocks {
		ids[i] = b.ID
	}
	pr := &pagePrompter{confirm: req.Confirm, done: req.Done}
	ps := &planStream{s: s, lr: lr}
	opt := executor.PlanOptions{Params: req.Params, Prompter: pr, Hashes: req.Hashes,
		WriteBack: func(rb *runbook.Runbook, rec *executor.Record) (*runbook.Runbook, error) {
			if s.OnRecord != nil {
				s.OnRecord(rb, rec)
			}
			if nrb := s.runbook(rb.Slug); nrb != nil {
				return nrb, nil // as written back and loaded again
			}
			return rb, nil
		}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		start := time.Now()
		res, err := s.Engine.RunPlan(ctx, p, opt, ps)
		rec := &executor.Record{ID: id, Runbook: rb.Slug, Path: rb.Path, Start: start.UTC(), Duration: time.Since(start).Seconds()}
		switch {
		case ctx.Err() != nil:
			rec.Status, rec.Reasons = executor.StatusCancelled, []string{"cancelled"}
		case err != nil:
			rec.Status, rec.Reasons = executor.StatusError, []string{err.Error()}
		case res.Failed != nil:
			rec.Status, rec.Reasons = executor.StatusFailed, []string{fmt.Sprintf("block %q failed; resume from step %q after fixing it", res.Failed.ID, executor.ResumeStep(res.Failed))}
		default:
			rec.Status = executor.StatusVerified
		}
		rec.Output = fmt.Sprintf("%d verified, %d skipped of %d blocks\n", res.Verified, res.Skipped, res.Total)
		lr.finish(rec)
	}()
	writeJSON(w, http.StatusAccepted, map[string]any{"id": id, "blocks": ids})
}

// planRequest reads a plan request and checks what it must pass before
// anything runs (or is previewed): a JSON body, a runbook the daemon
// loaded, a selection it has, every block as the page showed it,
// parameters that resolve, and every captured value the plan reads at hand
// or captured on the way. It answers the request itself when one fails.
func (s *Server) planRequest(w http.ResponseWriter, r *http.Request) (*PlanRequest, *runbook.Runbook, *executor.Plan, []executor.Planned, bool) {
	if !jsonBody(w, r) {
		return nil, nil, nil, nil, false
	}
	req, err := DecodePlanRequest(r.Body)
	if err != nil {
		badBody(w, err)
		return nil, nil, nil, nil, false
	}
	rb := s.loaded(w, req.Runbook)
	if rb == nil {
		return nil, nil, nil, nil, false
	}
	sel := executor.Selection{Step: req.Step, From: req.From, Block: req.Block, FromBlock: req.FromBlock}
	p, err := executor.NewPlan(rb, sel)
	if err != nil {
		fail(w, http.StatusNotFound, "unknown_step", "%v", err)
		return nil, nil, nil, nil, false
	}
	// Every block must be the one the page showed, before anything runs.
	for _, b := range p.Blocks {
		if req.Hashes[b.ID] != b.Hash {
			fail(w, http.StatusConflict, "hash_mismatch", "block %q changed since the page was loaded (or the page did not send its hash); reload the page", b.ID)
			return nil, nil, nil, nil, false
		}
	}
	// A plan that would stop at a block for want of a captured value is
	// refused before anything runs, as cairn run and the scripts refuse it.
	have := s.Engine.Captures(rb)
	planned, err := s.Engine.Preview(p, sel, req.Params, func(n string) bool { _, ok := have[n]; return ok })
	switch {
	case errors.Is(err, executor.ErrUnmet):
		var ue *executor.UnmetErr
		errors.As(err, &ue)
		writeJSON(w, http.StatusConflict, apiError{Code: "missing_capture", Error: strings.TrimPrefix(err.Error(), executor.ErrUnmet.Error()+": "),
			Missing: missingOf(ue)})
		return nil, nil, nil, nil, false
	case err != nil:
		fail(w, http.StatusBadRequest, "bad_param", "%v", err)
		return nil, nil, nil, nil, false
	}
	return req, rb, p, planned, true
}

// missingOf is the first unmet value of a plan, as MissingCapture.
func missingOf(ue *executor.UnmetErr) *MissingCapture {
	if ue == nil {
		return nil
	}
	u := ue.First
	m := &MissingCapture{Block: u.Block.ID, Line: u.Block.Pos.Line, Name: u.Name, Secret: u.Secret}
	for _, st := range ue.Steps {
		m.Steps = append(m.Steps, CaptureStep{Step: st.Step, When: st.When})
	}
	return m
}

// PlannedBlock is one block of POST /api/plans/preview's answer.
type PlannedBlock struct {
	Block  string `json:"block"`
	Step   string `json:"step,omitempty"`
	Target string `json:"target"`
	Skip   string `json:"skip,omitempty"` // condition, manual
	Why    string `json:"why,omitempty"`
	When   string `json:"when,omitempty"` // the condition, for a page to say why in its language
	// Targets: a pod or node block's pods or nodes now (TargetsErr when
	// they cannot be listed now, say before the blocks they need ran).
	Targets    []string `json:"targets,omitempty"`
	TargetsErr string   `json:"targets_error,omitempty"`
	Confirm    string   `json:"confirm,omitempty"`
	Where      string   `json:"where,omitempty"`
	What       string   `json:"what,omitempty"`
}

// previewPlan answers POST /api/plans/preview (the body of POST
// /api/plans; confirm and done are not needed) with how the plan would go,
// block by block, before anything runs: the page shows it in the one
// confirmation it asks for a whole step. Nothing runs.
func (s *Server) previewPlan(w http.ResponseWriter, r *http.Request) {
	req, rb, _, planned, ok := s.planRequest(w, r)
	if !ok {
		return
	}
	out := make([]PlannedBlock, len(planned))
	for i, pl := range planned {
		pb := PlannedBlock{Block: pl.Block.ID, Target: string(pl.Block.Target), Skip: string(pl.Skip), Why: pl.Why,
			Confirm: pl.Confirm, Where: pl.Where, What: pl.What}
		if pl.Block.Step != nil {
			pb.Step = pl.Block.Step.ID
		}
		if pl.Skip == executor.SkipCondition {
			pb.When = pl.Block.When.Src
		}
		if pl.Skip == "" && (pl.Block.Target == runbook.TargetPod || pl.Block.Target == runbook.TargetNode) {
			ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
			names, err := s.Engine.Resolve(ctx, rb, pl.Block.ID, req.Params)
			cancel()
			if err != nil {
				pb.TargetsErr = err.Error()
			}
			pb.Targets = names
		}
		out[i] = pb
	}
	writeJSON(w, http.StatusOK, map[string]any{"blocks": out})
}

// badBody answers a request body that could not be read.
func badBody(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || strings.Contains(err.Error(), "request body too large") {
		fail(w, http.StatusRequestEntityTooLarge, "too_large", "request body over %d bytes", MaxBody)
		return
	}
	fail(w, http.StatusBadRequest, "bad_request", "%v", err)
}

// pagePrompter answers with what the reader said on the page before the
// plan started.
type pagePrompter struct {
	confirm, done []string
}

func (p *pagePrompter) Confirm(_ context.Context, pr *executor.Prompt) (bool, error) {
	if slices.Contains(p.confirm, pr.Block.ID) {
		return true, nil
	}
	return false, fmt.Errorf("%w: block %q (%s) was not confirmed on the page", executor.ErrNeedsConfirm, pr.Block.ID, pr.Message)
}

func (p *pagePrompter) Manual(_ context.Context, pr *executor.Prompt) error {
	if slices.Contains(p.done, pr.Block.ID) {
		return nil
	}
	return fmt.Errorf("%w: stopped at manual step %q: do it by hand, then run from the step after it", executor.ErrManualBlock, pr.Block.ID)
}

// planStream is the plan's PlanSink: each block runs as a run of its own
// (its events at /api/runs/{id}/events, journaled), and the plan's stream
// says which block runs and how each ended.
type planStream struct {
	s   *Server
	lr  *liveRun // the plan's
	cur *liveRun // the running block's
}

// planBlock is the data of a plan's "block" and "outcome" events.
type planBlock struct {
	Block  string           `json:"block"`
	N      int              `json:"n,omitempty"`
	Total  int              `json:"total,omitempty"`
	Run    string           `json:"run,omitempty"`
	Skip   executor.Skip    `json:"skip,omitempty"`
	Why    string           `json:"why,omitempty"`
	Status executor.Status  `json:"status,omitempty"`
	Record *executor.Record `json:"record,omitempty"`
}

func (ps *planStream) Next(b *runbook.Block, n, total int) {
	ps.lr.publish(event{name: "next", data: planBlock{Block: b.ID, N: n, Total: total}, size: eventOverhead})
}

func (ps *planStream) Start(r *executor.Run) executor.Sink {
	// Cancelling the block's run cancels the plan: what follows a block
	// the reader stopped should not run on its own.
	ps.cur = ps.s.register(r.ID, ps.lr.runbook, r.Job.Block.ID, ps.lr.cancel)
	ps.lr.publish(event{name: "block", data: planBlock{Block: r.Job.Block.ID, Run: r.ID}, size: eventOverhead})
	return ps.cur
}

func (ps *planStream) Done(o executor.Outcome) {
	pb := planBlock{Block: o.Block.ID, Skip: o.Skip, Why: o.Why}
	if rec := o.Record; rec != nil {
		// A verified record went to OnRecord through the WriteBack hook.
		if rb := ps.s.runbook(ps.lr.runbook); rb != nil && ps.s.OnRecord != nil && rec.Status != executor.StatusVerified {
			ps.s.OnRecord(rb, rec)
		}
		ps.cur.finish(rec)
		pb.Run, pb.Status = rec.ID, rec.Status
	}
	ps.lr.publish(event{name: "outcome", data: pb, size: eventOverhead + len(pb.Why)})
}
