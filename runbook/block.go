package runbook

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gast "github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/util"

	rbast "github.com/cairn-dev/cairn/runbook/ast"
)

// Defaults for executable blocks.
const (
	DefaultTimeout  = 5 * time.Minute
	DefaultInterval = 5 * time.Second
)

// runmeKeys are Runme's cell attributes that mean nothing to Cairn ("name"
// is handled apart: it is the block id).
var runmeKeys = map[string]bool{
	"interactive": true, "background": true, "closeTerminalOnSuccess": true, "cwd": true,
	"excludeFromRunAll": true, "interpreter": true, "mimeType": true, "promptEnv": true,
	"terminalRows": true, "category": true, "skipPrompts": true, "tag": true, "runme.id": true,
}

// hasRoleKey reports whether attrs decide the block's role themselves.
func hasRoleKey(attrs []Attr) bool {
	for _, a := range attrs {
		switch a.Key {
		case "target", "expected", "output":
			return true
		}
	}
	return false
}

// runmeName turns Runme's name=NAME into id=NAME; a name that is not a valid
// id becomes its slug, with a warning. With an explicit #id as well, the
// name is ignored (the Key of the result is then empty).
func (p *parseState) runmeName(a Attr, attrs []Attr, pos Pos) Attr {
	for _, x := range attrs {
		if x.Key == "id" {
			p.warnf(pos, "name=%q is ignored: the block has the id %q", a.Value, x.Value)
			return Attr{}
		}
	}
	id := a.Value
	if !idRe.MatchString(id) {
		id = Slugify(id)
		if id == "" {
			p.errf(pos, "name=%q cannot be a block id; give the block an id: {#my-block}", a.Value)
			return Attr{}
		}
		p.warnf(pos, "name=%q is not a block id ([a-z0-9-]); the block's id is %q", a.Value, id)
	}
	return Attr{Key: "id", Value: id, Off: a.Off}
}

// jsonAttrs reads Runme's JSON attribute form, {"name":"x","interactive":false},
// into attributes (strings, numbers and booleans; anything else is warned
// about and dropped). Runme's "id" is its cell identity, not a Cairn id.
func (p *parseState) jsonAttrs(s string, off int) []Attr {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		p.errf(p.at(off), "JSON block attributes: %v", err)
		return nil
	}
	if rest := strings.TrimSpace(s[dec.InputOffset():]); rest != "" {
		p.errf(p.at(off+int(dec.InputOffset())), "unexpected %q after the attributes", rest)
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var attrs []Attr
	for _, k := range keys {
		if k == "id" {
			k = "runme.id"
		}
		switch v := m[strings.TrimPrefix(k, "runme.")].(type) {
		case string:
			attrs = append(attrs, Attr{Key: k, Value: v})
		case bool, json.Number:
			attrs = append(attrs, Attr{Key: k, Value: fmt.Sprint(v)})
		default:
			p.warnf(p.at(off), "JSON block attribute %q: a %T is not an attribute value; ignored", k, v)
		}
	}
	return attrs
}

