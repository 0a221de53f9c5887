// Package runbook is Cairn's runbook model: it parses a Markdown runbook with
// YAML front matter into steps, executable blocks and parameters, and
// validates them. The site generator, the executor and the exporter all read
// runbooks through this package, so it imports none of them.
package runbook

import (
	"regexp"
	"strings"
	"time"

	gast "github.com/yuin/goldmark/ast"
)

// Runbook is one parsed Markdown file.
type Runbook struct {
	Path   string // as given to Parse; used in every Diagnostic
	Slug   string
	Meta   Meta
	Params []*Param
	Steps  []*Step
	Blocks []*Block // every fenced block in document order, display-only included

	// Source is the whole file; Body is Source after the front matter, which
	// is what Doc's segments point into.
	Source     []byte
	Body       []byte
	BodyOffset int
	Doc        gast.Node
	Hash       string // sha256 of Source, hex

	// Warnings are what Parse read past (see Diagnostic.Warning).
	Warnings Diagnostics
}

// Meta is the front matter apart from parameters.
type Meta struct {
	Title         string
	Summary       string
	Lang          string
	Tags          []string
	Duration      time.Duration
	Weight        int
	Prerequisites []string
	KubeContexts  []string
	Requires      Requires
	WriteBack     bool
	// DefaultTarget (front matter default_target) makes every bash, sh and
	// shell block without a target or output role run there: a Runme
	// notebook's blocks become runnable without rewriting them.
	DefaultTarget Target
	// Session (front matter session) is the session of every shell block
	// that names none (session=none opts one out).
	Session string
	// LangDefaulted: the front matter names no lang; Lang is "en" until a
	// site sets its own default.
	LangDefaulted bool
	// TitleFromHeading: the file has no front matter and Title is its
	// first # heading (the page does not repeat it).
	TitleFromHeading bool
	// TitleSpan is that heading's byte range in Source (its lines).
	TitleSpan [2]int
	// Extra holds front-matter keys Cairn does not know, for themes (as
	// Hugo's .Params); each is also a warning.
	Extra map[string]any
}

// Requires lists what a runbook needs: what an air-gapped site must bring
// in, and what the executor, `cairn run` and exported scripts check before
// the first block runs (so a missing tool is one clear message up front,
// not exit 127 in step 4).
type Requires struct {
	Images []string `yaml:"images"`
	Charts []string `yaml:"charts"`
	// Binaries are needed on this machine (local and kube shell blocks).
	Binaries []string `yaml:"binaries"`
	// Hosts maps a host parameter to binaries needed on each of its hosts.
	Hosts []HostRequire `yaml:"-"`
	// Resources are Kubernetes API resources the cluster must serve
	// (plural.group, e.g. leases.coordination.k8s.io, or pods).
	Resources []string `yaml:"resources"`
}

// HostRequire is one entry of requires.hosts.
type HostRequire struct {
	Param    string
	Binaries []string
	Pos      Pos
}

