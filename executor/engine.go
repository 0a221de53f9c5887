package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/runbook"
)

// Runner keys in Engine.Runners.
const (
	RunnerLocal     = "local"
	RunnerSSH       = "ssh"
	RunnerKube      = "kube"       // native kube actions
	RunnerKubeShell = "kube-shell" // bash blocks with the runbook's kube context pinned
	RunnerPod       = "pod"        // bash in existing pods, through the API
	RunnerNode      = "node"       // bash on nodes, through a pod pinned to each
)

// DefaultMaxOutput bounds the output a run keeps per host (the tail is kept:
// results are usually printed last). Streaming is not bounded by it.
const DefaultMaxOutput = 1 << 20

// DefaultMaxRuns is Engine.MaxRuns's default.
const DefaultMaxRuns = 16

// Engine prepares, runs, verifies and journals blocks. It keeps per-runbook
// captured values in memory for later blocks.
type Engine struct {
	Runners map[string]Runner
	Journal *Journal      // may be nil: nothing is recorded
	Objects ObjectChecker // JSONPath support for kube expectations
	// KubeWhere checks that the runbook may touch the configured kube
	// context and names it; nil refuses every kube block.
	KubeWhere func(rb *runbook.Runbook) (string, error)
	MaxOutput int
	// MaxRuns caps the blocks running at once (every runbook together);
	// default DefaultMaxRuns. One more is refused with ErrTooManyRuns.
	MaxRuns int
	// CheckRequires checks a runbook's requires (Requirements) before the
	// first block of a session runs, and again after a failed check or when
	// the hosts named change; a block whose check fails does not run.
	CheckRequires bool
	Now           func() time.Time

	mu       sync.Mutex
	running  int
	busy     map[string]string // runbook path -> run id
	sessions map[string]*session
}

// session is what a runbook's earlier runs left for later ones.
type session struct {
	requiresOK string // the host values last checked successfully ("\x00" for none)
	captures   map[string]string
	secret     map[string]bool
	redact     Redactor
	// shells: each shell session's state, by session name and host.
	shells map[string]map[string]ShellState
}

// Request asks to run one block. Runbook must come from content the caller
// loaded itself; the block is looked up there and its hash compared.
type Request struct {
	Runbook   *runbook.Runbook
	BlockID   string
	Hash      string // the hash the page showed; "" only for the CLI
	Params    map[string]string
	Confirmed bool
}

// Run is a prepared block run.
type Run struct {
	ID    string
	Job   *Job
	Where string
	e     *Engine
	sess  *session
	red   *Redactor
	once  sync.Once
	// shellStates: what a session block left on each host (its last
	// attempt).
	shellStates map[string]ShellState
}

func (e *Engine) sess(path string) *session {
	if e.sessions == nil {
		e.sessions = map[string]*session{}
	}
	s := e.sessions[path]
	if s == nil {
		s = &session{captures: map[string]string{}, secret: map[string]bool{}}
		e.sessions[path] = s
	}
	return s
}

// Captures returns the values captured so far for a runbook, secret ones
// masked.
func (e *Engine) Captures(rb *runbook.Runbook) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sess(rb.Path)
	out := map[string]string{}
	for k, v := range s.captures {
		if s.secret[k] {
			v = Mask
		}
		out[k] = v
	}
	return out
}

// Redactor hides what a runbook's blocks would hide: the values of its
// secret parameters among params, the secret values its runs captured, and
// the redact= patterns of its blocks. A terminal's transcript is redacted
// with it.
func (e *Engine) Redactor(rb *runbook.Runbook, params map[string]string) *Redactor {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sess(rb.Path)
	red := &Redactor{}
	for k, v := range params {
		if p := rb.ParamByName(k); p != nil && p.Secret {
			red.AddValue(v)
		}
	}
	for k, v := range s.captures {
		if s.secret[k] {
			red.AddValue(v)
		}
	}
	for _, b := range rb.Blocks {
		for _, re := range b.Redact {
			red.AddPattern(re)
		}
	}
	return red
}

// SetCaptures seeds captured values (cairn run --param for a value an
// earlier session captured).
func (e *Engine) SetCaptures(rb *runbook.Runbook, vals map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.sess(rb.Path)
	for k, v := range vals {
		s.captures[k] = v
	}
}

