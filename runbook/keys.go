package runbook

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A blockKey is one block attribute: where it may appear, how its value is
// read and where it lands in the Block, and its line in
// docs/runbook-format.md. The parser, its diagnostics ("unknown attribute,
// did you mean", "applies only to target=kube") and the format document's
// key tables all come from blockKeyTable, so a key is added in one place.
type blockKey struct {
	name    string
	repeat  bool     // may appear more than once
	targets []Target // nil: any executable block
	roles   []Role   // nil: RoleExec only
	set     func(c *attrCtx)
	docs    []keyDoc // rows of the format document's tables
}

// keyDoc is one row of a key table in docs/runbook-format.md: the section
// (the table's marker), what the key column shows (default `name`) and the
// meaning.
type keyDoc struct {
	section, label, text string
}

// Sections of docs/runbook-format.md with a generated key table.
const (
	docCommon  = "common"
	docExpect  = "expect"
	docCapture = "capture"
	docSSH     = "ssh"
	docKube    = "kube"
	docPod     = "pod"
	docNode    = "node"
)

var (
	anyRole    = []Role{RoleDisplay, RoleExec, RoleExpected, RoleOutput}
	outputRole = []Role{RoleOutput}
	kubeOnly   = []Target{TargetKube}
	sshOnly    = []Target{TargetSSH}
	podOnly    = []Target{TargetPod}
	nodeOnly   = []Target{TargetNode}
	fanTargets = []Target{TargetSSH, TargetPod, TargetNode}

	shellLangs  = []string{"bash", "sh", "shell"}
	kubeActions = []string{"apply", "get", "patch", "delete", "scale", "wait"}
)

