// Package targets builds the runners blocks run through, from flags or from
// the local sandbox, and keeps them in step with the sandbox as it comes
// and goes. It is the one place that knows both the runners and the
// sandbox: cairn serve, daemon and run each call Open once.
package targets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/kube"
	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

// Set is the kube and ssh runners the engine uses now. When they come
// from the sandbox (no --kubeconfig or --ssh-config says otherwise), follow
// rebuilds them as the sandbox comes and goes, so a server started before
// `cairn sandbox up` picks it up and one whose sandbox went away refuses
// kube and ssh blocks with the reason instead of "connection refused".
type Set struct {
	cfg Config
	dir string // the sandbox's state directory

	mu      sync.RWMutex
	cur     *targetSet
	sandbox SandboxView
	misses  int // consecutive unhealthy polls of a sandbox in use
	// pinned is the sandbox this server uses (sandbox.Status.ID): the first
	// it found or started. Another one in its state directory is offered to
	// the reader (SandboxView.Offer) and used only once accepted.
	pinned string
}

// targetSet is one wiring of the kube and ssh runners.
type targetSet struct {
	inv       *sandbox.Inventory // the sandbox it was built from, or nil
	facts     map[string]string  // that sandbox's facts (sandbox.Status.Facts)
	kube      *kube.Runner
	kubeErr   error
	pods      executor.Runner
	nodes     executor.Runner
	kubeShell executor.Runner
	ssh       executor.Runner
	sshNote   string
	notes     []Note
	cleanup   func()
}

// Note is one line about where blocks will run; Target is the kind of
// block it concerns ("" for all), so that a command can leave out what
// does not concern the blocks it runs.
type Note struct {
	Target runbook.Target
	Text   string
}

func (n Note) String() string { return n.Text }

// Concerns reports whether the note is about any of blocks (a note for
// every kind of block always is).
func (n Note) Concerns(blocks []*runbook.Block) bool {
	if n.Target == "" {
		return true
	}
	for _, b := range blocks {
		// A note on the cluster concerns pod and node blocks too.
		if b.Target == n.Target || n.Target == runbook.TargetKube && b.Target.UsesKube() {
			return true
		}
	}
	return false
}

// SandboxView is what the page and the terminal are told about the sandbox.
type SandboxView struct {
	// State: "off" (not used: --sandbox=no or explicit flags), "absent",
	// "building", "starting", "running", "unhealthy" or "unavailable".
	// "replaced": another sandbox took the place of the one in use; its
	// blocks are off until the reader accepts Offer.
	State   string `json:"state"`
	Dir     string `json:"dir,omitempty"`
	Message string `json:"message,omitempty"`
	// ID is the sandbox in use (when it was started).
	ID string `json:"id,omitempty"`
	// Offer is the ID of another sandbox the reader may accept
	// (POST /api/sandbox/accept), and OfferShape what it has.
	Offer      string `json:"offer,omitempty"`
	OfferShape string `json:"offer_shape,omitempty"`
}

// TargetsView is the executor's targets as GET /api/health reports them.
type TargetsView struct {
	Kube      string      `json:"kube,omitempty"`
	KubeError string      `json:"kube_error,omitempty"`
	SSH       string      `json:"ssh,omitempty"`
	Hosts     []string    `json:"hosts,omitempty"`
	Sandbox   SandboxView `json:"sandbox"`
}

// UsesSandbox: the sandbox supplies targets unless flags name others.
func (c Config) UsesSandbox() bool {
	switch c.Sandbox {
	case "no":
		return false
	case "yes", "start":
		return true
	}
	return c.Kubeconfig == "" && c.SSHConfig == "" && os.Getenv("KUBECONFIG") == ""
}

// New builds the runners Config says, from the sandbox when it is used
// and runs.
func New(ctx context.Context, cfg Config) (*Set, error) {
	switch cfg.Sandbox {
	case "", "auto", "yes", "no", "start":
	default:
		return nil, fmt.Errorf("--sandbox=%q: want auto, yes, no or start", cfg.Sandbox)
	}
	dir := cfg.SandboxDir
	if dir == "" {
		dir = sandbox.DefaultStateDir()
	}
	t := &Set{cfg: cfg, dir: dir}
	var inv *sandbox.Inventory
	var k *sandbox.KubeInfo
	t.sandbox = SandboxView{State: "off"}
	var st sandbox.Status
	if cfg.UsesSandbox() {
		var err error
		st, err = sandbox.StatusOfIn(ctx, t.dir, cfg.Scope)
		t.sandbox = viewOf(t.dir, st, err)
		inv, k = inUse(st, err)
		if inv != nil {
			t.pinned = st.ID()
			t.sandbox.ID = t.pinned
		}
		if inv == nil && cfg.Sandbox == "yes" {
			return nil, fmt.Errorf("--sandbox=yes: no running sandbox in %s (%s); start one with: cairn sandbox up", t.dir, t.sandbox.Message)
		}
	}
	set, err := t.build(st, inv, k)
	if err != nil {
		return nil, err
	}
	t.cur = set
	return t, nil
}