// unknownParam says that name is no parameter of rb: the closest one when a
// typo is likely, and the list.
func unknownParam(rb *runbook.Runbook, name string) string {
	var all []string
	// A typo is a letter or two off: one in a short name, two in a long one.
	limit := 1
	if len(name) >= 8 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, p := range rb.Params {
		all = append(all, p.Name)
		if d := editDistance(strings.ToUpper(name), p.Name); d < bestD {
			best, bestD = p.Name, d
		}
	}
	msg := "unknown parameter " + name
	if best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	if len(all) == 0 {
		return msg + "; the runbook has no parameters"
	}
	return msg + "; parameters: " + strings.Join(all, ", ")
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// ResolveParams merges defaults with given values and validates them all.
// Every problem is reported at once.
func ResolveParams(rb *runbook.Runbook, given map[string]string) (map[string]string, error) {
	vals := map[string]string{}
	var problems []string
	names := make([]string, 0, len(given))
	for k := range given {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if rb.ParamByName(k) == nil {
			problems = append(problems, unknownParam(rb, k))
		}
	}
	var missing []string
	for _, p := range rb.Params {
		v, ok := given[p.Name]
		if !ok || v == "" && p.Type != runbook.TypeString {
			if p.HasDefault {
				v, ok = p.Default, true
			}
		}
		if !ok || v == "" && p.Required {
			if p.Required {
				missing = append(missing, p.Name)
			} else {
				vals[p.Name] = "" // optional and not given: set and empty, so set -u blocks run
			}
			continue
		}
		if v == "" && !p.Required {
			vals[p.Name] = ""
			continue
		}
		if err := p.Validate(v); err != nil {
			problems = append(problems, fmt.Sprintf("parameter %s: %v", p.Name, err))
			continue
		}
		if p.Secret && len(strings.TrimSpace(v)) < MinSecret {
			problems = append(problems, fmt.Sprintf("parameter %s: a secret shorter than %d characters cannot be masked in output; use a longer one", p.Name, MinSecret))
			continue
		}
		vals[p.Name] = v
	}
	if len(missing) > 0 {
		problems = append(problems, "missing required parameters: "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrBadParam, strings.Join(problems, "; "))
	}
	return vals, nil
}

// newJob is b's job with these parameter values and the session's
// captured values it reads; a value not captured yet is an error naming the
// block that captures it. The caller holds e.mu.
func (e *Engine) newJob(rb *runbook.Runbook, b *runbook.Block, params map[string]string) (*Job, error) {
	s := e.sess(rb.Path)
	env := map[string]string{}
	for k, v := range params {
		env[k] = v
	}
	var missing []string
	for _, ref := range b.Refs {
		if rb.ParamByName(ref) != nil {
			continue
		}
		v, ok := s.captures[ref]
		if !ok {
			by := ""
			for _, x := range rb.Blocks {
				for _, c := range x.Captures {
					if c.Name == ref && by == "" {
						by = x.ID
					}
				}
			}
			missing = append(missing, fmt.Sprintf("$%s (captured by block %q)", ref, by))
			continue
		}
		env[ref] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: block %q needs %s: run that block first", ErrBadParam, b.ID, strings.Join(missing, ", "))
	}
	job := &Job{Runbook: rb, Block: b, Env: env, RunID: NewID()}
	if b.Session != "" {
		job.Shell = &ShellJob{Name: b.Session, Nonce: NewID() + NewID(), States: maps.Clone(e.sess(rb.Path).shells[b.Session])}
	}
	if b.Target == runbook.TargetSSH {
		for _, h := range runbook.SplitHosts(env[b.Hosts]) {
			job.Hosts = append(job.Hosts, runbook.CanonicalHost(h)) // one spelling in runs and the journal
		}
		if b.From != "" {
			job.From = env[b.From]
		}
	}
	return job, nil
}

// Resolver is a runner that can name the pods or nodes a block would run
// on without running it: a confirmation lists them.
type Resolver interface {
	Resolve(ctx context.Context, job *Job) ([]string, error)
}

// Resolve names the pods or nodes a pod or node block would run on now,
// with these parameter values. Nothing runs.
func (e *Engine) Resolve(ctx context.Context, rb *runbook.Runbook, blockID string, params map[string]string) ([]string, error) {
	b := rb.BlockByID(blockID)
	if b == nil || b.Target != runbook.TargetPod && b.Target != runbook.TargetNode {
		return nil, fmt.Errorf("%w: %s has no pod or node block %q", ErrUnknownBlock, rb.Slug, blockID)
	}
	values, err := ResolveParams(rb, params)
	if err != nil {
		return nil, err
	}
	r, ok := e.Runners[runnerKey(b)].(Resolver)
	if !ok {
		return nil, fmt.Errorf("%w %q (block %q) that can list its targets", ErrNoRunner, runnerKey(b), b.ID)
	}
	e.mu.Lock()
	job, err := e.newJob(rb, b, values)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.Resolve(ctx, job)
}

// Prepare checks a request against the loaded content and the runbook's
// rules and reserves the runbook (one run at a time unless the block is
// concurrent). The caller must Execute the run or Release it.
func (e *Engine) Prepare(req Request) (*Run, error) {
	rb := req.Runbook
	if rb == nil {
		return nil, ErrUnknownBlock
	}
	b := rb.BlockByID(req.BlockID)
	if b == nil || !b.Executable() {
		return nil, fmt.Errorf("%w: %s has no executable block %q", ErrUnknownBlock, rb.Slug, req.BlockID)
	}
	if req.Hash != "" && req.Hash != b.Hash {
		return nil, fmt.Errorf("%w: block %q changed since the page was loaded; reload the page", ErrHashMismatch, b.ID)
	}
	if b.Target == runbook.TargetManual {
		return nil, fmt.Errorf("%w: block %q", ErrManualBlock, b.ID)
	}
	params, err := ResolveParams(rb, req.Params)
	if err != nil {
		return nil, err
	}
	if !b.When.Eval(params) {
		return nil, fmt.Errorf("%w: %s", ErrConditionFalse, b.When.Src)
	}
	if b.Confirm && !req.Confirmed {
		msg := b.ConfirmMsg
		if msg == "" {
			msg = "this step changes the target"
		}
		return nil, fmt.Errorf("%w: %s", ErrNeedsConfirm, msg)
	}
	key := runnerKey(b)
	if e.Runners[key] == nil {
		return nil, fmt.Errorf("%w %q (block %q)", ErrNoRunner, key, b.ID)
	}
	if a, ok := e.Runners[key].(Availability); ok {
		if err := a.Available(); err != nil {
			return nil, TargetOff(err)
		}
	}
	where := ""
	if b.Target.UsesKube() {
		if e.KubeWhere == nil {
			return nil, TargetOff(errors.New("no kube context configured"))
		}
		if where, err = e.KubeWhere(rb); err != nil {
			return nil, err
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	job, err := e.newJob(rb, b, params)
	if err != nil {
		return nil, err
	}
	s := e.sess(rb.Path)
	env := job.Env
	if b.Target == runbook.TargetSSH {
		where = strings.Join(job.Hosts, " ")
	}
	if b.Target == runbook.TargetPod || b.Target == runbook.TargetNode {
		where += ", " + PodsOrNodesShown(rb, b, env)
	}
	maxRuns := e.MaxRuns
	if maxRuns <= 0 {
		maxRuns = DefaultMaxRuns
	}
	if e.running >= maxRuns {
		return nil, fmt.Errorf("%w (%d at once); wait for one to finish or cancel one", ErrTooManyRuns, maxRuns)
	}
	if !b.Concurrent {
		if id, ok := e.busy[rb.Path]; ok {
			return nil, fmt.Errorf("%w (run %s); wait for it or cancel it", ErrBusy, id)
		}
		if e.busy == nil {
			e.busy = map[string]string{}
		}
		e.busy[rb.Path] = job.RunID
	}
	e.running++
	red := &Redactor{}
	for k, v := range env {
		if p := rb.ParamByName(k); (p != nil && p.Secret) || s.secret[k] {
			red.AddValue(v)
		}
	}
	for _, re := range b.Redact {
		red.AddPattern(re)
	}
	return &Run{ID: job.RunID, Job: job, Where: where, e: e, sess: s, red: red}, nil
}

func runnerKey(b *runbook.Block) string {
	switch b.Target {
	case runbook.TargetSSH:
		return RunnerSSH
	case runbook.TargetKube:
		if b.Action == "" {
			return RunnerKubeShell
		}
		return RunnerKube
	case runbook.TargetPod:
		return RunnerPod
	case runbook.TargetNode:
		return RunnerNode
	}
	return RunnerLocal
}

// Release frees the runbook for other runs; Execute calls it.
func (r *Run) Release() {
	r.once.Do(func() {
		r.e.mu.Lock()
		defer r.e.mu.Unlock()
		r.e.running--
		if r.e.busy[r.Job.Runbook.Path] == r.ID {
			delete(r.e.busy, r.Job.Runbook.Path)
		}
	})
}

// Redact redacts s with the run's secrets (for callers that show errors).
func (r *Run) Redact(s string) string { return r.red.String(s) }

// Execute runs the block (with retries until its expectations hold),
// verifies, captures and journals it. Output reaching out is redacted.
// requires runs the runbook's requirement check once per session (and per
// set of hosts), before its first block.
func (r *Run) requires(ctx context.Context) error {
	e, rb := r.e, r.Job.Runbook
	if !e.CheckRequires || !rb.Meta.Requires.Checked() {
		return nil
	}
	key := "\x00"
	for _, hr := range rb.Meta.Requires.Hosts {
		key += hr.Param + "=" + r.Job.Env[hr.Param] + "\x00"
	}
	e.mu.Lock()
	done := r.sess.requiresOK == key
	e.mu.Unlock()
	if done {
		return nil
	}
	if err := e.Requirements(ctx, rb, r.Job.Env); err != nil {
		return err
	}
	e.mu.Lock()
	r.sess.requiresOK = key
	e.mu.Unlock()
	return nil
}

func (r *Run) Execute(ctx context.Context, out Sink) *Record {
	defer r.Release()
	e := r.e
	b := r.Job.Block
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	rec := &Record{ID: r.ID, Runbook: r.Job.Runbook.Slug, Path: r.Job.Runbook.Path, Block: b.ID, Hash: b.Hash,
		Target: string(b.Target), Where: r.Where, Start: now().UTC()}
	if b.Step != nil {
		rec.Step = b.Step.ID
	}
	rec.Params = map[string]string{}
	for _, p := range r.Job.Runbook.Params {
		if v, ok := r.Job.Env[p.Name]; ok && !p.Secret {
			rec.Params[p.Name] = v
		} else if ok {
			rec.Params[p.Name] = Mask
		}
	}
	start := time.Now()
	attempts := 1 + b.Retries
	var hosts []HostResult
	var outputs map[string]*tailBuffer
	var verdict Verdict
	var runErr error
	if err := r.requires(ctx); err != nil {
		runErr, attempts = err, 0
	}
	for attempt := 1; attempt <= attempts; attempt++ {
		rec.Attempts = attempt
		hosts, outputs, runErr = r.attempt(ctx, out)
		if runErr != nil {
			break
		}
		verdict = Verify(b, hosts, flatten(outputs), e.Objects)
		if verdict.OK || ctx.Err() != nil || attempt == attempts {
			break
		}
		if why := permanent(hosts, outputs); why != "" {
			verdict.Reasons = append(verdict.Reasons, "not retried: "+why)
			break
		}
		why := make([]string, len(verdict.Reasons))
		for i, reason := range verdict.Reasons {
			why[i] = r.red.String(reason)
		}
		out.Event(Event{Kind: "retry", Message: fmt.Sprintf("attempt %d of %d failed: %s; retrying in %s", attempt, attempts, strings.Join(why, "; "), b.Interval),
			Attempt: attempt, Attempts: attempts, Reasons: why, Wait: b.Interval.String()})
		select {
		case <-ctx.Done():
		case <-time.After(b.Interval):
		}
		if ctx.Err() != nil {
			break
		}
	}
	rec.Duration = time.Since(start).Seconds()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled):
		rec.Status = StatusCancelled
		rec.Reasons = []string{"cancelled"}
	case runErr != nil:
		rec.Status = StatusError
		rec.Reasons = []string{runErr.Error()}
	case verdict.OK:
		rec.Status = StatusVerified
	default:
		rec.Status = StatusFailed
		rec.Reasons = verdict.Reasons
		for _, h := range hosts {
			if h.Err != nil && !errors.Is(h.Err, ErrTimeout) {
				rec.Status = StatusError
			}
		}
	}
	// Captures come from the first host's output (and objects).
	if len(hosts) > 0 && rec.Status == StatusVerified && len(b.Captures) > 0 {
		first := hosts[0]
		vals, missing := Capture(b, outputs[first.Host].String(), first.Objects, e.Objects)
		if len(missing) > 0 {
			rec.Status = StatusFailed
			rec.Reasons = append(rec.Reasons, missing...)
		}
		e.mu.Lock()
		rec.Captures = map[string]string{}
		for _, c := range b.Captures {
			v, ok := vals[c.Name]
			if !ok {
				continue
			}
			if c.Secret && len(strings.TrimSpace(v)) < MinSecret {
				rec.Status = StatusFailed
				rec.Reasons = append(rec.Reasons, fmt.Sprintf("secret capture %s is shorter than %d characters and cannot be masked; it was not kept", c.Name, MinSecret))
				continue
			}
			// A value that holds a secret (a kubeconfig with a token, a join
			// command) becomes secret itself.
			secret := c.Secret || r.red.String(v) != v
			r.sess.captures[c.Name] = v
			r.sess.secret[c.Name] = secret
			if secret {
				r.red.AddValue(v)
				rec.Captures[c.Name] = Mask
			} else {
				rec.Captures[c.Name] = v
			}
		}
		e.mu.Unlock()
	}
	if holdsOutput(b) {
		if len(hosts) > 0 && rec.Status != StatusVerified {
			// Not kept, but still never shown.
			vals, _ := Capture(b, outputs[hosts[0].Host].String(), hosts[0].Objects, e.Objects)
			for _, c := range b.Captures {
				if c.Secret {
					r.red.AddValue(vals[c.Name])
				}
			}
		}
		for _, h := range hosts {
			if o := outputs[h.Host].String(); o != "" {
				out.Output(h.Host, []byte(r.red.String(o)))
			}
		}
	}
	for _, h := range hosts {
		hr := HostRecord{Host: h.Host, Exit: h.Exit, Duration: h.Duration.Seconds()}
		if h.Err != nil {
			hr.Error = r.red.String(h.Err.Error())
		}
		if len(hosts) > 1 {
			hr.Output = r.red.String(outputs[h.Host].String())
		}
		if outputs[h.Host].truncated {
			rec.Truncated = true
		}
		rec.Hosts = append(rec.Hosts, hr)
	}
	if len(hosts) == 1 {
		rec.Output = r.red.String(outputs[hosts[0].Host].String())
	} else {
		var sb strings.Builder
		for _, h := range hosts {
			fmt.Fprintf(&sb, "── %s ──\n%s", h.Host, r.red.String(outputs[h.Host].String()))
		}
		rec.Output = sb.String()
	}
	for i, reason := range rec.Reasons {
		rec.Reasons[i] = r.red.String(reason)
	}
	if sh := r.Job.Shell; sh != nil {
		rec.Session = &SessionRecord{Name: sh.Name, Hosts: map[string]ShellState{}}
		for host, st := range r.shellStates {
			shown := ShellState{Dir: r.red.String(st.Dir), Vars: map[string]string{}}
			for k, v := range st.Vars {
				shown.Vars[k] = r.red.String(v)
			}
			rec.Session.Hosts[host] = shown
		}
	}
	if e.Journal != nil {
		if err := e.Journal.Append(*rec); err != nil {
			rec.Reasons = append(rec.Reasons, "not journaled: "+err.Error())
		}
	}
	return rec
}

// attempt runs the block once with its timeout.
func (r *Run) attempt(ctx context.Context, out Sink) ([]HostResult, map[string]*tailBuffer, error) {
	b := r.Job.Block
	max := r.e.MaxOutput
	if max <= 0 {
		max = DefaultMaxOutput
	}
	tctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	sink := &runSink{out: out, red: r.red, max: max, block: b, bufs: map[string]*tailBuffer{}, lines: map[string]*lineRedactor{}, hold: holdsOutput(b),
		shell: r.Job.Shell, filters: map[string]*sessionFilter{}, states: map[string]ShellState{}}
	hosts, err := r.e.Runners[runnerKey(b)].Run(tctx, r.Job, sink)
	sink.flush()
	if sh := r.Job.Shell; sh != nil && len(sink.states) > 0 {
		// What the session is in now, for its next block on each host:
		// as after consecutive commands in one shell, also after a failure.
		r.e.mu.Lock()
		if r.sess.shells == nil {
			r.sess.shells = map[string]map[string]ShellState{}
		}
		if r.sess.shells[sh.Name] == nil {
			r.sess.shells[sh.Name] = map[string]ShellState{}
		}
		for host, st := range sink.states {
			r.sess.shells[sh.Name][host] = st
		}
		r.e.mu.Unlock()
		r.shellStates = sink.states
	}
	for i := range hosts {
		if errors.Is(hosts[i].Err, context.DeadlineExceeded) || tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil && hosts[i].Exit == -1 {
			hosts[i].Err = fmt.Errorf("%w after %s", ErrTimeout, b.Timeout)
		}
		if sink.bufs[hosts[i].Host] == nil {
			sink.bufs[hosts[i].Host] = &tailBuffer{max: max}
		}
	}
	return hosts, sink.bufs, err
}

func flatten(m map[string]*tailBuffer) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.String()
	}
	return out
}

