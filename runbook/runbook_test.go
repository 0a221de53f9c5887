package runbook

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gast "github.com/yuin/goldmark/ast"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden files")

// TestCheckGolden parses every testdata/*.md and compares the diagnostics
// with testdata/NAME.golden (empty for clean runbooks).
func TestCheckGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.md")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := Parse(filepath.ToSlash(f), src)
			var all Diagnostics
			if err != nil {
				all = append(all, err.(Diagnostics)...)
			}
			all = append(all, rb.Warnings...)
			all.Sort()
			got := ""
			if len(all) > 0 {
				got = all.Error() + "\n"
			}
			golden := strings.TrimSuffix(f, ".md") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./runbook -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s (go test ./runbook -update to accept):\n got:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func TestModel(t *testing.T) {
	src, err := os.ReadFile("testdata/good.md")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Parse("good.md", src)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Slug != "example" || rb.Meta.Lang != "ko" || len(rb.Steps) != 3 {
		t.Fatalf("slug=%q lang=%q steps=%d", rb.Slug, rb.Meta.Lang, len(rb.Steps))
	}
	if got := rb.ParamByName("CONTROL_PLANE_HOSTS").Default; got != "cp0 cp1 cp2" {
		t.Errorf("hosts default = %q", got)
	}
	initCP := rb.BlockByID("init-cp")
	if initCP == nil || initCP.Target != TargetSSH || !initCP.Confirm || !initCP.Sudo || initCP.Hosts != "FIRST_CP" {
		t.Fatalf("init-cp = %+v", initCP)
	}
	if len(initCP.Captures) != 1 || !initCP.Captures[0].Secret {
		t.Errorf("captures = %+v", initCP.Captures)
	}
	if m := initCP.Captures[0].Regexp.FindStringSubmatch("kubeadm join x --token abc.def \\"); len(m) < 2 || m[1] != "abc.def" {
		t.Errorf("capture regexp: %v", m)
	}
	if !initCP.When.Eval(map[string]string{"ETCD_TOPOLOGY": "stacked"}) || initCP.When.Eval(map[string]string{"ETCD_TOPOLOGY": "external"}) {
		t.Errorf("tab condition: %s", initCP.When.Src)
	}
	join := rb.BlockByID("join-cp")
	if join.When == nil || join.Parallel != 2 || strings.Join(join.Refs, ",") != "JOIN_TOKEN,LOAD_BALANCER_DNS" {
		t.Errorf("join-cp when=%v parallel=%d refs=%v", join.When, join.Parallel, join.Refs)
	}
	lb := rb.BlockByID("nc-lb")
	if len(lb.ExpectedOutputs) != 1 || len(lb.Expect.Similar) != 1 || lb.Timeout.String() != "10s" {
		t.Errorf("nc-lb expected=%d similar=%d timeout=%s", len(lb.ExpectedOutputs), len(lb.Expect.Similar), lb.Timeout)
	}
	wait := rb.BlockByID("wait")
	if wait.For != "jsonpath={.spec.ipam.pools.allocated[0].pool}=default" || !wait.All {
		t.Errorf("wait.For = %q", wait.For)
	}
	cp := rb.BlockByID("copy")
	if len(cp.Copies) != 2 || cp.Copies[1].Dst != "/tmp/ca.key" {
		t.Errorf("copies = %+v", cp.Copies)
	}
	if got := string(rb.Source[cp.Span[0]:cp.Span[1]]); !strings.HasPrefix(got, "```bash {#copy") || !strings.HasSuffix(got, "```\n") {
		t.Errorf("span = %q", got)
	}
	if rb.Steps[0].ID != "check-lb" || rb.Steps[0].Title != "로드 밸런서 확인" {
		t.Errorf("step 0 = %q %q", rb.Steps[0].ID, rb.Steps[0].Title)
	}
}

func TestParseAttrs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // key=value|...
		err  string
	}{
		{`{#a target=local}`, `id=a|target=local`, ""},
		{`{x="a \"b\" \s"}`, `x=a "b" \s`, ""},
		{`{re='\d+\.\d+'}`, `re=\d+\.\d+`, ""},
		{`{flag other=1}`, `flag=true|other=1`, ""},
		{`{for=jsonpath={.a.b}=c}`, `for=jsonpath={.a.b}=c`, ""},
		{`{a="x}`, "", "unterminated"},
		{`{a=}`, "", "missing value"},
		{`{#}`, "", "followed by an id"},
		{`{a=1`, "", "missing closing"},
		{`{a="b"c}`, "", "expected a space"},
		{`{=x}`, "", "unexpected"},
	} {
		attrs, _, err := ParseAttrs(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		var parts []string
		for _, a := range attrs {
			parts = append(parts, a.Key+"="+a.Value)
		}
		if got := strings.Join(parts, "|"); got != tc.want {
			t.Errorf("%s: got %s want %s", tc.in, got, tc.want)
		}
	}
}