func (p *parseState) newBlock(n *gast.FencedCodeBlock, ctx walkCtx) *rbast.CodeBlock {
	body := p.rb.Body
	b := &Block{Index: len(p.rb.Blocks), Step: p.step, Pos: p.at(n.Pos())}
	b.Expect.Count = -1
	start, end, closed := fenceSpan(n, body)
	b.Span = [2]int{p.bodyOff + start, p.bodyOff + end}
	if !closed && n.Parent() != nil && n.Parent().Kind() == gast.KindDocument {
		p.errf(b.Pos, "this code fence is never closed, so everything after it is code; add a closing fence line")
	}
	var content strings.Builder
	for i := 0; i < n.Lines().Len(); i++ {
		seg := n.Lines().At(i)
		content.Write(seg.Value(body))
	}
	b.Content = content.String()
	if n.Lines().Len() > 0 {
		b.BodyPos = p.at(n.Lines().At(0).Start)
	} else {
		b.BodyPos = Pos{Line: b.Pos.Line + 1, Col: 1}
	}
	node := &rbast.CodeBlock{Index: b.Index}
	node.SetPos(n.Pos())
	node.SetLines(n.Lines())
	p.rb.Blocks = append(p.rb.Blocks, b)

	infoOff := -1
	if n.Info != nil {
		b.Info = string(n.Info.Segment.Value(body))
		infoOff = n.Info.Segment.Start
	}
	sum := sha256.Sum256([]byte(b.Info + "\n" + b.Content))
	b.Hash = hex.EncodeToString(sum[:])

	info := b.Info
	lang, rest := info, ""
	if i := strings.IndexAny(info, " \t{"); i >= 0 {
		lang, rest = info[:i], info[i:]
	}
	// The language is the info string's first word with CommonMark's
	// backslash escapes and entity references resolved (foo\+bar is
	// foo+bar); the offsets below still count the raw bytes.
	b.Lang = strings.ToLower(string(util.ResolveNumericReferences(util.ResolveEntityNames(util.UnescapePunctuations([]byte(lang))))))
	restOff := infoOff + len(lang)
	trimmed := strings.TrimLeft(rest, " \t")
	restOff += len(rest) - len(trimmed)
	var attrs []Attr
	switch {
	case trimmed == "":
	case strings.HasPrefix(strings.TrimLeft(trimmed[1:], " \t"), `"`) && trimmed[0] == '{':
		// Runme's JSON form: {"name":"hello","interactive":false}.
		attrs = p.jsonAttrs(trimmed, restOff)
		b.Foreign = true
	case trimmed[0] == '{':
		if a, err := p.parseAttrList(trimmed, restOff); err == nil {
			attrs = a
		}
	default:
		// Words after the language, as other tools write them
		// (```yaml title="pool.yaml", ```console $ kubectl get pods):
		// a title becomes the caption, the rest is ignored with a warning;
		// nothing outside {...} makes a block run.
		if a, n, err := ParseAttrs("{" + trimmed + "}"); err == nil && n == len(trimmed)+2 {
			var ignored []string
			for _, x := range a {
				if x.Key == "title" {
					b.Title, b.Foreign = x.Value, true
					continue
				}
				ignored = append(ignored, x.Key+"="+strconv.Quote(x.Value))
				p.warnf(p.at(restOff+x.Off-1), "%q after the language is ignored; Cairn reads block attributes in {...}", x.Key)
			}
			b.Words = strings.Join(ignored, " ")
		} else {
			b.Words = trimmed
			p.warnf(p.at(restOff), "words after the language (%q) are ignored; Cairn reads block attributes in {...}", trimmed)
		}
	}
	if b.Role == RoleDisplay && p.rb.Meta.DefaultTarget != "" && IsShellLang(b.Lang) && !hasRoleKey(attrs) {
		// default_target in the front matter: a notebook's shell blocks
		// run as they are (a Runme file, unchanged).
		attrs = append([]Attr{{Key: "target", Value: string(p.rb.Meta.DefaultTarget)}}, attrs...)
	}
	p.blockAttrs(b, attrs, restOff, ctx)
	if p.step != nil && p.step.Always {
		b.Always = true
	}
	return node
}

// blockAttrs reads a fenced block's attributes into b: its role and
// target, which keys it keeps (filterAttrs), its id, their values (each
// key's set function in blockKeyTable), then the checks of its role.
func (p *parseState) blockAttrs(b *Block, attrs []Attr, off int, ctx walkCtx) {
	pos := func(a Attr) Pos { return p.at(off + a.Off) }
	p.blockRole(b, attrs, pos)
	seen, kept := p.filterAttrs(b, attrs, pos)
	p.defaultID(b)
	b.Attrs = kept
	b.Timeout = DefaultTimeout
	b.Interval = DefaultInterval
	st := &attrState{}
	for _, a := range kept {
		key := a.Key
		if strings.HasPrefix(key, "capture.") {
			key = "capture."
		}
		blockKeys[key].set(&attrCtx{p: p, b: b, a: a, pos: pos(a), off: off, st: st})
	}
	p.markSecrets(b, st, pos)
	p.runLints(b)
	switch b.Role {
	case RoleExec:
		if b.Step != nil {
			b.Step.Blocks = append(b.Step.Blocks, b)
			b.When = And(b.Step.When, ctx.when, st.when)
		} else {
			b.When = And(ctx.when, st.when)
		}
		p.checkTarget(b, seen, pos)
		p.checkRefs(b)
		p.checkEmptyGreen(b)
		p.checkStdin(b)
		for _, c := range b.Captures {
			if _, ok := p.captures[c.Name]; !ok {
				p.captures[c.Name] = b
			}
		}
		p.lastExec = b
	case RoleExpected, RoleOutput:
		if b.OutputOf == "" {
			if p.lastExec == nil {
				what := "{expected}"
				if b.Role == RoleOutput {
					what = "{output}"
				}
				p.errf(b.Pos, "%s has no executable block before it in this step; name one: {expected=BLOCK-ID}", what)
			} else {
				b.OutputOf = p.lastExec.ID
			}
		}
	}
}

