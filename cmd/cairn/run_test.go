package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/cairn-dev/cairn/runbook"
)

const runMD = `---
title: run test
slug: runtest
params:
  - name: WHO
    default: world
  - name: MODE
    type: enum
    values: [a, b]
    default: a
---
## one {#one}

` + "```bash {#hello target=local expect.contains=\"hello world\" capture.GREETING='(hello \\S+)'}\necho \"hello $WHO\"\n```" + `

## two {#two}

` + "```bash {#only-b target=local when='MODE == \"b\"'}\necho b\n```\n\n```bash {#use target=local expect.contains=\"got hello\"}\necho \"got $GREETING\"\n```" + `

## three {#three}

` + "```bash {#danger target=local confirm=true}\necho boom\n```\n\n```bash {#fails target=local expect.contains=never}\necho nope\n```" + `
`

func TestRunCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runtest.md")
	if err := os.WriteFile(path, []byte(runMD), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", path, "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.jsonl")}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	// Before any run, nothing is kept: from two, block use would stop for
	// want of $GREETING; refused before anything runs, saying where to start.
	code, out, errOut := run(t, args("--from", "two", "--yes")...)
	if code != exitUsage || strings.Contains(out, "[1/") ||
		!strings.Contains(errOut, `cannot start at step "two": block "use" (`+path+`:24) needs $GREETING, which no block before it in this run captures; start at a step that captures it: --from one; or give it: --capture GREETING=VALUE`) {
		t.Fatalf("from two before any run: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, errOut := run(t, args("--from", "two", "--yes", "--capture", "GREETING=hello world")...); code != exitFailure || !strings.Contains(out, "got hello world") {
		t.Fatalf("from two with --capture: exit %d\n%s\n%s", code, out, errOut)
	}

	code, out, errOut = run(t, args("--yes")...)
	if code != exitFailure || !strings.Contains(out, "✓ verified") || !strings.Contains(out, "skipped: MODE == \"b\" is false") ||
		!strings.Contains(out, "boom") || !strings.Contains(out, `output does not contain "never"`) ||
		!strings.Contains(errOut, "resume with: cairn run "+path+" --from three") {
		t.Fatalf("full run: exit %d\n%s\n%s", code, out, errOut)
	}
	// --from resumes with the captured value taken from the journal.
	code, out, errOut = run(t, args("--from", "two")...)
	if code != exitFailure || !strings.Contains(out, "got hello world") || !strings.Contains(errOut, "needs confirmation") {
		t.Fatalf("from two without --yes: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = run(t, args("--step", "one", "--param", "WHO=moon")...)
	if code != exitFailure || !strings.Contains(out, `output does not contain "hello world"`) {
		t.Fatalf("step one with WHO=moon: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		extra []string
		code  int
		want  string
	}{
		{[]string{"--step", "nope"}, exitUsage, `no step "nope" (steps: one, two, three)`},
		{[]string{"--param", "MODE=c"}, exitFailure, "parameter MODE: must be one of a, b"},
		{[]string{"--param", "NOPE=1"}, exitFailure, "unknown parameter NOPE; parameters: WHO, MODE"},
		{[]string{"--param", "WH0=1"}, exitFailure, "unknown parameter WH0 (did you mean WHO?); parameters: WHO, MODE"},
		{[]string{"--param", "WHO"}, exitUsage, "use NAME=VALUE"},
		{[]string{"--step", "one", "--from", "two"}, exitUsage, "only one of"},
		{[]string{"--block", "use"}, exitOK, "got hello world"},
		{[]string{"--dry-run", "--param", "WHO=moon"}, exitOK, "dry run of " + path + ": 4 of 5 blocks would run; nothing runs now\n\n== one (one)\n[1/5] hello  this machine\n    # with WHO=moon\n    echo \"hello $WHO\"\n\n== two (two)\n[2/5] only-b  skipped: MODE == \"b\" is false\n"},
		{[]string{"--dry-run", "--step", "three"}, exitOK, "[1/2] danger  this machine\n  asks first: this step changes the target\n"},
	} {
		code, out, errOut := run(t, args(tc.extra...)...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("%v: exit %d (want %d)\n%s%s", tc.extra, code, tc.code, out, errOut)
		}
	}
}

func TestDaemonFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"daemon", "--listen", "0.0.0.0:7788"}, "not a loopback address"},
		{[]string{"daemon", "--allow-origin", "evil"}, "give scheme://host[:port]"},
		{[]string{"daemon", "--listen", "nonsense"}, "--listen"},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d\n%s", tc.args, code, errOut)
		}
	}
}

