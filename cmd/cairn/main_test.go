package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	code = m.Exit(m.Run(context.Background(), args))
	return code, out.String(), errb.String()
}

func TestCLI(t *testing.T) {
	bad := filepath.Join("..", "..", "runbook", "testdata", "bad.md")
	good := filepath.Join("..", "..", "runbook", "testdata", "good.md")
	out := filepath.Join(t.TempDir(), "public")
	warn := filepath.Join("..", "..", "runbook", "testdata", "warn-no-frontmatter.md")
	// A content folder of Markdown written for other tools.
	foreign := t.TempDir()
	for name, src := range map[string]string{
		"readme.md": "# A README\n\n## Build\n\n```sh\nmake\n```\n",
		"runme.md":  "---\ntitle: Runme notebook\nrunme:\n  id: 01HF\n---\n\n## Step\n",
		"empty.md":  "---\ntitle: Nothing yet\n---\n", // still gets its page
	} {
		if err := os.WriteFile(filepath.Join(foreign, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	foreignOut := filepath.Join(t.TempDir(), "public")
	cfgDir := t.TempDir()
	goodCfg, badCfg := filepath.Join(cfgDir, "good.yaml"), filepath.Join(cfgDir, "bad.yaml")
	_ = os.WriteFile(goodCfg, []byte("title: Team runbooks\nraw_html: omit\n"), 0o644)
	_ = os.WriteFile(badCfg, []byte("title: x\nunsafe: true\n"), 0o644)
	cfgOut := filepath.Join(t.TempDir(), "public")
	inPlace := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(inPlace, []byte("# Notes\n\n## Run it\n\n```sh\necho hi\n```\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{"no args", nil, exitUsage, "Commands:", "no command given"},
		{"help", []string{"--help"}, exitOK, "Commands:", ""},
		{"unknown", []string{"bulid"}, exitUsage, "", `unknown command "bulid"`},
		{"check help", []string{"check", "--help"}, exitOK, "Examples:", ""},
		{"help check", []string{"help", "check"}, exitOK, "cairn check [DIR|FILE...]", ""},
		{"check good", []string{"check", good}, exitOK, "", "0 problems"},
		{"check bad", []string{"check", bad}, exitFailure, "bad.md:18:13: target \"lcoal\" is unknown", "problems"},
		{"check missing", []string{"check", "nope"}, exitUsage, "", "nope: no such file or folder"},
		{"check bundled", []string{"check", "../../content"}, exitOK, "", "checked 4 runbooks"},
		{"bad flag", []string{"build", "--nope"}, exitUsage, "", "Try: cairn build --help"},
		{"build", []string{"build", "--content", "../../content", "--out", out}, exitOK, "", "built 4 runbooks"},
		{"build bad content", []string{"build", "--content", "../../runbook/testdata", "--out", out}, exitFailure, "", "build failed"},
		{"build into sources", []string{"build", "--content", "../../content", "--out", "../../content"}, exitUsage, "", "would replace the sources"},
		{"check warning", []string{"check", warn}, exitOK, "warn-no-frontmatter.md:1: warning: no front matter", "0 problems, 1 warning"},
		{"check strict", []string{"check", "--strict", warn}, exitFailure, "warning: no front matter", "1 warning"},
		{"build foreign", []string{"build", "--content", foreign, "--out", foreignOut}, exitOK, "", "built 3 runbooks"},
		{"build foreign strict", []string{"build", "--strict", "--content", foreign, "--out", foreignOut}, exitFailure, "", "build failed: 2 problems (warnings count: --strict)"},
		{"import help", []string{"import", "--help"}, exitOK, "cairn import --target local --write", ""},
		{"import print", []string{"import", warn}, exitOK, "---\ntitle: \"Deploy the app\"\n---\n", "imported"},
		{"import several", []string{"import", warn, good}, exitUsage, "", "choose --write"},
		{"import bad target", []string{"import", "--target", "ssh", warn}, exitUsage, "", "use local or kube"},
		{"import errors", []string{"import", bad}, exitFailure, "", "not imported: fix the problems above first"},
		{"import write", []string{"import", "--target", "local", "--write", inPlace}, exitOK, "", "1 step, 1 executable block"},
		{"build config", []string{"build", "--config", goodCfg, "--content", foreign, "--out", cfgOut}, exitOK, "", "built 3 runbooks"},
		{"build bad config", []string{"build", "--config", badCfg, "--content", foreign, "--out", cfgOut}, exitUsage, "", "bad.yaml: line 2: field unsafe not found"},
		{"check bad config", []string{"check", "--config", badCfg, warn}, exitUsage, "", "field unsafe not found"},
		{"version", []string{"version"}, exitOK, "cairn ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("cairn %s: exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stdout, stderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(foreignOut, "readme", "index.html")); err != nil || !strings.Contains(string(b), `<h1 class="rb-title">A README</h1>`) {
		t.Errorf("the README's page: %v", err)
	}
	if _, err := os.Stat(filepath.Join(foreignOut, "empty", "index.html")); err != nil {
		t.Errorf("the empty runbook has no page: %v", err)
	}
	if b, err := os.ReadFile(inPlace); err != nil || !strings.Contains(string(b), "```sh {#run-it-1 target=local}") {
		t.Errorf("import --write left:\n%s (%v)", b, err)
	} else if fi, _ := os.Stat(inPlace); fi.Mode().Perm() != 0o600 {
		t.Errorf("import --write changed the mode to %v", fi.Mode().Perm())
	}
	if b, err := os.ReadFile(filepath.Join(cfgOut, "index.html")); err != nil || !strings.Contains(string(b), "Team runbooks") {
		t.Errorf("the site title from --config is not on the index (%v)", err)
	}
	// The failed build left the good one in place.
	if _, err := os.Stat(filepath.Join(out, "kubeadm-ha", "index.html")); err != nil {
		t.Errorf("a failed build damaged the previous output: %v", err)
	}
	// Pages stream into a sibling folder: nothing of it is left.
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("the builds left %v beside %s", entries, out)
	}
}