// blockRole sets the role and target first: they decide which keys are
// allowed.
func (p *parseState) blockRole(b *Block, attrs []Attr, pos func(Attr) Pos) {
	for _, a := range attrs {
		switch a.Key {
		case "target":
			b.Role = RoleExec
		case "expected":
			if b.Role == RoleDisplay {
				b.Role = RoleExpected
			}
		case "output":
			if b.Role == RoleDisplay {
				b.Role = RoleOutput
			}
		}
	}
	for _, a := range attrs {
		if a.Key == "target" {
			b.Target = Target(a.Value)
			switch b.Target {
			case TargetLocal, TargetSSH, TargetKube, TargetPod, TargetNode, TargetManual:
			default:
				p.errf(pos(a), "target %q is unknown (known: local, ssh, kube, pod, node, manual)", a.Value)
			}
		}
	}
}

// filterAttrs keeps the attributes that are known and allowed on this
// block (the others are reported), sets an explicit id, and returns the
// kept ones with the first of each key.
func (p *parseState) filterAttrs(b *Block, attrs []Attr, pos func(Attr) Pos) (map[string]Attr, []Attr) {
	seen := map[string]Attr{}
	var kept []Attr
	for _, a := range attrs {
		if a.Key == "name" && b.Target != TargetKube && b.Target != TargetPod {
			// Runme's block name is Cairn's block id (name= is a
			// resource name only on kube blocks).
			a, b.Foreign = p.runmeName(a, attrs, pos(a)), true
			if a.Key == "" {
				continue
			}
		}
		if runmeKeys[a.Key] {
			if b.Extra == nil {
				b.Extra = map[string]string{}
			}
			b.Extra[a.Key] = a.Value
			p.warnf(pos(a), "Runme attribute %q is ignored by Cairn (kept with the block)", strings.TrimPrefix(a.Key, "runme."))
			continue
		}
		key := a.Key
		if strings.HasPrefix(key, "capture.") {
			if b.Role != RoleExec {
				p.errf(pos(a), "%s needs target=...: only executable blocks capture values", a.Key)
				continue
			}
			kept = append(kept, a)
			continue
		}
		use, ok := blockKeys[key]
		if !ok {
			hint := ""
			if n := nearest(key, knownKeys()); n != "" {
				hint = fmt.Sprintf("; did you mean %q?", n)
			}
			p.errf(pos(a), "unknown block attribute %q%s (see docs/runbook-format.md)", a.Key, hint)
			continue
		}
		if prev, dup := seen[key]; dup && !use.repeat {
			p.errf(pos(a), "attribute %q given twice (first at column %d)", key, pos(prev).Col)
			continue
		}
		seen[key] = a
		if !p.keyAllowed(b, use, pos(a)) {
			continue
		}
		if key == "id" {
			b.ID, b.Explicit = a.Value, true
			if !idRe.MatchString(a.Value) {
				p.errf(pos(a), "block id %q must match [a-z0-9][a-z0-9-]*", a.Value)
			}
		}
		kept = append(kept, a)
	}
	return seen, kept
}

// keyAllowed reports whether a key may stand on this block's role and
// target, and says why not when it may not.
func (p *parseState) keyAllowed(b *Block, use *blockKey, at Pos) bool {
	roles := use.roles
	if roles == nil {
		roles = []Role{RoleExec}
	}
	if !containsRole(roles, b.Role) {
		switch {
		case containsRole(roles, RoleExec) && b.Role == RoleDisplay:
			p.errf(at, "attribute %q needs target=... (local, ssh, kube or manual); without a target a block is display-only", use.name)
		case roles[0] == RoleExpected:
			p.errf(at, "attribute %q belongs on an expected-output block {expected=ID}", use.name)
		case roles[0] == RoleOutput:
			p.errf(at, "attribute %q belongs on a recorded-output block {output=ID}", use.name)
		default:
			p.errf(at, "attribute %q is not allowed on an expected or recorded output block", use.name)
		}
		return false
	}
	if use.targets != nil && b.Role == RoleExec && !containsTarget(use.targets, b.Target) && b.Target != "" {
		ts := make([]string, len(use.targets))
		for i, t := range use.targets {
			ts[i] = "target=" + string(t)
		}
		p.errf(at, "attribute %q applies only to %s, not target=%s", use.name, strings.Join(ts, " or "), b.Target)
		return false
	}
	return true
}

// defaultID names an executable block without an id after its step:
// <step>-<n>, the n-th executable block of the step.
func (p *parseState) defaultID(b *Block) {
	if b.Role == RoleExec && b.ID == "" {
		prefix := "intro"
		if b.Step != nil {
			prefix = b.Step.ID
		}
		n := 1
		if b.Step != nil {
			n = len(b.Step.Blocks) + 1
		} else {
			for _, x := range p.rb.Blocks {
				if x.Role == RoleExec && x.Step == nil && x != b {
					n++
				}
			}
		}
		b.ID = fmt.Sprintf("%s-%d", prefix, n)
		for i := 2; p.blockIDs[b.ID] != nil; i++ {
			b.ID = fmt.Sprintf("%s-%d-%d", prefix, n, i)
		}
	}
	if b.ID != "" {
		if first := p.blockIDs[b.ID]; first != nil {
			p.errf(b.Pos, "duplicate block id %q (first used at line %d); block ids must be unique", b.ID, first.Pos.Line)
		} else {
			p.blockIDs[b.ID] = b
		}
	}
}