// blockKeyTable lists every block attribute in the order the format
// document shows them. "capture." stands for capture.NAME.
var blockKeyTable = []blockKey{
	{name: "id", roles: anyRole, set: func(c *attrCtx) {}, // read before the others: see filterAttrs
		docs: []keyDoc{{docCommon, "#id", "Block id, `[a-z0-9][a-z0-9-]*`, unique in the runbook. Default: `<step-id>-<n>` (n-th executable block of the step)."}}},
	{name: "target", set: func(c *attrCtx) {}, // read first: it decides the role
		docs: []keyDoc{{docCommon, "", "`local` (bash on the reader's machine), `ssh` (bash on each host of `hosts`), `kube` (a native Kubernetes action, or a shell block with the runbook's kube context pinned), `pod` (bash in the containers of existing pods, through the API), `node` (bash on nodes, through a short-lived privileged pod on each), `manual` (something a person does; Run becomes \"mark done\")."}}},
	{name: "title", roles: anyRole, set: func(c *attrCtx) { c.b.Title = c.a.Value },
		docs: []keyDoc{{docCommon, "", "A caption shown above the block (a file name, say)."}}},
	{name: "timeout", set: func(c *attrCtx) {
		if d := c.duration(); d > 0 {
			c.b.Timeout = d
		}
	}, docs: []keyDoc{{docCommon, "", "Go duration; default `5m`. The whole process group is killed when it passes."}}},
	{name: "confirm", set: func(c *attrCtx) {
		switch c.b.Confirm = true; c.a.Value {
		case "true":
		case "false":
			c.b.Confirm = false
		default:
			c.b.ConfirmMsg = c.a.Value
		}
	}, docs: []keyDoc{{docCommon, "", "`true` or a message: the reader must confirm before it runs (destructive steps)."}}},
	{name: "when", set: func(c *attrCtx) { c.st.when = c.p.cond(c.a.Value, c.pos, c.off+c.a.Off) },
		docs: []keyDoc{{docCommon, "", "A condition (section 5); the block is skipped when false."}}},
	{name: "retries", set: func(c *attrCtx) { c.b.Retries = c.integer(0) },
		docs: []keyDoc{{docCommon, "`retries`, `interval`", "Poll: run up to `retries` more times, `interval` apart (default `5s`), until the expectations hold (\"wait until\"). A host-group block is re-run on every host. `timeout` applies to each attempt."}}},
	{name: "interval", set: func(c *attrCtx) {
		if d := c.duration(); d > 0 {
			c.b.Interval = d
		}
	}}, // documented with retries
	{name: "concurrent", set: func(c *attrCtx) { c.b.Concurrent = c.boolean() },
		docs: []keyDoc{{docCommon, "", "`true`: may run while another block of the same runbook runs."}}},
	{name: "always", set: func(c *attrCtx) { c.b.Always = c.boolean() },
		docs: []keyDoc{{docCommon, "", "`true`: runs even after an earlier block of the run failed (clean-up); also set by `always=true` on the step."}}},
	{name: "linenos", roles: anyRole, set: func(c *attrCtx) { c.b.LineNos = c.boolean() },
		docs: []keyDoc{{docCommon, "", "`true`: show line numbers."}}},

	{name: "expect.exit", set: func(c *attrCtx) {
		if c.a.Value == "any" {
			c.b.Expect.AnyExit = true
		} else {
			c.b.Expect.Exit = c.integer(0)
		}
	}, docs: []keyDoc{{docExpect, "", "Expected exit status (default `0`; `any` to accept every status)."}}},
	{name: "expect.contains", repeat: true, set: func(c *attrCtx) { c.b.Expect.Contains = append(c.b.Expect.Contains, c.a.Value) },
		docs: []keyDoc{{docExpect, "", "*repeatable*: output contains this text."}}},
	{name: "expect.not-contains", repeat: true, set: func(c *attrCtx) { c.b.Expect.NotContains = append(c.b.Expect.NotContains, c.a.Value) },
		docs: []keyDoc{{docExpect, "", "*repeatable*: output does not contain this text."}}},
	{name: "expect.match", repeat: true, set: func(c *attrCtx) {
		if re := c.regex(); re != nil {
			c.b.Expect.Match = append(c.b.Expect.Match, re)
		}
	}, docs: []keyDoc{{docExpect, "", "*repeatable*: output matches this RE2 regular expression (multi-line mode)."}}},
	{name: "expect.jsonpath", repeat: true, targets: kubeOnly, set: func(c *attrCtx) {
		jc, err := ParseJSONPathCheck(c.a.Value)
		if err != nil {
			c.errf("expect.jsonpath: %v", err)
			return
		}
		c.b.Expect.JSONPath = append(c.b.Expect.JSONPath, jc)
	}, docs: []keyDoc{{docExpect, "", "*repeatable*, kube blocks: `{.path}` (must be non-empty), `{.path}=value` or `{.path}!=value`, evaluated on every object the action returned."}}},
	{name: "expect.count", targets: kubeOnly, set: func(c *attrCtx) { c.b.Expect.Count = c.integer(0) },
		docs: []keyDoc{{docExpect, "", "kube blocks: the number of objects returned."}}},
	{name: "expect.lease", targets: kubeOnly, set: func(c *attrCtx) {
		// "any": any holder; else a regular expression for holderIdentity.
		if c.a.Value == "any" || c.a.Value == "" {
			c.b.Expect.Lease = regexp.MustCompile(`.`)
		} else if re := c.regex(); re != nil {
			c.b.Expect.Lease = re
		}
	}, docs: []keyDoc{{docExpect, "", "`action=get kind=Lease name=…`: the Lease is held by a holder matching this RE2 expression (`any`: any holder), has not expired (`renewTime` + `leaseDurationSeconds` is still ahead) and **is being renewed**: Cairn reads it again until `renewTime` moves, for at most `leaseDurationSeconds` + 1 s. A controller that exited leaves its name in the Lease; only the renewal tells it from a live one. Add `retries=`/`interval=` to wait for a holder. Exported scripts check the same way (kubectl, twice)."}}},

	{name: "capture.", repeat: true, set: setCapture,
		docs: []keyDoc{{docCapture, "capture.NAME", "*repeatable*: set `NAME` for later blocks from the output — an RE2 regex (the first group, or the whole match when it has none) or `jsonpath={…}` for kube blocks and JSON output. `NAME` matches `[A-Z][A-Z0-9_]*` and must not be a parameter."}}},
	{name: "secret", set: func(c *attrCtx) { c.st.secrets, c.st.secretAttr = strings.Fields(c.a.Value), c.a },
		docs: []keyDoc{{docCapture, "", "Space-separated capture names whose values are secret: redacted like `secret` parameters — even in the live output of the block that prints them."}}},
	{name: "redact", repeat: true, set: func(c *attrCtx) {
		if re := c.regex(); re != nil {
			c.b.Redact = append(c.b.Redact, re)
		}
	}, docs: []keyDoc{{docCapture, "", "*repeatable*: a regex whose matches are replaced by `••••` in everything shown or stored."}}},

	{name: "mute", repeat: true, set: func(c *attrCtx) {
		if re := c.regex(); re != nil {
			c.b.Mute = append(c.b.Mute, re)
		}
	}, docs: []keyDoc{{docCapture, "", "*repeatable*: an RE2 regex for output lines that are known and harmless (a tool's deprecation warning, a fallback it takes on this platform): the page shows them muted, with `mute.why` beside them. Expectations still read them."}}},
	{name: "mute.why", set: func(c *attrCtx) { c.b.MuteWhy = c.a.Value },
		docs: []keyDoc{{docCapture, "", "**required** with `mute`: why those lines are expected, for the reader (shown with them)."}}},

	{name: "session", targets: []Target{TargetLocal, TargetSSH, TargetPod, TargetNode, TargetKube}, set: func(c *attrCtx) { c.b.Session = c.a.Value },
		docs: []keyDoc{{docCommon, "", "A shell session (`session=build`; or the front matter's `session: NAME` for every shell block, `session=none` to leave one out): the blocks of one session on one host share the working directory and exported variables, as consecutive commands in one shell would: a `cd` or an `export` in one is there in the next. Each host has its own. The page shows the session's directory and variables after each block; `cairn run` and the exported script keep them the same way. Needs bash on the target."}}},
	{name: "hosts", targets: sshOnly, set: func(c *attrCtx) { c.b.Hosts = c.a.Value },
		docs: []keyDoc{{docSSH, "", "**required** for `target=ssh`: a parameter of type `host` or `hosts`. The block runs on each host."}}},
	{name: "parallel", targets: fanTargets, set: func(c *attrCtx) { c.b.Parallel = c.integer(1) },
		docs: []keyDoc{{docSSH, "", "Hosts at a time (default 1: in order). Honoured as written up to 1,024 connections (fewer when the open-file limit is low); logins take turns, a few per core, and share one ssh-agent connection."},
			{docPod, "", "Pods at a time (default 1: in order)."},
			{docNode, "", "Nodes at a time (default 1: in order)."}}},
	{name: "sudo", targets: []Target{TargetSSH, TargetNode}, set: func(c *attrCtx) { c.b.Sudo = c.boolean() },
		docs: []keyDoc{{docSSH, "", "`true`: run the script under `sudo -n bash`."},
			{docNode, "", "Accepted, so a block written for `target=ssh` moves over unchanged: a node block always runs as root."}}},
	{name: "action", targets: []Target{TargetSSH, TargetKube, TargetNode}, set: func(c *attrCtx) { c.b.Action = c.a.Value },
		docs: []keyDoc{
			{docSSH, "action=copy", "Copy files instead of running a script: `from` (a `host` parameter; default the reader's machine) to every host of `hosts`; each body line is `SOURCE [DEST]` (DEST defaults to SOURCE; parameters allowed)."},
			{docNode, "action=copy", "Copy files to each node as root, through its node pod: from the reader's machine, or from the node `from` names; each body line is `SOURCE [DEST]` as on SSH hosts (a DEST ending in `/` or naming a directory gets the source's file name). The file lands whole or not at all (written beside it, then renamed), with the source's mode. SOURCE is read once per block, so it cannot use `$CAIRN_HOST`."},
			{docKube, "", "`apply` (server-side apply of the body, a multi-document YAML/JSON manifest, custom resources included), `get`, `patch` (the body is the patch), `delete`, `scale`, `wait`."},
		}},
	{name: "from", targets: []Target{TargetSSH, TargetNode}, set: func(c *attrCtx) { c.b.From = c.a.Value },
		docs: []keyDoc{{docSSH, "", "With `action=copy`: the source host parameter."},
			{docNode, "", "With `action=copy`: the node the files come from, read as root through a node pod of its own (`from=$FIRST_CP`; parameters allowed)."}}},

	{name: "workload", targets: podOnly, set: func(c *attrCtx) { c.b.Workload = c.a.Value },
		docs: []keyDoc{{docPod, "", "`KIND/NAME` of a DaemonSet, Deployment, StatefulSet, ReplicaSet or Job (`ds/cilium`, `deploy/coredns`): its pods, by its own selector."}}},
	{name: "container", targets: podOnly, set: func(c *attrCtx) { c.b.Container = c.a.Value },
		docs: []keyDoc{{docPod, "", "The container to run in; default the pod's `kubectl.kubernetes.io/default-container`, else its first."}}},
	{name: "nodes", targets: nodeOnly, set: func(c *attrCtx) { c.b.Nodes = c.a.Value },
		docs: []keyDoc{{docNode, "", "Node names, space or comma separated; parameters allowed (`nodes=$CONTROL_PLANE_NODES`). Or use `selector`."}}},
	{name: "image", targets: nodeOnly, set: func(c *attrCtx) { c.b.Image = c.a.Value },
		docs: []keyDoc{{docNode, "", "The node pod's image; it needs `nsenter` and `sleep` (busybox has both). Default: the executor's `--node-image` (the sandbox's own image when it is the target)."}}},
	{name: "kind", targets: kubeOnly, set: func(c *attrCtx) { c.b.Kind = c.a.Value },
		docs: []keyDoc{{docKube, "", "Resource: `Deployment`, `deployments.apps`, `ciliumnodes.cilium.io`, … (`get`, `patch`, `delete`, `scale`, `wait`)."}}},
	{name: "name", targets: []Target{TargetKube, TargetPod}, set: func(c *attrCtx) { c.b.Name = c.a.Value },
		docs: []keyDoc{{docKube, "", "Object name (parameters allowed)."},
			{docPod, "", "One pod by name (parameters allowed)."}}},
	{name: "namespace", targets: []Target{TargetKube, TargetPod, TargetNode}, set: func(c *attrCtx) { c.b.Namespace = c.a.Value },
		docs: []keyDoc{{docKube, "", "Namespace (parameters allowed); default the context's."},
			{docPod, "", "The pods' namespace (parameters allowed); default the context's."},
			{docNode, "", "Where the node pods are made; default the context's. Pod Security admission must allow privileged pods there (`kube-system` usually does)."}}},
	{name: "selector", targets: []Target{TargetKube, TargetPod, TargetNode}, set: func(c *attrCtx) { c.b.Selector = c.a.Value },
		docs: []keyDoc{{docKube, "`selector`, `field-selector`", "Label / field selector (`get`, `delete`, `wait`)."},
			{docPod, "", "Label selector of the pods (`k8s-app=cilium`)."},
			{docNode, "", "Label selector of the nodes (`node-role.kubernetes.io/control-plane`)."}}},
	{name: "field-selector", targets: kubeOnly, set: func(c *attrCtx) { c.b.FieldSelector = c.a.Value }}, // documented with selector
	{name: "jsonpath", targets: kubeOnly, set: func(c *attrCtx) {
		if err := checkJSONPath(c.a.Value); err != nil {
			c.errf("jsonpath: %v", err)
		}
		c.b.JSONPath = c.a.Value
	}, docs: []keyDoc{{docKube, "", "`get`: print this projection (kubectl's JSONPath) instead of the objects as YAML."}}},
	{name: "patch-type", targets: kubeOnly, set: func(c *attrCtx) {
		c.b.PatchType = c.a.Value
		if !contains(patchTypes, c.a.Value) {
			c.errf("patch-type %q is unknown (known: %s)", c.a.Value, strings.Join(patchTypes, ", "))
		}
	}, docs: []keyDoc{{docKube, "", "`strategic` (default), `merge`, `json`."}}},
	{name: "replicas", targets: kubeOnly, set: func(c *attrCtx) { c.b.Replicas = c.a.Value },
		docs: []keyDoc{{docKube, "", "`scale`: the replica count (parameters allowed)."}}},
	{name: "for", targets: kubeOnly, set: func(c *attrCtx) {
		c.b.For = c.a.Value
		if err := checkWaitFor(c.a.Value); err != nil {
			c.errf("for: %v", err)
		}
	}, docs: []keyDoc{{docKube, "", "`wait`: `condition=Established`, `jsonpath={.path}=value`, `jsonpath={.path}` (non-empty) or `delete`. An object whose deletion is in progress (a pod just deleted, still `Ready` while it terminates) never satisfies a condition or jsonpath."}}},
	{name: "all", targets: kubeOnly, set: func(c *attrCtx) { c.b.All = c.boolean() },
		docs: []keyDoc{{docKube, "", "`wait`: every object of `kind` (with `selector`) must satisfy `for`, not just `name`."}}},

	// Expected and recorded output blocks (section 4 of the format
	// document describes them in prose).
	{name: "expected", roles: []Role{RoleExpected}, set: setOutputOf},
	{name: "match", roles: []Role{RoleExpected}, set: func(c *attrCtx) {
		c.b.Match = c.a.Value
		if c.a.Value != "similar" {
			c.p.errf(c.pos, "match=%s is unknown; use match=similar (or leave it out to only show the output)", c.a.Value)
		}
	}},
	{name: "output", roles: outputRole, set: setOutputOf},
	{name: "status", roles: outputRole, set: setRecorded},
	{name: "at", roles: outputRole, set: setRecorded},
	{name: "host", roles: outputRole, set: setRecorded},
	{name: "context", roles: outputRole, set: setRecorded},
	{name: "exit", roles: outputRole, set: setRecorded},
	{name: "duration", roles: outputRole, set: setRecorded},
}

