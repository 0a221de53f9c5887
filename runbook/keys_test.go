package runbook

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// keyTableRe finds a generated key table of docs/runbook-format.md.
var keyTableRe = regexp.MustCompile(`(?s)(<!-- keys:(\w+):[^\n]*-->\n)(.*?)(<!-- /keys -->)`)

// TestFormatKeyTables holds the format document's key tables to
// blockKeyTable; -update rewrites them.
func TestFormatKeyTables(t *testing.T) {
	const path = "../docs/runbook-format.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	got := keyTableRe.ReplaceAllStringFunc(string(doc), func(m string) string {
		sm := keyTableRe.FindStringSubmatch(m)
		sections = append(sections, sm[2])
		return sm[1] + keyTable(sm[2]) + sm[4]
	})
	want := []string{docCommon, docExpect, docCapture, docSSH, docKube, docPod, docNode}
	if !slices.Equal(sections, want) {
		t.Fatalf("%s has generated key tables %v, want %v", path, sections, want)
	}
	if got == string(doc) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the key tables differ from runbook/keys.go; run go test ./runbook -run TestFormatKeyTables -update", path)
}

// TestEveryKeyDocumented: each key of an executable block has a row of its
// own or is named in another's (retries, interval); the keys of expected
// and recorded output blocks are section 4's prose.
func TestEveryKeyDocumented(t *testing.T) {
	var labels strings.Builder
	for _, k := range blockKeyTable {
		for _, d := range k.docs {
			labels.WriteString(k.name + " " + d.label + "\n")
		}
	}
	for _, k := range blockKeyTable {
		if k.set == nil {
			t.Errorf("key %q has no set function", k.name)
		}
		if k.roles != nil && !slices.Contains(k.roles, RoleExec) {
			continue
		}
		if !strings.Contains(labels.String(), "`"+k.name+"`") && len(k.docs) == 0 {
			t.Errorf("key %q is in no table of docs/runbook-format.md; give it a keyDoc", k.name)
		}
	}
}

// TestKeyTableDiagnostics: the table decides which keys a block takes.
func TestKeyTableDiagnostics(t *testing.T) {
	for _, tc := range []struct{ info, want string }{
		{"bash {target=local hosts=CP}", `attribute "hosts" applies only to target=ssh, not target=local`},
		{"bash {target=ssh hosts=CP expect.count=2}", `attribute "expect.count" applies only to target=kube, not target=ssh`},
		{"bash {target=local retires=3}", `unknown block attribute "retires"; did you mean "retries"?`},
		{"bash {timeout=5m}", `attribute "timeout" needs target=...`},
		{"text {expected match=exact}", "match=exact is unknown"},
		{"bash {target=local expect.match=a expect.match=b timeout=1s timeout=2s}", `attribute "timeout" given twice`},
		{"text {output=x status=verified retries=2}", `attribute "retries" is not allowed on an expected or recorded output block`},
		{"bash {target=local parallel=2}", `attribute "parallel" applies only to target=ssh or target=pod or target=node`},
		{"bash {target=pod}", `target=pod needs workload=KIND/NAME (ds/cilium), selector=LABELS or name=POD`},
		{"bash {target=pod workload=ds/cilium selector=a=b}", `workload= and selector=: choose the pods one way`},
		{"bash {target=pod workload=cilium}", `workload=cilium: write KIND/NAME with KIND one of ds, deploy, sts, rs, job`},
		{"bash {target=pod workload=ds/x image=busybox}", `attribute "image" applies only to target=node, not target=pod`},
		{"yaml {target=pod workload=ds/x}", `target=pod runs a bash script, so the fence language must be bash, sh or shell`},
		{"bash {target=node}", `target=node needs nodes=NAMES or selector=LABELS`},
		{"bash {target=node nodes=a container=b}", `attribute "container" applies only to target=pod, not target=node`},
		{"bash {target=node nodes=CP}", `nodes=CP is the literal text "CP"; write nodes=$CP to use the parameter`},
		{"bash {target=node nodes=$NOPE}", `$NOPE is not a declared parameter`},
		{`bash {target=node selector=""}`, `selector= is empty; Cairn never runs on every node`},
		{"text {target=node nodes=$CP action=apply}", `action "apply" is unknown for target=node (known: copy)`},
		{"bash {target=node nodes=$CP from=$CP}", `from is only for action=copy`},
		{"text {target=node nodes=$CP action=copy from=CP}", `from=CP is the literal text "CP"; write from=$CP to use the parameter`},
		{"text {target=pod workload=ds/x action=copy}", `attribute "action" applies only to target=ssh or target=kube or target=node, not target=pod`},
		{"text {target=kube action=get kind=Pod name=x session=s}", `session= is for blocks that run a shell script`},
		{"bash {target=local session=Build_1}", `session="Build_1": use lower-case letters, digits and dashes`},
		{"bash {target=local interval=0s}", `block "intro-1": interval "0s": use a Go duration`},
		{"bash {target=local always=yes}", `block "intro-1": always must be true or false, not "yes"`},
		{"bash {target=local mute=WARN}", `block "intro-1": mute needs mute.why: say why those lines are expected`},
		{`bash {target=local mute.why="x"}`, `block "intro-1": mute.why without mute`},
		{`bash {target=local mute=( mute.why="x"}`, `mute: bad regular expression "("`},
		{`text {expected match=exact mute=x}`, `attribute "mute"`},
	} {
		src := "---\ntitle: t\nparams:\n  - name: CP\n    type: hosts\n---\n\n```" + tc.info + "\necho hi\n```\n"
		_, err := Parse("t.md", []byte(src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.info, err, tc.want)
		}
	}
}