// markSecrets marks the captures that secret= names.
func (p *parseState) markSecrets(b *Block, st *attrState, pos func(Attr) Pos) {
	for _, s := range st.secrets {
		found := false
		for _, c := range b.Captures {
			if c.Name == s {
				c.Secret, found = true, true
			}
		}
		if !found {
			p.errf(pos(st.secretAttr), "%s: secret: %s is not captured by this block (secret lists capture names)", blockName(b), s)
		}
	}
	b.Secrets = st.secrets
}

func (p *parseState) checkTarget(b *Block, seen map[string]Attr, pos func(Attr) Pos) {
	where := b.Pos
	blk := fmt.Sprintf("block %q", b.ID)
	isShell := contains(shellLangs, b.Lang)
	if _, ok := seen["mute"]; ok && b.MuteWhy == "" {
		p.errf(pos(seen["mute"]), "%s: mute needs mute.why: say why those lines are expected (the page shows it with them)", blk)
	}
	if a, ok := seen["mute.why"]; ok && len(b.Mute) == 0 {
		p.errf(pos(a), "%s: mute.why without mute: give the lines to mute with mute='REGEX'", blk)
	}
	needShell := func(what string) {
		if !isShell {
			p.errf(where, "%s: %s runs a bash script, so the fence language must be bash, sh or shell (not %q)", blk, what, b.Lang)
		}
	}
	hostParam := func(attr, value string, types ...ParamType) {
		prm := p.rb.ParamByName(value)
		at := where
		if a, ok := seen[attr]; ok {
			at = pos(a)
		}
		switch {
		case prm == nil:
			p.errf(at, "%s: %s: unknown parameter %q%s", blk, attr, value, p.paramHint(value))
		case !containsType(types, prm.Type):
			p.errf(at, "%s: %s: parameter %s is of type %s; it must be a host or hosts parameter", blk, attr, value, prm.Type)
		}
	}
	switch b.Target {
	case TargetLocal:
		needShell("target=local")
	case TargetManual:
	case TargetSSH:
		if b.Hosts == "" {
			p.errf(where, "%s: target=ssh needs hosts=PARAM (a host or hosts parameter)", blk)
		} else {
			hostParam("hosts", b.Hosts, TypeHost, TypeHosts)
		}
		if b.Parallel == 0 {
			b.Parallel = 1
		}
		switch b.Action {
		case "":
			needShell("target=ssh")
			if b.From != "" {
				p.errf(pos(seen["from"]), "%s: from is only for action=copy", blk)
			}
		case "copy":
			if b.From != "" {
				hostParam("from", b.From, TypeHost)
			}
			p.copies(b, blk)
		default:
			p.errf(pos(seen["action"]), "%s: action %q is unknown for target=ssh (known: copy)", blk, b.Action)
		}
	case TargetKube:
		p.checkKube(b, seen, pos, isShell)
	case TargetPod, TargetNode:
		p.checkPodNode(b, seen, pos)
		switch b.Action {
		case "":
			needShell("target=" + string(b.Target))
			if b.From != "" {
				p.errf(pos(seen["from"]), "%s: from is only for action=copy", blk)
			}
		case "copy":
			p.copies(b, blk)
		default:
			p.errf(pos(seen["action"]), "%s: action %q is unknown for target=node (known: copy)", blk, b.Action)
		}
		if b.Parallel == 0 {
			b.Parallel = 1
		}
	}
	p.checkSession(b, seen, pos, isShell)
	if b.Target == TargetManual && (len(b.Captures) > 0 || b.Retries > 0) {
		p.errf(where, "%s: a manual block is done by a person; it cannot capture or retry", blk)
	}
}