// TestRunWriteBack: --write-back records verified output in the Markdown,
// in place on the next run, and the file still parses.
func TestRunWriteBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "wb.md")
	src := "---\ntitle: wb\n---\n## one {#one}\n\n```bash {#hello target=local}\necho \"hello $((1+1))\"\n```\n\nafter\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", path, "--write-back", "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.jsonl")}
	for i := 0; i < 2; i++ {
		if code, out, errOut := run(t, args...); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	data, _ := os.ReadFile(path)
	got := string(data)
	if strings.Count(got, "{output=hello status=verified") != 1 || !strings.Contains(got, "hello 2\n```") || !strings.HasSuffix(got, "\nafter\n") {
		t.Fatalf("after two runs:\n%s", got)
	}
	if code, _, errOut := run(t, "check", path); code != exitOK {
		t.Fatalf("the written file does not check: %s", errOut)
	}
}

// TestJournalCommand: cairn journal export gives every run as JSON lines,
// check passes, import reads an export back without doubling it, and an
// older Cairn's journal.jsonl next to a new default journal is taken in.
func TestJournalCommand(t *testing.T) {
	dir := t.TempDir()
	src := "---\ntitle: j\n---\n## one {#one}\n\n```bash {#hello target=local}\necho hello\n```\n"
	os.WriteFile(filepath.Join(dir, "j.md"), []byte(src), 0o644)
	os.MkdirAll(filepath.Join(dir, ".cairn"), 0o700)
	legacy := `{"id":"old1","runbook":"j","block":"hello","hash":"h","status":"verified","output":"from the old journal"}` + "\n"
	os.WriteFile(filepath.Join(dir, ".cairn", "journal.jsonl"), []byte(legacy), 0o600)
	for i := 0; i < 2; i++ {
		if code, out, errOut := run(t, "run", filepath.Join(dir, "j.md"), "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none")); code != exitOK {
			t.Fatalf("run: %d %s %s", code, out, errOut)
		}
	}
	db := filepath.Join(dir, ".cairn", "journal.db")
	code, out, errOut := run(t, "journal", "export", "--journal", db)
	if code != exitOK || strings.Count(out, "\n") != 3 || !strings.Contains(out, "from the old journal") || !strings.Contains(errOut, "exported 3 runs") {
		t.Fatalf("export: %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, ".cairn", "journal.jsonl.imported")); err != nil {
		t.Errorf("the old journal was not set aside: %v", err)
	}
	exp := filepath.Join(dir, "export.jsonl")
	os.WriteFile(exp, []byte(out), 0o600)
	if code, _, errOut := run(t, "journal", "import", exp, "--journal", db); code != exitOK || !strings.Contains(errOut, "imported 0 runs") {
		t.Errorf("import of an export: %d %s", code, errOut)
	}
	if code, out, _ := run(t, "journal", "check", "--journal", db); code != exitOK || !strings.Contains(out, ": ok") {
		t.Errorf("check: %d %s", code, out)
	}
	if code, _, errOut := run(t, "journal", "frobnicate", "--journal", db); code != exitUsage || !strings.Contains(errOut, "export, import FILE or check") {
		t.Errorf("bad use: %d %s", code, errOut)
	}
}

// TestVersionFlag: cairn --version is the version, as kubectl and hugo do.
func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		if code, out, errOut := run(t, arg); code != exitOK || !strings.HasPrefix(out, "cairn ") {
			t.Errorf("%s: %d %q %q", arg, code, out, errOut)
		}
	}
}

// TestCheckUnclosedFenceAndWording: an unclosed fence is a problem (it used
// to swallow the rest of the file with "0 problems"), and counts read as
// sentences.
func TestCheckUnclosedFenceAndWording(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "u.md")
	os.WriteFile(path, []byte("---\ntitle: u\n---\n## one {#one}\n\n```bash {#a target=local}\necho a\n\n## two {#two}\n\ntext\n"), 0o644)
	code, out, errOut := run(t, "check", path)
	if code != exitFailure || !strings.Contains(out, "u.md:6:1: this code fence is never closed") || !strings.Contains(errOut, "checked 1 runbook, 1 step, 1 executable block: 1 problem, 0 warnings\n") {
		t.Errorf("unclosed fence: %d\n%s%s", code, out, errOut)
	}
}