// AllBinaries are the binaries needed anywhere (this machine and hosts),
// each once, for an offline bundle's list.
func (r Requires) AllBinaries() []string {
	seen := map[string]bool{}
	var out []string
	add := func(bs []string) {
		for _, b := range bs {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	add(r.Binaries)
	for _, h := range r.Hosts {
		add(h.Binaries)
	}
	return out
}

// Checked reports whether anything is to be checked before a run.
func (r Requires) Checked() bool {
	return len(r.Binaries)+len(r.Hosts)+len(r.Resources) > 0
}

// ParamType is the declared type of a parameter.
type ParamType string

// Parameter types.
const (
	TypeString   ParamType = "string"
	TypeInt      ParamType = "int"
	TypeBool     ParamType = "bool"
	TypeEnum     ParamType = "enum"
	TypeHost     ParamType = "host"
	TypeHosts    ParamType = "hosts"
	TypeCIDR     ParamType = "cidr"
	TypeDuration ParamType = "duration"
)

// Param is one declared parameter.
type Param struct {
	Name        string
	Title       string
	Description string
	Type        ParamType
	Group       string
	Default     string
	HasDefault  bool
	Pattern     *regexp.Regexp
	Values      []string
	Secret      bool
	Required    bool
	// Sandbox names the sandbox fact (one of SandboxFacts) that gives the
	// parameter its value when the blocks run against `cairn sandbox`:
	// the page offers it, `cairn run --sandbox` uses it unless --param
	// says otherwise. Empty: the sandbox has nothing to say.
	Sandbox string
	Pos     Pos
}

// SandboxFacts are what the sandbox knows of itself that a parameter may
// take its value from (front matter `sandbox: lb-name`). The sandbox
// reports the facts of its mode: the load balancer's only in network
// namespace mode, the node ones only with --nodes.
var SandboxFacts = []string{
	"lb-name",          // the load balancer's DNS name
	"lb-port",          // its port
	"ssh-user",         // the login user on every host
	"ssh-key",          // the private key that user logs in with
	"node-images",      // the directory of the node images' archives
	"image-source",     // where nodes get images: "archive" (no registry)
	"preflight-ignore", // kubeadm preflight checks this machine fails
	"cni",              // the CNI the nodes have plugins for: "bridge"
	"pod-network-cidr", // a pod range clear of the sandbox's networks
	"worker-node",      // the first worker node's name
	"node-interface",   // the nodes' network interface
	"cilium-chart",     // the Cilium chart of the nodes' Cilium images
	"cilium-version",   // its version
	"test-image",       // an image every node has for test pods
	"node-image",       // an image every node has for target=node pods
}

// Label is the short name shown in forms and badges.
func (p *Param) Label() string {
	if p.Title != "" {
		return p.Title
	}
	return p.Name
}

// Step is one level-2 section of the runbook.
type Step struct {
	ID       string
	Number   int // 1-based
	Title    string
	When     *Cond
	Always   bool     // always=true: its blocks run even after a failure (clean-up)
	Blocks   []*Block // executable blocks of this step, in order
	Pos      Pos
	Explicit bool // the id was given with {#id}
}

// Target says where a block runs.
type Target string

// Targets. TargetNone marks a display-only block.
const (
	TargetNone   Target = ""
	TargetLocal  Target = "local"
	TargetSSH    Target = "ssh"
	TargetKube   Target = "kube"
	TargetManual Target = "manual"
	// TargetPod runs a shell block in the containers of existing pods,
	// through the API's exec (no SSH): one result per pod.
	TargetPod Target = "pod"
	// TargetNode runs a shell block on nodes through a short-lived
	// privileged pod pinned to each, in the node's namespaces (as kubectl
	// debug node does): one result per node.
	TargetNode Target = "node"
)

// UsesKube reports whether blocks of this target reach the cluster of the
// runbook's kube context (and so are guarded by kube.contexts).
func (t Target) UsesKube() bool { return t == TargetKube || t == TargetPod || t == TargetNode }

// Fans reports whether a block of this target runs once per host, pod or
// node, each with its own result.
func (t Target) Fans() bool { return t == TargetSSH || t == TargetPod || t == TargetNode }

// Role says what a fenced block is for.
type Role int

// Block roles.
const (
	RoleDisplay  Role = iota // plain code, never run
	RoleExec                 // has a target
	RoleExpected             // expected output of another block
	RoleOutput               // recorded output written back by Cairn
)

// Block is one fenced code block.
type Block struct {
	ID       string
	Index    int // position in Runbook.Blocks
	Role     Role
	Lang     string
	Title    string
	Step     *Step // nil in the introduction
	Content  string
	Pos      Pos // the opening fence
	BodyPos  Pos // first content line
	Explicit bool
	Target   Target
	Info     string // the raw info string
	Hash     string // sha256 of Info and Content: what a run request must quote
	Span     [2]int // byte range of the whole fence in Runbook.Source

	Timeout    time.Duration
	Confirm    bool   // the reader must confirm before it runs
	ConfirmMsg string // optional message for the confirmation
	When       *Cond  // own condition joined with the enclosing tab's and step's
	Retries    int
	Interval   time.Duration
	Concurrent bool
	// Always: the block runs even after an earlier block of the run failed
	// (clean-up); set by always=true on the block or on its step.
	Always  bool
	LineNos bool

	// Extra holds other tools' attributes Cairn ignores (Runme's
	// interactive, background, …), each also a warning.
	Extra map[string]string
	// Attrs are the Cairn attributes as read (a Runme name already turned
	// into the id), in order; Foreign says some came in another tool's
	// form (Runme JSON, name=, title= outside braces); Words is what after
	// the language Cairn ignored. cairn import rewrites from these.
	Attrs   []Attr
	Foreign bool
	Words   string

	Expect   Expect
	Captures []*Capture
	Secrets  []string // capture names whose values are secret
	Redact   []*regexp.Regexp
	// Mute: output lines a tool prints that are known and harmless here
	// (a deprecation warning, a fallback the runtime takes), shown muted
	// with MuteWhy. Expectations still read them.
	Mute    []*regexp.Regexp
	MuteWhy string
	// Session: the shell session the block runs in (session=NAME, or the
	// front matter's session): blocks of one session on one host share
	// the working directory and exported variables, as consecutive
	// commands in one shell would. "" is a fresh shell.
	Session string

	// ssh
	Hosts    string // parameter name
	Parallel int
	Sudo     bool
	From     string // action=copy source host parameter
	Copies   []Copy

	// pod and node
	Workload  string // pod: KIND/NAME whose pods to run in (ds/cilium)
	Container string // pod: the container; default the pod's default container
	Nodes     string // node: node names, space or comma separated (parameters allowed)
	Image     string // node: the image of the node pod; default the executor's

	// kube (and ssh copy)
	Action        string
	Kind          string
	Name          string
	Namespace     string
	Selector      string
	FieldSelector string
	JSONPath      string
	PatchType     string
	Replicas      string
	For           string
	All           bool
	// Manifest is the parsed body of action=apply and action=patch: the
	// runner fills parameter values into its scalars, never into its text.
	Manifest *Manifest

	// RoleExpected / RoleOutput: the block this one belongs to.
	OutputOf string
	Of       *Block
	Match    string            // "similar" or ""
	Recorded map[string]string // provenance attributes of a RoleOutput block

	// Executable blocks: expected-output blocks linked to it.
	ExpectedOutputs []*Block

	// Refs are the parameter and capture names the block uses, sorted.
	Refs []string
}

// Badge is the short target label shown on a block: ssh:control-plane, kube:apply.
func (b *Block) Badge(rb *Runbook) string {
	switch b.Target {
	case TargetSSH:
		label := rb.hostsLabel(b.Hosts)
		if b.Action == "copy" {
			return "ssh:" + label + " (copy)"
		}
		return "ssh:" + label
	case TargetKube:
		if b.Action != "" {
			return "kube:" + b.Action
		}
		return "kube"
	case TargetPod:
		switch {
		case b.Workload != "":
			return "pod:" + b.Workload
		case b.Name != "":
			return "pod:" + b.Name
		}
		return "pod:" + b.Selector
	case TargetNode:
		if name, ok := strings.CutPrefix(b.Nodes, "$"); ok && rb.ParamByName(name) != nil {
			return "node:" + rb.hostsLabel(name)
		}
		if b.Nodes != "" {
			return "node:" + b.Nodes
		}
		return "node:" + b.Selector
	}
	return string(b.Target)
}

// hostsLabel is how a badge names the hosts (or nodes) of parameter
// name: its group, else its name in lower case.
func (rb *Runbook) hostsLabel(name string) string {
	if p := rb.ParamByName(name); p != nil {
		if p.Group != "" {
			return p.Group
		}
		return strings.ToLower(strings.ReplaceAll(p.Name, "_", "-"))
	}
	return name
}

// Executable reports whether the block has a target.
func (b *Block) Executable() bool { return b.Role == RoleExec }

// Copy is one file copy of an ssh action=copy block.
type Copy struct {
	Src, Dst string
}

// Expect holds a block's expectations.
type Expect struct {
	Exit        int
	AnyExit     bool
	Contains    []string
	NotContains []string
	Match       []*regexp.Regexp
	JSONPath    []JSONPathCheck
	Count       int // -1 when not set
	Similar     []*Block
	// Lease (expect.lease) checks a Lease object: held by a holder matching
	// the expression, not expired, and renewed while Cairn watches (for at
	// most its leaseDurationSeconds). nil when not set.
	Lease *regexp.Regexp
}

// JSONPathCheck is expect.jsonpath: Path, and optionally Op ("=" or "!=") and Value.
type JSONPathCheck struct {
	Path  string
	Op    string
	Value string
}

// Capture turns output into a value for later blocks.
type Capture struct {
	Name     string
	Regexp   *regexp.Regexp
	JSONPath string
	Secret   bool
}

// Pos is a 1-based position in a file.
type Pos struct {
	Line, Col int
}

// ParamByName returns the declared parameter or nil.
func (r *Runbook) ParamByName(name string) *Param {
	for _, p := range r.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// BlockByID returns the block with that id or nil.
func (r *Runbook) BlockByID(id string) *Block {
	for _, b := range r.Blocks {
		if b.ID == id {
			return b
		}
	}
	return nil
}

// BlockHashes maps each executable block's id to its hash: what a journal
// lookup needs to find runs of the blocks as they are now.
func (r *Runbook) BlockHashes() map[string]string {
	out := map[string]string{}
	for _, b := range r.Blocks {
		if b.Executable() {
			out[b.ID] = b.Hash
		}
	}
	return out
}

// StepByID returns the step with that id or nil.
func (r *Runbook) StepByID(id string) *Step {
	for _, s := range r.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Muted says whether a line of b's output is one its mute= patterns call
// known and harmless.
func (b *Block) Muted(line string) bool {
	for _, re := range b.Mute {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}