func (p *parseState) checkKube(b *Block, seen map[string]Attr, pos func(Attr) Pos, isShell bool) {
	blk := fmt.Sprintf("block %q", b.ID)
	where := b.Pos
	if b.Expect.Lease != nil && b.Action != "get" {
		p.errf(where, "%s: expect.lease needs action=get kind=Lease name=... (add retries= to wait for a holder)", blk)
	}
	if b.Action == "" {
		if !isShell {
			p.errf(where, "%s: target=kube needs action=%s, or a bash block that calls kubectl", blk, strings.Join(kubeActions, "|"))
		}
		for _, k := range []string{"kind", "name", "namespace", "selector", "field-selector", "jsonpath", "patch-type", "replicas", "for", "all"} {
			if a, ok := seen[k]; ok {
				p.errf(pos(a), "%s: %s needs action=... (a native kube action)", blk, k)
			}
		}
		return
	}
	if !contains(kubeActions, b.Action) {
		p.errf(pos(seen["action"]), "%s: action %q is unknown for target=kube (known: %s)", blk, b.Action, strings.Join(kubeActions, ", "))
		return
	}
	need := func(cond bool, msg string) {
		if !cond {
			p.errf(where, "%s: action=%s %s", blk, b.Action, msg)
		}
	}
	allowed := map[string][]string{
		"apply":  {"namespace"},
		"get":    {"kind", "name", "namespace", "selector", "field-selector", "jsonpath"},
		"patch":  {"kind", "name", "namespace", "patch-type"},
		"delete": {"kind", "name", "namespace", "selector", "field-selector"},
		"scale":  {"kind", "name", "namespace", "replicas"},
		"wait":   {"kind", "name", "namespace", "selector", "field-selector", "for", "all"},
	}[b.Action]
	for _, k := range []string{"kind", "name", "namespace", "selector", "field-selector", "jsonpath", "patch-type", "replicas", "for", "all"} {
		if a, ok := seen[k]; ok && !contains(allowed, k) {
			p.errf(pos(a), "%s: %s does not apply to action=%s", blk, k, b.Action)
		}
	}
	body := strings.TrimSpace(b.Content)
	switch b.Action {
	case "apply":
		need(body != "", "needs a manifest in the block body")
		need(b.Lang == "yaml" || b.Lang == "yml" || b.Lang == "json", "takes a yaml or json body (fence language yaml or json)")
	case "patch":
		need(b.Kind != "" && b.Name != "", "needs kind=... and name=...")
		need(body != "", "needs the patch document in the block body")
	case "get":
		need(b.Kind != "", "needs kind=...")
		need(body == "", "takes no body; use attributes")
		if b.Expect.Lease != nil {
			need(IsLeaseKind(b.Kind) && b.Name != "", "expect.lease needs kind=Lease and name=... (one Lease)")
		}
	case "delete":
		need(b.Kind != "", "needs kind=...")
		need(b.Name != "" || b.Selector != "" || b.FieldSelector != "", "needs name=, selector= or field-selector= (Cairn never deletes every object of a kind)")
		need(body == "", "takes no body; use attributes")
	case "scale":
		need(b.Kind != "" && b.Name != "" && b.Replicas != "", "needs kind=, name= and replicas=")
		need(body == "", "takes no body; use attributes")
	case "wait":
		need(b.Kind != "", "needs kind=...")
		need(b.For != "", "needs for=condition=NAME, for=jsonpath={...}=VALUE or for=delete")
		need(b.Name != "" || b.All || b.Selector != "", "needs name=..., selector=... or all=true")
		need(body == "", "takes no body; use attributes")
	}
	if (b.Action == "apply" || b.Action == "patch") && body != "" {
		p.checkManifest(b)
	}
	// hosts=NAME names a parameter; these take text, where a bare NAME is
	// literal: say so rather than touch an object called NAMESPACE.
	for _, k := range []string{"kind", "name", "namespace", "selector", "field-selector", "replicas"} {
		if a, ok := seen[k]; ok && p.rb.ParamByName(a.Value) != nil {
			p.errf(pos(a), "%s: %s=%s is the literal text %q; write %s=$%s to use the parameter", blk, k, a.Value, a.Value, k, a.Value)
		}
	}
	if b.Replicas != "" && !strings.HasPrefix(b.Replicas, "$") {
		if n, err := strconv.Atoi(b.Replicas); err != nil || n < 0 {
			p.errf(pos(seen["replicas"]), "%s: replicas must be a count ≥ 0 or a parameter reference, not %q", blk, b.Replicas)
		}
	}
}

// Workload kinds a pod block may name (workload=KIND/NAME), as kubectl
// spells them, with their canonical resource.
var workloadKinds = map[string]string{
	"ds": "daemonsets", "daemonset": "daemonsets", "daemonsets": "daemonsets",
	"deploy": "deployments", "deployment": "deployments", "deployments": "deployments",
	"sts": "statefulsets", "statefulset": "statefulsets", "statefulsets": "statefulsets",
	"rs": "replicasets", "replicaset": "replicasets", "replicasets": "replicasets",
	"job": "jobs", "jobs": "jobs",
}