// runSink redacts output per host, line by line, keeps a bounded tail of it
// for verification, and forwards it.
type runSink struct {
	mu    sync.Mutex
	out   Sink
	red   *Redactor
	max   int
	block *runbook.Block
	bufs  map[string]*tailBuffer
	lines map[string]*lineRedactor
	hold  bool // output is shown only when the run ends (holdsOutput)
	// A session block's output carries its state in a marked line, taken
	// out here (before anything reads the output) into states.
	shell   *ShellJob
	filters map[string]*sessionFilter
	states  map[string]ShellState
}

// holdsOutput: a secret captured with jsonpath= is only known once the
// objects are in, after their text was printed; such a block's output is
// held back and shown, redacted, when the run ends.
func holdsOutput(b *runbook.Block) bool {
	for _, c := range b.Captures {
		if c.Secret && c.Regexp == nil {
			return true
		}
	}
	return false
}

func (s *runSink) Output(host string, p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shell == nil {
		s.output(host, p)
		return
	}
	f := s.filters[host]
	if f == nil {
		f = &sessionFilter{nonce: s.shell.Nonce, keep: func(st ShellState) { s.states[host] = st }}
		s.filters[host] = f
	}
	f.Write(p, func(b []byte) { s.output(host, b) })
}

// output is one host's output, the session's marker taken out.
func (s *runSink) output(host string, p []byte) {
	buf := s.bufs[host]
	if buf == nil {
		buf = &tailBuffer{max: s.max}
		s.bufs[host] = buf
	}
	// The raw output is kept for expectations and captures; what leaves
	// the engine is redacted.
	buf.Write(p)
	if s.hold {
		return
	}
	lr := s.lines[host]
	if lr == nil {
		lr = &lineRedactor{r: s.red, emit: func(b []byte) { s.out.Output(host, b) }, onLine: s.secretCaptures}
		s.lines[host] = lr
	}
	lr.Write(p)
}