func viewOf(dir string, st sandbox.Status, err error) SandboxView {
	switch {
	case errors.Is(err, sandbox.ErrNotRunning):
		return SandboxView{State: "absent", Dir: dir, Message: "no sandbox runs; start one with `cairn sandbox up` (or `make run`)"}
	case err != nil:
		return SandboxView{State: "unhealthy", Dir: dir, Message: err.Error()}
	case !st.Healthy():
		return SandboxView{State: "unhealthy", Dir: dir, Message: st.Summary() + "; see `cairn sandbox status`"}
	}
	return SandboxView{State: "running", Dir: dir}
}

// build wires runners for inv and k (those of the sandbox st, or nil for
// the flags' and the user's defaults) and keeps that sandbox's facts.
func (t *Set) build(st sandbox.Status, inv *sandbox.Inventory, k *sandbox.KubeInfo) (*targetSet, error) {
	f := t.cfg
	set := &targetSet{inv: inv}
	var cleanups []func()
	set.cleanup = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if inv != nil {
		set.notes = append(set.notes, Note{Text: "using the running sandbox (" + t.dir + ")"})
		set.facts = st.Facts()
	}
	kubeconfig, kctx := f.Kubeconfig, f.Context
	if k != nil && kubeconfig == "" {
		kubeconfig = k.Kubeconfig
		if kctx == "" {
			kctx = k.Context
		}
	}
	if kubeconfig == "" && os.Getenv("KUBECONFIG") == "" && !fileExists(defaultKubeconfig()) {
		set.kubeErr = fmt.Errorf("no cluster: no --kubeconfig, $KUBECONFIG is unset and %s does not exist", defaultKubeconfig())
	} else if kr, err := kube.New(kube.Config{Kubeconfig: kubeconfig, Context: kctx, NodeImage: t.nodeImage(st, k)}); err != nil {
		set.kubeErr = err
	} else {
		set.kube, set.pods, set.nodes = kr, kr.Pods(), kr.Nodes()
		dir, err := os.MkdirTemp("", "cairn-kube-")
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		path, cleanup, err := kr.PinnedKubeconfig(dir)
		if err == nil {
			cleanups = append(cleanups, func() { cleanup() })
			set.kubeShell = &local.Runner{ExtraEnv: []string{"KUBECONFIG=" + path}, Supervisor: f.Supervisor}
		}
		set.notes = append(set.notes, Note{Target: runbook.TargetKube, Text: "kube blocks use " + kr.Target().String()})
	}
	if set.kubeErr != nil {
		hint := "start the sandbox (`cairn sandbox up`, or `make run`), or pass --kubeconfig and --context"
		if !f.UsesSandbox() {
			hint = "pass --kubeconfig and --context"
		}
		set.notes = append(set.notes, Note{Target: runbook.TargetKube, Text: "kube blocks are off: " + set.kubeErr.Error() + "; " + hint})
	}
	var sinv *sandbox.Inventory
	if inv != nil && len(inv.Hosts) > 0 {
		sinv = inv
	}
	sr, note, err := newSSHRunner(f, sinv)
	if err != nil {
		set.notes = append(set.notes, Note{Target: runbook.TargetSSH, Text: "ssh blocks are off: " + err.Error()})
	} else {
		set.ssh = sr
		set.sshNote = note
		if note != "" {
			set.notes = append(set.notes, Note{Target: runbook.TargetSSH, Text: note})
		}
	}
	return set, nil
}

// nodeImage is the node pods' image: the flag's, else the sandbox's own
// when its nodes are the cluster (no registry serves images there), else
// the runner's default.
func (t *Set) nodeImage(st sandbox.Status, k *sandbox.KubeInfo) string {
	if t.cfg.NodeImage != "" || k == nil || !st.Nodes {
		return t.cfg.NodeImage
	}
	return sandbox.ImageNodeShell
}

func defaultKubeconfig() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".kube", "config")
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func (t *Set) get() *targetSet {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.cur
}

// runner returns the current runner for key, or why there is none.
func (t *Set) runner(key string) (executor.Runner, error) {
	set := t.get()
	switch key {
	case executor.RunnerKube:
		if set.kube == nil {
			return nil, t.offErr("kube", set.kubeErr)
		}
		return set.kube, nil
	case executor.RunnerKubeShell:
		if set.kubeShell == nil {
			return nil, t.offErr("kube", set.kubeErr)
		}
		return set.kubeShell, nil
	case executor.RunnerPod, executor.RunnerNode:
		if set.kube == nil {
			return nil, t.offErr("kube", set.kubeErr)
		}
		if key == executor.RunnerPod {
			return set.pods, nil
		}
		return set.nodes, nil
	case executor.RunnerSSH:
		if set.ssh == nil {
			return nil, t.offErr("ssh", nil)
		}
		return set.ssh, nil
	}
	return nil, fmt.Errorf("unknown runner %q", key)
}