var patchTypes = []string{"strategic", "merge", "json"}

// blockKeys indexes blockKeyTable by name.
var blockKeys = func() map[string]*blockKey {
	m := make(map[string]*blockKey, len(blockKeyTable))
	for i := range blockKeyTable {
		m[blockKeyTable[i].name] = &blockKeyTable[i]
	}
	return m
}()

func knownKeys() []string {
	keys := make([]string, 0, len(blockKeyTable))
	for _, k := range blockKeyTable {
		if k.name == "capture." {
			keys = append(keys, "capture.NAME")
		} else {
			keys = append(keys, k.name)
		}
	}
	sort.Strings(keys)
	return keys
}

func setOutputOf(c *attrCtx) {
	if c.a.Value != "true" {
		c.b.OutputOf = c.a.Value
	}
}

func setRecorded(c *attrCtx) {
	if c.b.Recorded == nil {
		c.b.Recorded = map[string]string{}
	}
	c.b.Recorded[c.a.Key] = c.a.Value
}

func setCapture(c *attrCtx) {
	name := strings.TrimPrefix(c.a.Key, "capture.")
	capt := &Capture{Name: name}
	switch {
	case !paramNameRe.MatchString(name):
		c.errf("capture name %q must match [A-Z][A-Z0-9_]* (it becomes an environment variable)", name)
	case c.p.rb.ParamByName(name) != nil:
		c.errf("capture %s has the name of a parameter; captures and parameters share one namespace", name)
	case isReservedEnv(name):
		c.errf("capture %s is a well-known environment variable; choose another name", name)
	}
	if jp, ok := strings.CutPrefix(c.a.Value, "jsonpath="); ok {
		if err := checkJSONPath(jp); err != nil {
			c.errf("capture.%s: %v", name, err)
		}
		capt.JSONPath = jp
	} else if re := c.regex(); re != nil {
		capt.Regexp = re
	}
	c.b.Captures = append(c.b.Captures, capt)
}