// secretCaptures learns secret captured values from a line before it is
// shown, so that a token kubeadm prints never reaches the page.
func (s *runSink) secretCaptures(line []byte) {
	for _, c := range s.block.Captures {
		if !c.Secret || c.Regexp == nil {
			continue
		}
		if m := c.Regexp.FindSubmatch(line); m != nil {
			v := m[0]
			if len(m) > 1 {
				v = m[1]
			}
			s.red.AddValue(string(v))
		}
	}
}

func (s *runSink) Event(ev Event) {
	ev.Message = s.red.String(ev.Message)
	s.out.Event(ev)
}

func (s *runSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for host, f := range s.filters {
		f.Flush(func(b []byte) { s.output(host, b) })
	}
	for _, lr := range s.lines {
		lr.Flush()
	}
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	max       int
	b         []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) {
	if len(p) >= t.max {
		t.truncated = t.truncated || len(t.b) > 0 || len(p) > t.max
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return
	}
	t.b = append(t.b, p...)
	// Shift only when twice the bound is reached: amortised O(1) per byte.
	if len(t.b) > 2*t.max {
		t.truncated = true
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	if len(t.b) > t.max {
		t.truncated = true
		return string(t.b[len(t.b)-t.max:])
	}
	return string(t.b)
}

// NewID returns a fresh random id (16 hex digits): run ids, and the ssh
// runner's per-host session markers.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Failures that waiting cannot heal, as kubectl and bash report them.
var permanentOutput = []struct{ text, why string }{
	{"error: the server doesn't have a resource type", "the cluster does not serve that resource type (is its CRD installed?)"},
	{"Error from server (Forbidden)", "the API refused it (RBAC forbidden)"},
	{"is forbidden: User ", "the API refused it (RBAC forbidden)"},
}

// permanent says why a failed attempt would fail the same way again, or "":
// a command that was not found or cannot run (exit 127, 126), an error a
// runner marked ErrPermanent, or kubectl's words for the same.
func permanent(hosts []HostResult, outputs map[string]*tailBuffer) string {
	for _, h := range hosts {
		switch {
		case errors.Is(h.Err, ErrPermanent):
			return h.Err.Error()
		case h.Exit == 127:
			return "a command was not found (exit 127); install it or fix the name"
		case h.Exit == 126:
			return "a command could not be run (exit 126)"
		}
		out := outputs[h.Host].String()
		for _, p := range permanentOutput {
			if strings.Contains(out, p.text) {
				return p.why
			}
		}
	}
	return ""
}