// WorkloadResource splits workload=KIND/NAME into the resource (daemonsets,
// deployments, …) and the name; ok is false for a kind Cairn does not know.
func WorkloadResource(w string) (resource, name string, ok bool) {
	k, n, found := strings.Cut(w, "/")
	if !found || n == "" {
		return "", "", false
	}
	res, ok := workloadKinds[strings.ToLower(k)]
	return res, n, ok
}

// sessionNameRe is what a session is called.
var sessionNameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// checkSession checks session= and gives a shell block the front
// matter's session when it names none (session=none: a fresh shell).
func (p *parseState) checkSession(b *Block, seen map[string]Attr, pos func(Attr) Pos, isShell bool) {
	a, named := seen["session"]
	shellBlock := isShell && b.Action == "" && b.Target != TargetManual && b.Target != ""
	switch {
	case named && !shellBlock:
		p.errf(pos(a), "block %q: session= is for blocks that run a shell script (not a kube action, a copy or a manual step)", b.ID)
		b.Session = ""
	case named && b.Session == "none":
		b.Session = ""
	case named && !sessionNameRe.MatchString(b.Session):
		p.errf(pos(a), "block %q: session=%q: use lower-case letters, digits and dashes (up to 32), or none", b.ID, b.Session)
		b.Session = ""
	case !named && shellBlock:
		b.Session = p.rb.Meta.Session
	}
}

// copies reads an action=copy block's SOURCE [DEST] lines into b.Copies.
func (p *parseState) copies(b *Block, blk string) {
	for i, line := range strings.Split(strings.TrimRight(b.Content, "\n"), "\n") {
		f := strings.Fields(line)
		lpos := Pos{Line: b.BodyPos.Line + i, Col: 1}
		switch len(f) {
		case 0:
			continue
		case 1:
			b.Copies = append(b.Copies, Copy{Src: f[0], Dst: f[0]})
		case 2:
			b.Copies = append(b.Copies, Copy{Src: f[0], Dst: f[1]})
		default:
			p.errf(lpos, "%s: each line of a copy block is SOURCE [DEST]; paths with spaces are not supported", blk)
			continue
		}
		if b.Target == TargetNode && slices.ContainsFunc(FindRefs(f[0], false), func(r Ref) bool { return r.Name == "CAIRN_HOST" }) {
			p.errf(lpos, "%s: copy source %s uses $CAIRN_HOST; a node block reads each source once for all its nodes, so name one file (a DEST may use $CAIRN_HOST)", blk, f[0])
		}
	}
	if len(b.Copies) == 0 {
		p.errf(b.Pos, "%s: action=copy lists no files; write one SOURCE [DEST] per line", blk)
	}
}

// checkPodNode checks how a pod or node block chooses where it runs:
// exactly one way.
func (p *parseState) checkPodNode(b *Block, seen map[string]Attr, pos func(Attr) Pos) {
	blk := fmt.Sprintf("block %q", b.ID)
	var ways []string
	for _, k := range []string{"name", "workload", "nodes", "selector"} {
		if _, ok := seen[k]; ok {
			ways = append(ways, k+"=")
		}
	}
	switch {
	case len(ways) == 0 && b.Target == TargetPod:
		p.errf(b.Pos, "%s: target=pod needs workload=KIND/NAME (ds/cilium), selector=LABELS or name=POD", blk)
	case len(ways) == 0:
		p.errf(b.Pos, "%s: target=node needs nodes=NAMES or selector=LABELS", blk)
	case len(ways) > 1:
		p.errf(b.Pos, "%s: %s: choose the %ss one way", blk, strings.Join(ways, " and "), b.Target)
	}
	if a, ok := seen["workload"]; ok {
		if _, _, ok := WorkloadResource(a.Value); !ok && !strings.HasPrefix(a.Value, "$") {
			p.errf(pos(a), "%s: workload=%s: write KIND/NAME with KIND one of ds, deploy, sts, rs, job", blk, a.Value)
		}
	}
	if a, ok := seen["selector"]; ok && strings.TrimSpace(a.Value) == "" {
		p.errf(pos(a), "%s: selector= is empty; Cairn never runs on every %s", blk, b.Target)
	}
	for _, k := range []string{"name", "namespace", "selector", "workload", "container", "nodes", "image", "from"} {
		if a, ok := seen[k]; ok && p.rb.ParamByName(a.Value) != nil {
			p.errf(pos(a), "%s: %s=%s is the literal text %q; write %s=$%s to use the parameter", blk, k, a.Value, a.Value, k, a.Value)
		}
	}
}

// IsLeaseKind reports whether kind names coordination.k8s.io Leases.
func IsLeaseKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "lease", "leases", "lease.coordination.k8s.io", "leases.coordination.k8s.io":
		return true
	}
	return false
}