// attrState is what reading one block's attributes collects beside the
// Block itself.
type attrState struct {
	when       *Cond
	secrets    []string
	secretAttr Attr
}

// attrCtx is one attribute being read into its block: the value readers
// report errors at the attribute, naming the block.
type attrCtx struct {
	p   *parseState
	b   *Block
	a   Attr
	pos Pos
	off int // the attribute text's offset in the body
	st  *attrState
}

// blockName names the block in messages: `block "id"`, or `block` before
// it has an id.
func blockName(b *Block) string {
	if b.ID != "" {
		return fmt.Sprintf("block %q", b.ID)
	}
	return "block"
}

func (c *attrCtx) errf(format string, args ...any) {
	c.p.errf(c.pos, "%s: %s", blockName(c.b), fmt.Sprintf(format, args...))
}

func (c *attrCtx) duration() time.Duration {
	d, err := time.ParseDuration(c.a.Value)
	if err != nil || d <= 0 {
		c.errf("%s %q: use a Go duration such as 30s or 5m", c.a.Key, c.a.Value)
		return 0
	}
	return d
}

func (c *attrCtx) boolean() bool {
	switch c.a.Value {
	case "true":
		return true
	case "false":
		return false
	}
	c.errf("%s must be true or false, not %q", c.a.Key, c.a.Value)
	return false
}