func TestCond(t *testing.T) {
	vals := map[string]string{"A": "x", "B": "true", "C": "false"}
	for _, tc := range []struct {
		src  string
		want bool
		err  string
	}{
		{`A == "x"`, true, ""},
		{`A != 'x'`, false, ""},
		{`B && A == "x"`, true, ""},
		{`C || !B`, false, ""},
		{`!(C) && (A == "y" || B)`, true, ""},
		{`"x" == A`, true, ""},
		{`A = "x"`, false, "use '=='"},
		{`A ==`, false, "ends too early"},
		{`(A == "x"`, false, "missing ')'"},
		{`"lonely"`, false, "string alone"},
		{``, false, "empty"},
		{strings.Repeat("!", 100) + "B", false, "too deeply"},
	} {
		c, err := ParseCond(tc.src)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.src, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if got := c.Eval(vals); got != tc.want {
			t.Errorf("%q = %v", tc.src, got)
		}
	}
}

func TestShellRefs(t *testing.T) {
	src := `for HOST in $HOSTS; do echo "$HOST ${PORT:-1}"; done
echo '$SINGLE' # $COMMENT
read -r ANSWER; echo $ANSWER $lower ${#ARR[@]}
cat <<'EOF'
$HEREDOC
EOF
X=1 echo $X $Y`
	refs, assigned := shellRefs(src)
	var names []string
	for _, r := range refs {
		if !assigned[r.Name] {
			names = append(names, r.Name)
		}
	}
	if got := strings.Join(names, ","); got != "HOSTS,PORT,ARR,Y" {
		t.Errorf("unassigned refs = %s", got)
	}
}