// TestMute: mute= marks the output lines a block's tool prints that are
// known and harmless; each is one line's match, as the page applies it.
func TestMute(t *testing.T) {
	src := "---\ntitle: t\n---\n\n```bash {target=local mute='RuntimeConfig|^\\s*\\[WARNING ContainerRuntimeVersion\\]' mute='cgroups v1' mute.why=\"the runtime lacks it; harmless\"}\necho hi\n```\n"
	rb, err := Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b := rb.Blocks[0]
	if b.MuteWhy != "the runtime lacks it; harmless" || len(b.Mute) != 2 {
		t.Fatalf("mute %v why %q", b.Mute, b.MuteWhy)
	}
	for line, want := range map[string]bool{
		`E1207 01:50:46.004775 435 remote_runtime.go:1359] "RuntimeConfig from runtime service failed"`: true,
		"\t[WARNING ContainerRuntimeVersion]: You must update your container runtime":                   true,
		"[WARNING SystemVerification]: cgroups v1 support is deprecated":                                true,
		"This node has joined the cluster":                                                              false,
	} {
		if b.Muted(line) != want {
			t.Errorf("Muted(%q) = %v", line, !want)
		}
	}
}

// TestNodeCopy: action=copy on target=node reads SOURCE [DEST] lines as
// on SSH hosts; a DEST may name each node ($CAIRN_HOST), a SOURCE may not
// (it is read once for all nodes), with the line that does it.
func TestNodeCopy(t *testing.T) {
	head := "---\ntitle: t\nparams:\n  - name: CP\n    type: hosts\n  - name: FIRST\n    type: host\n---\n\n"
	rb, err := Parse("t.md", []byte(head+"```text {#c target=node action=copy nodes=$CP from=$FIRST}\n/etc/kubernetes/pki/ca.crt\n~/x.conf /etc/x/$CAIRN_HOST.conf\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := rb.BlockByID("c")
	want := []Copy{{Src: "/etc/kubernetes/pki/ca.crt", Dst: "/etc/kubernetes/pki/ca.crt"}, {Src: "~/x.conf", Dst: "/etc/x/$CAIRN_HOST.conf"}}
	if !slices.Equal(b.Copies, want) || b.From != "$FIRST" || !slices.Contains(b.Refs, "FIRST") || !slices.Contains(b.Refs, "CP") {
		t.Errorf("copies %v from %q refs %v", b.Copies, b.From, b.Refs)
	}
	_, err = Parse("t.md", []byte(head+"```text {#c target=node action=copy nodes=$CP}\n/a /b\n/tmp/$CAIRN_HOST.conf\n```\n"))
	if err == nil || !strings.Contains(err.Error(), "t.md:12:1: block \"c\": copy source /tmp/$CAIRN_HOST.conf uses $CAIRN_HOST") {
		t.Errorf("a node copy source with $CAIRN_HOST: %v", err)
	}
	// On SSH hosts both may name the host.
	if _, err := Parse("t.md", []byte(head+"```text {#c target=ssh action=copy hosts=CP}\n/tmp/$CAIRN_HOST.conf /etc/$CAIRN_HOST.conf\n```\n")); err != nil {
		t.Errorf("an ssh copy with $CAIRN_HOST: %v", err)
	}
}

// TestSession: session= puts a shell block in a named session; the front
// matter's session is every shell block's that names none; session=none
// leaves it.
func TestSession(t *testing.T) {
	src := "---\ntitle: t\nsession: build\nparams:\n  - name: H\n    type: hosts\n---\n## s {#s}\n\n" +
		"```bash {#a target=local}\ncd /tmp\n```\n\n" +
		"```bash {#b target=ssh hosts=H session=deploy}\nexport X=1\n```\n\n" +
		"```bash {#c target=local session=none}\npwd\n```\n\n" +
		"```text {#d target=manual}\nby hand\n```\n"
	rb, err := Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"a": "build", "b": "deploy", "c": "", "d": ""} {
		if got := rb.BlockByID(id).Session; got != want {
			t.Errorf("block %s: session %q, want %q", id, got, want)
		}
	}
	if _, err := Parse("t.md", []byte("---\ntitle: t\nsession: Not OK\n---\n")); err == nil || !strings.Contains(err.Error(), `session "Not OK"`) {
		t.Errorf("a bad front-matter session: %v", err)
	}
}