func (t *Set) offErr(what string, cause error) error {
	t.mu.RLock()
	sv := t.sandbox
	t.mu.RUnlock()
	msg := what + " blocks are off"
	if cause != nil {
		msg += ": " + cause.Error()
	}
	if sv.State != "off" && sv.State != "running" && sv.Message != "" {
		msg += " (sandbox " + sv.State + ": " + sv.Message + ")"
	}
	return errors.New(msg)
}

// KubeWhere is the engine's KubeWhere: the runbook's kube target now.
func (t *Set) KubeWhere(rb *runbook.Runbook) (string, error) {
	set := t.get()
	if set.kube == nil {
		// Not "not allowed by the runbook": there is no cluster to allow.
		return "", executor.TargetOff(t.offErr("kube", set.kubeErr))
	}
	return set.kube.Where(rb)
}

// SandboxValues are the values the sandbox in use gives rb's parameters
// (their `sandbox:` facts), each one valid for its parameter; nil when the
// blocks do not run against a sandbox.
func (t *Set) SandboxValues(rb *runbook.Runbook) map[string]string {
	return Values(t.get().facts, rb)
}

// Values are the values facts (a sandbox's) give rb's parameters, each
// one valid for its parameter.
func Values(facts map[string]string, rb *runbook.Runbook) map[string]string {
	if len(facts) == 0 {
		return nil
	}
	out := map[string]string{}
	for _, p := range rb.Params {
		v, ok := facts[p.Sandbox]
		if p.Sandbox == "" || !ok || p.Validate(v) != nil {
			continue
		}
		out[p.Name] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// View reports the targets for GET /api/health.
func (t *Set) View() any {
	set := t.get()
	t.mu.RLock()
	v := TargetsView{Sandbox: t.sandbox}
	t.mu.RUnlock()
	if set.kube != nil {
		v.Kube = set.kube.Target().String()
	} else if set.kubeErr != nil {
		v.KubeError = t.offErr("kube", set.kubeErr).Error()
	}
	if set.ssh != nil {
		v.SSH = set.sshNote
		if set.inv != nil {
			for _, h := range set.inv.Hosts {
				v.Hosts = append(v.Hosts, h.Name)
			}
		}
		if v.SSH == "" {
			v.SSH = "ssh blocks use your SSH configuration"
		}
	}
	return v
}

func (t *Set) setSandbox(v SandboxView) {
	t.mu.Lock()
	t.sandbox = v
	t.mu.Unlock()
}

func (t *Set) Close() {
	t.mu.Lock()
	set := t.cur
	t.cur = &targetSet{kubeErr: errors.New("the executor is shutting down")}
	t.mu.Unlock()
	if set != nil && set.cleanup != nil {
		set.cleanup()
	}
}

// Follow polls the sandbox every interval until ctx is done and swaps the
// runners when it appears, goes or changes; say gets one line per change.
// A sandbox in use must fail two polls in a row before it is dropped, so a
// busy apiserver answering late once does not switch runs off.
func (t *Set) Follow(ctx context.Context, interval time.Duration, say func(string)) {
	if !t.cfg.UsesSandbox() {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.poll(ctx, say)
	}
}

func (t *Set) poll(ctx context.Context, say func(string)) {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	st, err := sandbox.StatusOfIn(pctx, t.dir, t.cfg.Scope)
	cancel()
	if ctx.Err() != nil {
		return
	}
	view := viewOf(t.dir, st, err)
	healthy := err == nil && st.Healthy()
	inv, k := inUse(st, err)
	cur := t.get()
	t.mu.Lock()
	if s := t.sandbox.State; (s == "building" || s == "starting" || s == "unavailable") && !healthy {
		view = t.sandbox // the starter reports progress until the sandbox answers
	}
	if healthy && t.pinned == "" {
		t.pinned = st.ID() // the first sandbox this server finds is its own
	}
	if healthy && st.ID() != t.pinned {
		// Another sandbox in our state directory: shown, not used.
		view = SandboxView{State: "replaced", Dir: t.dir, Offer: st.ID(), OfferShape: st.Summary(),
			Message: fmt.Sprintf("the sandbox this server used (started %s) is gone; another one runs in %s (started %s). Kube and SSH blocks stay off until you accept it on the page (or restart the server)",
				when(t.pinned), t.dir, when(st.ID()))}
		inv, k = nil, nil
		healthy = false
	} else if inv != nil {
		view.ID = t.pinned
	}
	if healthy || cur.inv == nil {
		t.misses = 0
	} else if t.misses++; t.misses < 2 && view.State != "replaced" {
		t.mu.Unlock()
		return
	}
	t.sandbox = view
	t.mu.Unlock()

	if sameSandbox(cur, inv, k) {
		return
	}
	var set *targetSet
	if view.State == "replaced" {
		// Not the reader's own SSH configuration or kubeconfig either: the
		// page was running against the sandbox; nothing runs until the
		// reader says where.
		set = &targetSet{kubeErr: errors.New("the sandbox in use was replaced"), notes: []Note{{Text: view.Message}}}
	} else {
		var berr error
		if set, berr = t.build(st, inv, k); berr != nil {
			say("sandbox: " + berr.Error())
			return
		}
	}
	t.mu.Lock()
	old := t.cur
	t.cur = set
	t.mu.Unlock()
	if old.cleanup != nil {
		old.cleanup()
	}
	if inv != nil {
		say("the sandbox is up (" + t.dir + ")")
	} else {
		say("the sandbox went away: " + view.Message)
	}
	for _, n := range set.notes {
		say(n.Text)
	}
}

// Accept makes the offered sandbox id the one this server uses (the reader
// pressed "use it" on the page) and wires it at once.
func (t *Set) Accept(ctx context.Context, id string, say func(string)) error {
	t.mu.Lock()
	if t.sandbox.Offer == "" || t.sandbox.Offer != id {
		t.mu.Unlock()
		return fmt.Errorf("no sandbox %q is offered (it may have gone or been accepted already); reload the page", id)
	}
	t.pinned = id
	t.mu.Unlock()
	say("the reader accepted the sandbox started " + when(id))
	t.poll(ctx, say)
	return nil
}

// when turns a sandbox ID back into a local time for messages.
func when(id string) string {
	tm, err := time.Parse(time.RFC3339Nano, id)
	if err != nil {
		return id
	}
	return tm.Local().Format("2006-01-02 15:04:05")
}

// inUse is what a sandbox status gives the targets: its inventory (an empty
// one for a cluster-only sandbox) and cluster when it is healthy, else nils.
func inUse(st sandbox.Status, err error) (*sandbox.Inventory, *sandbox.KubeInfo) {
	if err != nil || !st.Healthy() {
		return nil, nil
	}
	if st.Inventory == nil {
		return &sandbox.Inventory{}, st.Kube // cluster only (--no-ssh)
	}
	return st.Inventory, st.Kube
}

// sameSandbox reports whether the runners of cur, built from a sandbox (or
// none), still fit the sandbox now in use.
func sameSandbox(cur *targetSet, now *sandbox.Inventory, k *sandbox.KubeInfo) bool {
	old := cur.inv
	if (old == nil) != (now == nil) {
		return false
	}
	if old == nil {
		return true
	}
	if old.SSHConfig != now.SSHConfig || len(old.Hosts) != len(now.Hosts) {
		return false
	}
	server := ""
	if cur.kube != nil {
		server = cur.kube.Target().Server
	}
	return k == nil && server == "" || k != nil && k.Server == server
}

// slot is the engine's runner for one key: it runs on whatever targets hold
// now and, through Available, lets the engine refuse a block before it starts
// when its target is off.
type slot struct {
	t   *Set
	key string
}

func (s slot) Run(ctx context.Context, job *executor.Job, out executor.Sink) ([]executor.HostResult, error) {
	r, err := s.t.runner(s.key)
	if err != nil {
		return nil, err
	}
	return r.Run(ctx, job, out)
}

// MissingResources lets the engine check a runbook's requires.resources on
// whatever cluster is current.
func (s slot) MissingResources(ctx context.Context, rb *runbook.Runbook, names []string) ([]string, error) {
	r, err := s.t.runner(s.key)
	if err != nil {
		return nil, err
	}
	rc, ok := r.(executor.ResourceChecker)
	if !ok {
		return nil, fmt.Errorf("the %s runner cannot check API resources", s.key)
	}
	return rc.MissingResources(ctx, rb, names)
}

// Resolve names the pods or nodes a block would run on, on whatever
// cluster is current.
func (s slot) Resolve(ctx context.Context, job *executor.Job) ([]string, error) {
	r, err := s.t.runner(s.key)
	if err != nil {
		return nil, err
	}
	rs, ok := r.(executor.Resolver)
	if !ok {
		return nil, fmt.Errorf("the %s runner cannot list its targets", s.key)
	}
	return rs.Resolve(ctx, job)
}

func (s slot) Available() error {
	_, err := s.t.runner(s.key)
	return err
}
