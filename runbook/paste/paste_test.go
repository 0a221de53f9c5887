package paste_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/paste"
)

// The test binary doubles as the stand-ins a pasted command starts (bash,
// ssh, sudo, kubectl): linked under those names into a PATH folder, it
// records its argv, environment and standard input instead of running a
// block's body. What a remote bash would read before the body (the export
// lines) is run by the real bash, so their quoting is what is tested.
func TestMain(m *testing.M) {
	if log := os.Getenv("CAIRN_PASTE_LOG"); log != "" {
		os.Exit(stub(filepath.Base(os.Args[0]), os.Args[1:], log))
	}
	os.Exit(m.Run())
}

type record struct {
	Cmd   string            `json:"cmd"`
	Argv  []string          `json:"argv"`
	Env   map[string]string `json:"env"`
	Stdin string            `json:"stdin"`
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func appendRecord(log string, r record) {
	b, _ := json.Marshal(r)
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	f.Write(append(b, '\n'))
}

func stub(name string, args []string, log string) int {
	in := ""
	if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
		b, _ := io.ReadAll(os.Stdin)
		in = string(b)
	}
	realBash := os.Getenv("CAIRN_PASTE_BASH")
	switch name {
	case "sudo":
		if len(args) > 0 && args[0] == "-n" {
			args = args[1:]
		}
		c := exec.Command(args[0], args[1:]...)
		c.Stdin, c.Stdout, c.Stderr = strings.NewReader(in), os.Stdout, os.Stderr
		if c.Run() != nil {
			return 1
		}
		return 0
	case "ssh":
		appendRecord(log, record{Cmd: name, Argv: args, Stdin: in})
		// The remote command, run here by bash with the same stand-ins.
		c := exec.Command(realBash, "-c", args[len(args)-1])
		c.Stdin, c.Stdout, c.Stderr = strings.NewReader(in), os.Stdout, os.Stderr
		if c.Run() != nil {
			return 1
		}
		return 0
	case "bash":
		appendRecord(log, record{Cmd: name, Argv: args, Env: envMap(os.Environ()), Stdin: in})
		if len(args) > 0 && args[len(args)-1] == "-s" {
			var exports []string
			for _, l := range strings.Split(in, "\n") {
				if !strings.HasPrefix(l, "export ") {
					break
				}
				exports = append(exports, l)
			}
			out, err := exec.Command(realBash, "--noprofile", "--norc", "-c", strings.Join(exports, "\n")+"\nenv -0").Output()
			if err != nil {
				return 1
			}
			appendRecord(log, record{Cmd: "remote-env", Env: envMap(strings.Split(string(out), "\x00"))})
		}
		return 0
	case "kubectl":
		appendRecord(log, record{Cmd: name, Argv: args, Stdin: in})
		return kubectlStub(args, in)
	default:
		appendRecord(log, record{Cmd: name, Argv: args, Stdin: in})
		return 0
	}
}

// kubectlStub answers what the pastes of pod and node blocks ask a
// cluster: a workload's selector, one pod, one node, the node pod it
// makes; and runs what they exec (after nsenter's --, for a node) here,
// with the same stand-ins.
func kubectlStub(args []string, in string) int {
	has := func(w string) bool { return slices.Contains(args, w) }
	switch {
	case has("exec"):
		i := slices.Index(args, "--")
		cmd := args[i+1:]
		if cmd[0] == "nsenter" {
			cmd = cmd[slices.Index(cmd, "--")+1:]
		}
		// A container has a shell and little else (Cilium's agent image has
		// no env): only the stand-ins are on its PATH.
		self, _ := exec.LookPath("kubectl")
		if !strings.Contains(cmd[0], "/") {
			cmd[0] = filepath.Join(filepath.Dir(self), cmd[0])
		}
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Stdin, c.Stdout, c.Stderr = strings.NewReader(in), os.Stdout, os.Stderr
		c.Env = append(os.Environ(), "PATH="+filepath.Dir(self))
		if c.Run() != nil {
			return 1
		}
	case has("get") && has("pods"):
		fmt.Println("pod/p1")
	case has("get") && has("nodes"):
		fmt.Println("node/n1")
	case has("get"):
		fmt.Print("app=x,")
	case has("create"):
		if !json.Valid([]byte(in)) {
			fmt.Fprintln(os.Stderr, "kubectl create: not JSON")
			return 1
		}
		fmt.Println("pod/cairn-node-n1-abcde")
	}
	return 0
}