func (c *attrCtx) integer(min int) int {
	v, err := strconv.Atoi(c.a.Value)
	if err != nil || v < min {
		c.errf("%s must be an integer ≥ %d, not %q", c.a.Key, min, c.a.Value)
		return min
	}
	return v
}

// regex compiles the value in multi-line mode; the error quotes the
// pattern as written, not with the (?m) prefix.
func (c *attrCtx) regex() *regexp.Regexp {
	if re, ok := regexCache.Load(c.a.Value); ok {
		return re.(*regexp.Regexp)
	}
	if _, err := regexp.Compile(c.a.Value); err != nil {
		c.errf("%s: bad regular expression %q: %s", c.a.Key, c.a.Value, reErr(err))
		return nil
	}
	re, err := regexp.Compile("(?m)" + c.a.Value)
	if err != nil {
		c.errf("%s: bad regular expression %q: %s", c.a.Key, c.a.Value, reErr(err))
		return nil
	}
	if regexCached.Add(1) <= maxCachedRegexps {
		regexCache.Store(c.a.Value, re)
	}
	return re
}

// regexCache holds the compiled expect and capture patterns by their text:
// a rebuild (every edit under cairn serve) parses the same patterns again,
// and compiling them was a tenth of re-parsing a big runbook. A Regexp is
// safe to share. The count bounds what a long editing session can add.
var (
	regexCache  sync.Map // pattern → *regexp.Regexp, compiled with (?m)
	regexCached atomic.Int64
)

const maxCachedRegexps = 4096

// KeyTables renders the format document's key table for a section
// (common, expect, capture, ssh, kube) as Markdown.
func keyTable(section string) string {
	var sb strings.Builder
	sb.WriteString("| key | meaning |\n| --- | --- |\n")
	for _, k := range blockKeyTable {
		for _, d := range k.docs {
			if d.section != section {
				continue
			}
			label := d.label
			if label == "" {
				label = "`" + k.name + "`"
			} else if !strings.Contains(label, "`") {
				label = "`" + label + "`"
			}
			fmt.Fprintf(&sb, "| %s | %s |\n", label, d.text)
		}
	}
	return sb.String()
}