func TestParamValidate(t *testing.T) {
	for _, tc := range []struct {
		typ  ParamType
		v    string
		ok   bool
		vals []string
	}{
		{TypeHost, "cp0", true, nil}, {TypeHost, "root@10.0.0.1:22", true, nil}, {TypeHost, "a b", false, nil},
		{TypeHost, "x;rm", false, nil}, {TypeHosts, "cp0, cp1 cp2", true, nil}, {TypeHosts, "", false, nil},
		{TypeCIDR, "10.0.0.0/8", true, nil}, {TypeCIDR, "10.0.0.0", false, nil}, {TypeInt, "42", true, nil},
		{TypeInt, "4x", false, nil}, {TypeBool, "yes", false, nil}, {TypeEnum, "b", true, []string{"a", "b"}},
		{TypeDuration, "5m", true, nil}, {TypeString, `x"; rm -rf ~ #`, true, nil}, {TypeHost, "[::1]:22", true, nil},
	} {
		p := &Param{Name: "P", Type: tc.typ, Values: tc.vals}
		if err := p.Validate(tc.v); (err == nil) != tc.ok {
			t.Errorf("%s %q: err=%v want ok=%v", tc.typ, tc.v, err, tc.ok)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute("a ${X} $X ${Y} $Z", map[string]string{"X": "1", "Z": "3"}, true)
	if got != "a 1 $X ${Y} $Z" {
		t.Errorf("braced only: %q", got)
	}
	got = Substitute("a ${X} $X $Z", map[string]string{"X": "1", "Z": "3"}, false)
	if got != "a 1 1 3" {
		t.Errorf("all: %q", got)
	}
}

// TestNearest: suggestions are close (a swap of neighbours is one edit), and
// a far-off word gets none.
func TestNearest(t *testing.T) {
	cands := []string{"for", "title", "name", "hosts", "MODE"}
	for _, tc := range []struct{ in, want string }{
		{"titel", "title"}, {"nmae", "name"}, {"host", "hosts"}, {"fro", "for"},
		{"ref", ""}, {"NOPE", ""}, {"foo", "for"}, {"timeout", ""},
	} {
		if got := nearest(tc.in, cands); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestExpectLeaseNeedsOneLease: expect.lease applies to action=get of one
// Lease only.
func TestExpectLeaseNeedsOneLease(t *testing.T) {
	for _, tc := range []struct{ info, want string }{
		{"text {#a target=kube action=get kind=Lease name=x namespace=kube-system expect.lease=any}", ""},
		{"text {#a target=kube action=get kind=leases.coordination.k8s.io name=x expect.lease='^kcm-'}", ""},
		{"text {#a target=kube action=get kind=Pod name=x expect.lease=any}", "needs kind=Lease"},
		{"text {#a target=kube action=get kind=Lease expect.lease=any}", "needs kind=Lease and name="},
		{"text {#a target=kube action=wait kind=Lease name=x for=delete expect.lease=any}", "expect.lease needs action=get"},
		{"bash {#a target=local expect.lease=any}", "expect.lease"},
	} {
		_, err := Parse("l.md", []byte("---\ntitle: t\n---\n## a {#s}\n\n```"+tc.info+"\n```\n"))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.info, got, tc.want)
		}
	}
}

// TestHeadingsInBlocksAreNotSteps: a ## inside a list item or a block quote
// is an ordinary heading (CommonMark's), never a step; code blocks there
// still are blocks of the step around them.
func TestHeadingsInBlocksAreNotSteps(t *testing.T) {
	src := "---\ntitle: t\n---\n## one {#one}\n\n" +
		"- item\n\n  ## in a list\n\n  ```bash {#in-list}\n  echo hi\n  ```\n\n" +
		"> ## in a quote\n>\n> text\n\n" +
		"## two {#two}\n\n```bash {#after}\necho two\n```\n"
	rb, err := Parse("nested.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range rb.Steps {
		ids = append(ids, st.ID)
	}
	if strings.Join(ids, " ") != "one two" {
		t.Fatalf("steps %v, want [one two]", ids)
	}
	if b := rb.BlockByID("in-list"); b == nil || b.Step == nil || b.Step.ID != "one" {
		t.Errorf("the block in the list item: %+v", b)
	}
}

// TestFenceLanguageUnescaped: the language is CommonMark's, escapes and
// entities resolved.
func TestFenceLanguageUnescaped(t *testing.T) {
	for _, tc := range []struct{ info, want string }{
		{`foo\+bar`, "foo+bar"},
		{`c&#43;&#43;`, "c++"},
		{`sh&amp;co`, "sh&co"},
		{`bash`, "bash"},
	} {
		rb, err := Parse("lang.md", []byte("---\ntitle: t\n---\n## s {#s}\n\n```"+tc.info+"\nx\n```\n"))
		if err != nil {
			t.Fatalf("%s: %v", tc.info, err)
		}
		if got := rb.Blocks[0].Lang; got != tc.want {
			t.Errorf("%s: language %q, want %q", tc.info, got, tc.want)
		}
	}
}

// TestLenientReading: Markdown written for other tools is read, with
// warnings, not refused.
func TestLenientReading(t *testing.T) {
	for _, tc := range []struct {
		name, src, title string
		extra            map[string]any
		steps            int
		warnings         int
		h1Left           bool
	}{
		{name: "readme.md", src: "# Deploy the app\n\nText.\n\n## Build\n\n```sh\nmake\n```\n", title: "Deploy the app", steps: 1, warnings: 1},
		{name: "notes.md", src: "Just text, no heading.\n", title: "notes", warnings: 1},
		// Only a top-level # is the title; one in a list stays.
		{name: "listed.md", src: "- # In a list\n\n# Real title\n", title: "Real title", warnings: 1, h1Left: true},
		{name: "runme.md", src: "---\ntitle: T\nrunme:\n  id: x1\nreviewers: [a]\n---\n\n## S\n", title: "T",
			extra: map[string]any{"runme": map[string]any{"id": "x1"}, "reviewers": []any{"a"}}, steps: 1, warnings: 2},
		{name: "empty.md", src: "---\ntitle: Empty\n---\n", title: "Empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb, err := Parse(tc.name, []byte(tc.src))
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if rb.Meta.Title != tc.title || len(rb.Steps) != tc.steps || len(rb.Warnings) != tc.warnings {
				t.Errorf("title %q, %d steps, warnings %v; want %q, %d, %d", rb.Meta.Title, len(rb.Steps), rb.Warnings, tc.title, tc.steps, tc.warnings)
			}
			if tc.extra != nil && !reflect.DeepEqual(rb.Meta.Extra, tc.extra) {
				t.Errorf("Extra = %#v, want %#v", rb.Meta.Extra, tc.extra)
			}
			h1 := 0
			_ = gast.Walk(rb.Doc, func(n gast.Node, entering bool) (gast.WalkStatus, error) {
				if h, ok := n.(*gast.Heading); ok && entering && h.Level == 1 {
					h1++
				}
				return gast.WalkContinue, nil
			})
			if want := map[bool]int{true: 1, false: 0}[tc.h1Left]; h1 != want {
				t.Errorf("%d level-1 headings left in the body, want %d (the title is not repeated)", h1, want)
			}
		})
	}
}

// TestRunmeNotebook: a Runme notebook builds as it is, and default_target
// makes its shell blocks runnable.
func TestRunmeNotebook(t *testing.T) {
	src, err := os.ReadFile("testdata/warn-runme.md")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Parse("warn-runme.md", src)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		ID     string
		Role   Role
		Target Target
		Title  string
		Extra  map[string]string
	}
	var blocks []got
	for _, b := range rb.Blocks {
		blocks = append(blocks, got{b.ID, b.Role, b.Target, b.Title, b.Extra})
	}
	want := []got{
		{"hello", RoleExec, TargetLocal, "", map[string]string{"interactive": "false", "runme.id": "01HF7B0KJQ"}},
		{"build-image", RoleExec, TargetLocal, "", map[string]string{"background": "false"}},
		{"", RoleDisplay, "", "pool.yaml", nil},
		{"", RoleDisplay, "", "", nil},
		{"kept", RoleExec, TargetLocal, "", nil},
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Errorf("blocks:\n%+v\nwant\n%+v", blocks, want)
	}
	// Without default_target the same blocks are display-only.
	rb, err = Parse("x.md", []byte(strings.Replace(string(src), "default_target: local\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if b := rb.BlockByID("hello"); b == nil || b.Role != RoleDisplay {
		t.Errorf("without default_target, hello is %+v", b)
	}
}