// stubs links the stand-ins into a folder for PATH.
func stubs(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range []string{"bash", "ssh", "sudo", "kubectl", "scp", "ssh-agent", "ssh-add", "helm", "kubeadm", "nsenter"} {
		if err := os.Symlink(self, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func records(t *testing.T, log string) []record {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		return nil
	}
	var out []record
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("record %q: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// hostile are values that would run code, end a here-document or break a
// JSON string if a copied command spliced them into its text. MARK is
// replaced with a file that must never exist.
var hostile = []string{
	`$(touch MARK)`,
	"`touch MARK`",
	`'; touch MARK; '`,
	`"; touch MARK; "`,
	"x\ntouch MARK",
	"EOF\ntouch MARK\nEOF",
	"CAIRN_EOF\ntouch MARK\nCAIRN_EOF",
	`a\"b\\c $HOME ${HOME} !! %s %q`,
	"tab\there, bell\a, del\x7f; 안녕 \"따옴표\"",
	`}"}]} {"x": "$(touch MARK)"`,
}

// pasteInto feeds text to bash on standard input, as a terminal paste
// reaches a shell, with the stand-ins first on PATH.
func pasteInto(t *testing.T, dir, stubDir, log, text string) string {
	t.Helper()
	realBash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, realBash, "--noprofile", "--norc", "-s")
	c.Dir = dir
	c.Stdin = strings.NewReader(text)
	c.Env = append(os.Environ(), "PATH="+stubDir+":"+os.Getenv("PATH"), "CAIRN_SSH_CONFIG=", "CAIRN_PASTE_LOG="+log, "CAIRN_PASTE_BASH="+realBash)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	_ = c.Run()
	return out.String()
}

func loadAll(t *testing.T) []*runbook.Runbook {
	t.Helper()
	set, err := runbook.LoadDir("../../content")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/hostile.md")
	if err != nil {
		t.Fatal(err)
	}
	h, err := runbook.Parse("testdata/hostile.md", src)
	if err != nil {
		t.Fatal(err)
	}
	return append(set.Runbooks, h)
}

func isHostParam(rb *runbook.Runbook, name string) bool {
	p := rb.ParamByName(name)
	return p != nil && (p.Type == runbook.TypeHosts || p.Type == runbook.TypeHost)
}

// TestPastedValuesStayData (review, Medium): pasting a copied command ran
// $(touch X) in 7 of 20 cases, and a multi-line value could end a
// here-document. Every copy of every bundled block and of a hostile
// runbook, filled with hostile values, is pasted into real bash: nothing
// extra runs, each value reaches the block's bash (locally or, through the
// export lines, remotely) whole, every body reaches bash verbatim, and
// every kube body kubectl gets is JSON.
func TestPastedValuesStayData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs bash many times")
	}
	stubDir := stubs(t)
	n := 0
	for _, rb := range loadAll(t) {
		for _, b := range rb.Blocks {
			tmpl := paste.Build(rb, b)
			if tmpl == nil {
				continue
			}
			for hi, hv := range hostile {
				dir := t.TempDir()
				mark := filepath.Join(dir, "MARK")
				v := strings.ReplaceAll(hv, "MARK", mark)
				values := map[string]string{}
				for name, info := range tmpl.Vars {
					if info.Secret {
						continue
					}
					values[name] = v
					if isHostParam(rb, name) {
						values[name] = "cp0" // split into words; tested in TestHostWords
					}
				}
				text := tmpl.Fill(values)
				log := filepath.Join(dir, "log.jsonl")
				out := pasteInto(t, dir, stubDir, log, text)
				n++
				if _, err := os.Stat(mark); err == nil {
					t.Fatalf("%s/%s, value %d: the paste ran the value as code\npaste:\n%s\noutput:\n%s", rb.Slug, b.ID, hi, text, out)
				}
				recs := records(t, log)
				// A pod block, and a node block whose nodes come from a
				// label (not from the hostile value), reach the remote bash.
				if b.Target == runbook.TargetPod || b.Target == runbook.TargetNode && b.Nodes == "" {
					if !slices.ContainsFunc(recs, func(r record) bool { return r.Cmd == "remote-env" || r.Cmd == "bash" }) {
						t.Errorf("%s/%s value %d: the script never reached a shell in the pod or on the node\npaste:\n%s\noutput:\n%s", rb.Slug, b.ID, hi, text, out)
					}
				}
				for _, r := range recs {
					check := r.Cmd == "remote-env"
					if r.Cmd == "bash" && len(r.Argv) > 0 && r.Argv[len(r.Argv)-1] != "-s" {
						check = true
						body := r.Argv[len(r.Argv)-1]
						if !strings.HasSuffix(strings.TrimRight(body, "\n"), strings.TrimRight(b.Content, "\n")) {
							t.Errorf("%s/%s: the body reached bash changed:\n%q\nwant\n%q", rb.Slug, b.ID, body, b.Content)
						}
					}
					if r.Cmd == "kubectl" && r.Stdin != "" && !slices.Contains(r.Argv, "exec") {
						// One JSON object per document, as the exported script
						// sends them.
						dec := json.NewDecoder(strings.NewReader(r.Stdin))
						held := false
						for {
							var doc any
							if err := dec.Decode(&doc); err == io.EOF {
								break
							} else if err != nil {
								t.Errorf("%s/%s value %d: kubectl got a body that is not JSON: %v\n%s", rb.Slug, b.ID, hi, err, r.Stdin)
								break
							}
							held = held || jsonHolds(doc, v)
						}
						if !held && strings.Contains(b.Content, "${") {
							t.Errorf("%s/%s value %d: no scalar of the body is the value %q\n%s", rb.Slug, b.ID, hi, v, r.Stdin)
						}
					}
					if !check {
						continue
					}
					for name := range values {
						if !contains(b.Refs, name) || isHostParam(rb, name) {
							continue
						}
						if r.Env[name] != v {
							t.Errorf("%s/%s value %d: %s reached %s as %q, want %q\npaste:\n%s\noutput:\n%s", rb.Slug, b.ID, hi, name, r.Cmd, r.Env[name], v, text, out)
						}
					}
				}
			}
		}
	}
	t.Logf("%d pastes", n)
}

// jsonHolds reports whether some string in doc is v or holds it whole.
func jsonHolds(doc any, v string) bool {
	switch d := doc.(type) {
	case string:
		return strings.Contains(d, v)
	case map[string]any:
		for _, x := range d {
			if jsonHolds(x, v) {
				return true
			}
		}
	case []any:
		for _, x := range d {
			if jsonHolds(x, v) {
				return true
			}
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestUnknownValueNamed: a capture whose block has not run, and a secret,
// are named with where they come from, and the pasted command stops whole
// (in an interactive shell too: one subshell, not line by line); a kube
// body that needs one is not copied at all, only comments saying why.
func TestUnknownValueNamed(t *testing.T) {
	rb := loadAll(t)[len(loadAll(t))-1]
	realBash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	paste1 := func(text string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, realBash, "--noprofile", "--norc", "-i")
		c.Stdin = strings.NewReader(text + "\necho AFTER-PASTE\nexit\n")
		c.Env = append(os.Environ(), "PS1=", "PS2=")
		out, _ := c.CombinedOutput()
		return string(out)
	}
	use := paste.Build(rb, rb.BlockByID("use-token")).Fill(map[string]string{"MSG": "hi"})
	out := paste1(use)
	if strings.Contains(out, "msg=[hi]") || !strings.Contains(out, `TOKEN is not known yet: it is captured by block "local-echo" (step 1); run that first`) || !strings.Contains(out, "AFTER-PASTE") {
		t.Errorf("paste with TOKEN unknown:\n%s\noutput:\n%s", use, out)
	}
	// Set in the reader's shell, it is used.
	if out := paste1("TOKEN=from-shell\n" + use); !strings.Contains(out, "token=[from-shell] msg=[hi]") {
		t.Errorf("TOKEN set in the shell:\n%s", out)
	}
	apply := paste.Build(rb, rb.BlockByID("kube-apply")).Fill(map[string]string{"NS": "a", "MSG": "hi"})
	for _, l := range strings.Split(strings.TrimSpace(apply), "\n") {
		if !strings.HasPrefix(l, "#") {
			t.Errorf("a manifest with an unknown value copies a command:\n%s", apply)
			break
		}
	}
	if !strings.Contains(apply, `TOKEN is not known yet: it is captured by block "local-echo" (step 1)`) {
		t.Errorf("the comment does not name the capture:\n%s", apply)
	}
	// A secret is never filled in, even when the form has it.
	rb2, err := runbook.Parse("s.md", []byte("---\ntitle: s\nparams:\n  - name: PW\n    secret: true\n---\n\n## S {#s}\n\n```bash {#b target=local}\necho \"pw=$PW\"\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	sec := paste.Build(rb2, rb2.BlockByID("b")).Fill(map[string]string{"PW": "hunter2-secret"})
	if strings.Contains(sec, "hunter2") || !strings.Contains(sec, "PW is secret") {
		t.Errorf("secret copy:\n%s", sec)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestPasteGolden: every bundled block's copy with its runbook's default
// values, as a reader gets it (testdata/SLUG.golden; -update rewrites).
func TestPasteGolden(t *testing.T) {
	set, err := runbook.LoadDir("../../content")
	if err != nil {
		t.Fatal(err)
	}
	for _, rb := range set.Runbooks {
		vals := map[string]string{}
		for _, p := range rb.Params {
			if p.Default != "" {
				vals[p.Name] = p.Default
			}
		}
		var b strings.Builder
		for _, blk := range rb.Blocks {
			if tm := paste.Build(rb, blk); tm != nil {
				b.WriteString(tm.Fill(vals) + "\n")
			}
		}
		golden := filepath.Join("testdata", rb.Slug+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test ./runbook/paste -update)", err)
		}
		if string(want) != b.String() {
			t.Errorf("%s differs (go test ./runbook/paste -update to accept)", golden)
		}
	}
}