// checkRefs records the parameters and captures a block uses and reports
// references to names that are neither.
func (p *parseState) checkRefs(b *Block) {
	names := map[string]bool{}
	report := func(name string, at Pos) {
		if p.rb.ParamByName(name) != nil {
			names[name] = true
			return
		}
		if _, ok := p.captures[name]; ok {
			names[name] = true
			return
		}
		if p.laterCapture(name, b) {
			p.errf(at, "block %q: $%s is captured by a block that comes after this one; move the capture earlier", b.ID, name)
			return
		}
		p.errf(at, "block %q: $%s is not a declared parameter or an earlier capture%s", b.ID, name, p.paramHint(name))
	}
	lineAt := func(off int) Pos {
		line := strings.Count(b.Content[:off], "\n")
		col := off - strings.LastIndexByte(b.Content[:off], '\n')
		return Pos{Line: b.BodyPos.Line + line, Col: col}
	}
	if contains(shellLangs, b.Lang) && b.Action == "" {
		refs, assigned := shellRefs(b.Content)
		earlier := p.sessionVars[b.Session]
		for _, r := range refs {
			if assigned[r.Name] || isReservedEnv(r.Name) || b.Session != "" && earlier[r.Name] {
				continue
			}
			report(r.Name, lineAt(r.Off))
		}
		if b.Session != "" {
			// What this block sets, a later block of its session reads.
			if p.sessionVars == nil {
				p.sessionVars = map[string]map[string]bool{}
			}
			if earlier == nil {
				earlier = map[string]bool{}
				p.sessionVars[b.Session] = earlier
			}
			for n := range assigned {
				earlier[n] = true
			}
		}
	} else if b.Target == TargetKube || b.Action == "copy" {
		for _, r := range bodyRefs(b.Content, b.Action != "copy") {
			if b.Action == "copy" && r.Name == "CAIRN_HOST" {
				continue // each destination's name, filled in per host
			}
			report(r.Name, lineAt(r.Off))
		}
	}
	for _, v := range []string{b.Kind, b.Name, b.Namespace, b.Selector, b.FieldSelector, b.Replicas, b.For, b.Workload, b.Container, b.Nodes, b.Image, b.From} {
		for _, r := range bodyRefs(v, false) {
			report(r.Name, b.Pos)
		}
	}
	b.Refs = make([]string, 0, len(names))
	for n := range names {
		b.Refs = append(b.Refs, n)
	}
	sort.Strings(b.Refs)
}

// laterCapture is filled lazily: the parser has not reached later blocks
// yet, so this scans the remaining source text for capture.NAME.
func (p *parseState) laterCapture(name string, b *Block) bool {
	rest := p.rb.Source[b.Span[1]:]
	return strings.Contains(string(rest), "capture."+name+"=")
}

// ParseJSONPathCheck parses expect.jsonpath: `{.path}`, `{.path}=v`, `{.path}!=v`.
func ParseJSONPathCheck(s string) (JSONPathCheck, error) {
	path, rest, err := splitJSONPath(s)
	if err != nil {
		return JSONPathCheck{}, err
	}
	jc := JSONPathCheck{Path: path}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "!="):
		jc.Op, jc.Value = "!=", rest[2:]
	case strings.HasPrefix(rest, "=="):
		jc.Op, jc.Value = "=", rest[2:]
	case strings.HasPrefix(rest, "="):
		jc.Op, jc.Value = "=", rest[1:]
	default:
		return jc, fmt.Errorf("unexpected %q after %s; write {.path}=value or {.path}!=value", rest, path)
	}
	return jc, nil
}

// splitJSONPath splits "{...}rest" at the brace that closes the first one.
func splitJSONPath(s string) (string, string, error) {
	if !strings.HasPrefix(s, "{") {
		return "", "", fmt.Errorf("a JSONPath starts with '{', as in {.status.phase}")
	}
	depth := 0
	inStr := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr != 0:
			if c == inStr {
				inStr = 0
			}
		case c == '"' || c == '\'':
			inStr = c
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return s[:i+1], s[i+1:], nil
			}
		}
	}
	return "", "", fmt.Errorf("JSONPath %q has no closing '}'", s)
}

// checkJSONPath accepts a kubectl JSONPath template: one or more {…}
// expressions with text between them ({range .items[*]}{.metadata.name}{"\n"}{end}).
func checkJSONPath(s string) error {
	if !strings.HasPrefix(s, "{") {
		return fmt.Errorf("a JSONPath starts with '{', as in {.status.phase}")
	}
	for rest := s; rest != ""; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return nil
		}
		_, after, err := splitJSONPath(rest[i:])
		if err != nil {
			return err
		}
		rest = after
	}
	return nil
}