// TestRunSaysWhatWillHappen: a confirmation shows where and what before the
// reader answers, and manual steps show the values (quoted when they are
// not plain, secrets masked).
func TestRunSaysWhatWillHappen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.md")
	src := "---\ntitle: c\nparams:\n  - name: NS\n    default: \"a b; rm -rf x\"\n  - name: PW\n    secret: true\n    required: false\n---\n## one {#one}\n\n" +
		"```text {#by-hand target=manual}\nrun kubectl delete ns ${NS} with $PW\n```\n\n" +
		"```bash {#paste target=manual}\nfor h in $(echo \"$NS\"); do kubectl delete ns $NS; done\n```\n\n" +
		"```bash {#danger target=local confirm=\"deletes things\"}\necho \"$NS\"\n```\n"
	os.WriteFile(path, []byte(src), 0o644)
	var out, errb strings.Builder
	m := &Main{Stdin: strings.NewReader("\n\nn\n"), Stdout: &out, Stderr: &errb}
	m.Exit(m.Run(context.Background(), []string{"run", path, "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.db"), "--param", "PW=s3cret-pw"}))
	got := out.String()
	// A manual shell step is shown ready to paste: each value quoted for
	// where it stands (inside double quotes escaped, elsewhere a quoted
	// word), never as "'...'".
	for _, want := range []string{"run kubectl delete ns 'a b; rm -rf x' with ••••",
		`for h in $(echo "a b; rm -rf x"); do kubectl delete ns 'a b; rm -rf x'; done`, "deletes things\n  where: this machine\n  what:\n    # danger: on this machine\n    (\n    NS='a b; rm -rf x'\n", "\n    echo \"$NS\"\n", "Run it? [y/N]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3cret-pw") {
		t.Error("the secret was shown")
	}
}