func checkWaitFor(s string) error {
	switch {
	case s == "delete":
		return nil
	case strings.HasPrefix(s, "condition="):
		if strings.TrimPrefix(s, "condition=") == "" {
			return fmt.Errorf("condition= needs a condition type such as Established or Ready")
		}
		return nil
	case strings.HasPrefix(s, "jsonpath="):
		_, err := ParseJSONPathCheck(strings.TrimPrefix(s, "jsonpath="))
		return err
	}
	return fmt.Errorf("%q: use condition=TYPE, jsonpath={.path}=VALUE, jsonpath={.path} or delete", s)
}

func containsRole(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func containsTarget(ts []Target, t Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

func containsType(ts []ParamType, t ParamType) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// checkManifest parses a kube body and refuses references that could change
// what the block creates rather than a value in it: a reference in a key, in
// apiVersion or kind, or an unvalidated string parameter naming an object.
func (p *parseState) checkManifest(b *Block) {
	blk := fmt.Sprintf("block %q", b.ID)
	m, err := ParseManifest(b.Content)
	if err != nil {
		p.errf(b.BodyPos, "%s: %v", blk, err)
		return
	}
	b.Manifest = m
	at := func(r ManifestRef) Pos { return Pos{Line: b.BodyPos.Line + r.Line - 1, Col: 1} }
	for _, r := range m.Refs() {
		field := r.Path
		if i := strings.LastIndexByte(field, ']'); i >= 0 && strings.HasPrefix(field, "items[") {
			field = strings.TrimPrefix(field[i+1:], ".") // kind: List items
		}
		switch {
		case r.Path == "":
			// In a comment: never filled in, harmless.
		case r.Key:
			p.errf(at(r), "%s: ${%s} is part of the key %q; a parameter may only be a value (move it to the right of the colon)", blk, r.Name, r.Path)
		case b.Action == "apply" && (field == "apiVersion" || field == "kind" || field == "metadata.name" || field == "metadata.namespace"):
			// What a block creates is what its manifest spells out; a
			// value may only pick among what a pattern allows.
			prm := p.rb.ParamByName(r.Name)
			switch {
			case prm == nil:
				p.errf(at(r), "%s: ${%s} sets %s from a captured value; the objects a block creates must come from its manifest or a validated parameter", blk, r.Name, field)
			case prm.Type == TypeString && prm.Pattern == nil:
				p.errf(at(r), "%s: parameter %s sets %s but accepts any text; give it a pattern, e.g. pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'", blk, r.Name, field)
			}
		}
	}
}

// loopOverSubst finds `for NAME in $(…)`: a failing command inside the
// substitution is invisible to bash -e, and the loop just runs zero times.
var loopOverSubst = regexp.MustCompile(`(?m)^\s*for\s+[A-Za-z_][A-Za-z0-9_]*\s+in\s+(?:"?)\$\(`)

// checkEmptyGreen refuses a shell block that would verify on empty output:
// it loops over a command substitution and expects nothing positive.
func (p *parseState) checkEmptyGreen(b *Block) {
	if !contains(shellLangs, b.Lang) || b.Action != "" || b.Target == TargetManual {
		return
	}
	if len(b.Expect.Contains) > 0 || len(b.Expect.Match) > 0 || len(b.Expect.Similar) > 0 || len(b.Captures) > 0 {
		return
	}
	for _, m := range loopOverSubst.FindAllStringIndex(b.Content, -1) {
		if strings.Contains(b.Content[m[0]:min(len(b.Content), m[1]+40)], "$(seq ") {
			continue // a counter, not a list that can fail
		}
		line := b.BodyPos.Line + strings.Count(b.Content[:m[0]], "\n")
		p.errf(Pos{Line: line, Col: 1}, "block %q: `for … in $(…)` hides a failing command (bash -e does not see inside the list) and the block expects no output, so it would verify having done nothing; assign the list first (list=$(…)), check it is not empty, or add expect.contains", b.ID)
		return
	}
}

// checkStdin warns about a command that waits for input: blocks run with
// no standard input, so it reads nothing and the block fails with no
// output that says why.
func (p *parseState) checkStdin(b *Block) {
	if cmd := ReadsStdin(b); cmd != "" {
		p.warnf(b.BodyPos, "block %q: `%s` waits for input, but blocks run with no standard input (it gets none and the block fails); give the value as a parameter, or make the step target=manual", b.ID, cmd)
	}
}

// IsShellLang reports whether a fence language is one Cairn runs with bash.
func IsShellLang(lang string) bool { return slices.Contains(shellLangs, lang) }

// ValidID reports whether s can be written as an explicit {#id}.
func ValidID(s string) bool { return idRe.MatchString(s) }