// TestHelpExamplesNameRealSteps: every `--step X` and `--from X` in a
// command's --help examples names a step of the bundled runbook it runs.
func TestHelpExamplesNameRealSteps(t *testing.T) {
	set, err := runbook.LoadDir(filepath.Join("..", "..", "content"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`cairn (?:run|export) (\S+)[^\n]*?--(?:step|from) (\S+)`)
	n := 0
	for _, ex := range []string{runExamples, exportExamples, daemonExamples, serveExamples, buildExamples, checkExamples, journalExamples} {
		for _, m := range re.FindAllStringSubmatch(ex, -1) {
			slug := strings.TrimSuffix(filepath.Base(m[1]), ".md")
			rb := set.BySlug(slug)
			if rb == nil {
				t.Errorf("example %q: no bundled runbook %q", m[0], slug)
				continue
			}
			if rb.StepByID(m[2]) == nil {
				t.Errorf("example %q: %s has no step %q", m[0], slug, m[2])
			}
			n++
		}
	}
	if n == 0 {
		t.Error("no examples with --step or --from found")
	}
}

// TestDocsExamplesCheck: every complete runbook shown in
// docs/runbook-format.md (a ````markdown block with front matter) passes
// cairn check, the first one a reader copies above all.
func TestDocsExamplesCheck(t *testing.T) {
	src, err := os.ReadFile("../../docs/runbook-format.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(src), "````markdown\n")
	if len(parts) < 2 {
		t.Fatal("docs/runbook-format.md has no ````markdown example")
	}
	for i, p := range parts[1:] {
		body, _, ok := strings.Cut(p, "\n````")
		if !ok || !strings.HasPrefix(body, "---\n") {
			continue
		}
		path := filepath.Join(t.TempDir(), fmt.Sprintf("example%d.md", i+1))
		os.WriteFile(path, []byte(body+"\n"), 0o644)
		if code, out, errOut := run(t, "check", path); code != exitOK {
			t.Errorf("example %d of docs/runbook-format.md fails check:\n%s%s", i+1, out, errOut)
		}
	}
}

// TestTermSinkEndsOpenLines: output without a final newline (curl's "ok")
// is ended before the block's outcome is printed, on every host's line.
func TestTermSinkEndsOpenLines(t *testing.T) {
	var b bytes.Buffer
	s := &termSink{w: &b, multi: true}
	s.Output("cp0", []byte("ok"))
	s.Output("cp1", []byte("done\n"))
	s.Output("cp0", []byte("still"))
	s.endLines()
	s.endLines() // nothing more to end
	if got, want := b.String(), "  │ cp0: ok\n  │ cp1: done\n  │ cp0: still\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// One target (this machine): its host name is empty.
	b.Reset()
	one := &termSink{w: &b}
	one.Output("", []byte("ok"))
	one.endLines()
	if got, want := b.String(), "  │ ok\n"; got != want {
		t.Errorf("one target: got %q, want %q", got, want)
	}
}

// TestRunAsksFirstAtATerminal: at a terminal, cairn run shows the plan
// (each block, where, what is skipped and why) and asks once before
// anything runs; no answer but y starts nothing.
func TestRunAsksFirstAtATerminal(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "runtest.md")
	if err := os.WriteFile(path, []byte(runMD), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"n", "y"} {
		t.Run(answer, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "run", path, "--step", "two", "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"),
				"--journal", filepath.Join(dir, "j-"+answer+".jsonl"), "--capture", "GREETING=hello world")
			cmd.Env = append(os.Environ(), "CAIRN_TEST_MAIN=1")
			tty, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer tty.Close()
			out := &syncBuffer{}
			go io.Copy(out, tty)
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(out.String(), "[y/N]") {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no question:\n%s", out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if strings.Contains(out.String(), "got hello") {
				t.Fatalf("a block ran before the answer:\n%s", out.String())
			}
			tty.Write([]byte(answer + "\r"))
			err = cmd.Wait()
			time.Sleep(100 * time.Millisecond) // the rest of the output
			got := out.String()
			for _, want := range []string{"plan of " + path + ": 1 of 2 blocks run", `[1/2] only-b  skipped: MODE == "b" is false`, "[2/2] use  this machine"} {
				if !strings.Contains(got, want) {
					t.Errorf("the plan lacks %q:\n%s", want, got)
				}
			}
			switch answer {
			case "n":
				if err == nil || !strings.Contains(got, "not started") || strings.Contains(got, "got hello") {
					t.Errorf("answered n: %v\n%s", err, got)
				}
			case "y":
				if err != nil || !strings.Contains(got, "got hello world") {
					t.Errorf("answered y: %v\n%s", err, got)
				}
			}
		})
	}
}

// TestRunMutesKnownLines: cairn run dims the lines a block's mute= calls
// known and harmless at a terminal, and says how many there were and why.
func TestRunMutesKnownLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.md")
	md := "---\ntitle: m\n---\n## one {#one}\n\n```bash {#b target=local mute='^W: ' mute.why=\"the tool always says so\"}\necho 'W: deprecated'; echo ok; printf 'W: no newline'\n```\n"
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", path, "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.jsonl"), "--yes"}
	code, out, errOut := run(t, args...)
	if code != 0 || !strings.Contains(out, "  │ W: deprecated\n  │ ok\n  │ W: no newline\n  ✓ verified") || !strings.Contains(out, "2 lines known and harmless (the tool always says so)") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "CAIRN_TEST_MAIN=1")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	buf := &syncBuffer{}
	go io.Copy(buf, tty)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	time.Sleep(100 * time.Millisecond)
	if got := buf.String(); !strings.Contains(got, "\x1b[2mW: deprecated\x1b[0m") || strings.Contains(got, "\x1b[2mok") {
		t.Errorf("at a terminal:\n%q", got)
	}
}

// TestRunSession: cairn run keeps a session's directory and exported
// variables from block to block and says where the session is after each.
func TestRunSession(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.md")
	md := "---\ntitle: s\nsession: work\n---\n## one {#one}\n\n```bash {#there target=local}\ncd " + dir + "\nexport STAGE=built\n```\n\n" +
		"```bash {#here target=local expect.contains=\"built in\"}\necho \"$STAGE in $PWD\"\n```\n"
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "run", path, "--yes", "--sandbox", "no", "--kubeconfig", filepath.Join(dir, "none"), "--journal", filepath.Join(dir, "j.db"))
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"session work: in " + dir + ` with STAGE="built"`, "built in " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("the run lacks %q:\n%s", want, out)
		}
	}
}
