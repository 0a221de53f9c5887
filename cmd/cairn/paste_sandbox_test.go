package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/paste"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestPastedBlocksDoWhatTheyDo (review, Medium): the hostile runbook's
// copies (runbook/paste/testdata/hostile.md), filled with a value that
// holds quotes, $(), backticks, a newline and a here-document terminator,
// are pasted into real bash against the sandbox (its kube-apiserver, its
// sshd hosts over the real ssh and the sandbox's ssh_config): each does
// what its block does with the value whole, and nothing extra runs.
func TestPastedBlocksDoWhatTheyDo(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox")
	}
	k, s := testrig.Full(t)
	src, err := os.ReadFile("../../runbook/paste/testdata/hostile.md")
	if err != nil {
		t.Fatal(err)
	}
	rb, err := runbook.Parse("hostile.md", src)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	mark := filepath.Join(work, "MARK")
	v := "it's \"$(touch " + mark + ")\" `touch " + mark + "`\nEOF\nCAIRN_EOF\n; touch " + mark
	dir := "/tmp/cairn-paste-" + filepath.Base(work) + "/it's \"$(touch " + mark + ")\""
	values := map[string]string{"NS": k.Namespace, "APP": "web", "MSG": v, "HOSTS": "cp1", "SRC": "cp0", "DIR": dir}

	bash := func(text string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-s")
		c.Dir = work
		c.Stdin = strings.NewReader(text)
		c.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig, "CAIRN_SSH_CONFIG="+s.Inventory.SSHConfig)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Errorf("paste failed: %v\n%s\noutput:\n%s", err, text, out)
		}
		return string(out)
	}
	// The file the copy block sends, on cp0.
	bash("ssh -F " + runbook.ShellQuote(s.Inventory.SSHConfig) + " -o BatchMode=yes cp0 \"mkdir -p -- $(printf %q " + runbook.ShellQuote(dir) + ") && printf copied-bytes > $(printf %q " + runbook.ShellQuote(dir+"/a.txt") + ")\"\n")

	outs := map[string]string{}
	for _, b := range rb.Blocks {
		tm := paste.Build(rb, b)
		// Pods and nodes need kubelets, which this sandbox has not: their
		// copies are pasted on sandbox nodes (cmd/cairn/nodetest, page).
		if tm == nil || b.Target == runbook.TargetPod || b.Target == runbook.TargetNode {
			continue
		}
		out := bash(tm.Fill(values))
		outs[b.ID] = out
		for _, c := range b.Captures {
			if c.Regexp != nil {
				if m := c.Regexp.FindStringSubmatch(out); m != nil {
					values[c.Name] = m[1]
				}
			}
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a pasted command ran the value as code")
	}
	for id, want := range map[string]string{
		"local-echo":   "msg=[" + v + "]\ntoken=abc\n",
		"use-token":    "token=[abc] msg=[" + v + "]\n",
		"heredoc-body": "literal $MSG `not run` $(not run)\nCAIRN_EOF\n" + v + "\n",
		"kube-shell":   "namespace/" + k.Namespace + "\n",
		"ssh-echo":     "msg=[" + v + "] on cp1\n",
	} {
		if !strings.HasSuffix(outs[id], want) {
			t.Errorf("%s printed\n%q\nwant it to end\n%q", id, outs[id], want)
		}
	}
	var cm struct{ Data map[string]string }
	if err := json.Unmarshal([]byte(k.Kubectl(t, "", "get", "configmap", "note", "-n", k.Namespace, "-o", "json")), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["msg"] != v || cm.Data["line"] != "say "+v+" twice" || cm.Data["token"] != "abc" {
		t.Errorf("the applied ConfigMap holds %q", cm.Data)
	}
	got := bash("ssh -F " + runbook.ShellQuote(s.Inventory.SSHConfig) + " -o BatchMode=yes cp1 \"cat -- $(printf %q " + runbook.ShellQuote(dir+"/b.txt") + ")\"\n")
	if got != "copied-bytes" {
		t.Errorf("the copy reached cp1 as %q (copy printed %q)", got, outs["ssh-copy"])
	}

	// The practice runbook, block after block, by paste alone (captures
	// taken from the pasted commands' output, as a reader would), with a
	// hostile greeting. Not its CRD deletion: the cluster is shared.
	set, err := runbook.LoadDir("../../content")
	if err != nil {
		t.Fatal(err)
	}
	pr := set.BySlug("practice")
	ns := "paste-" + strings.ToLower(filepath.Base(work))
	ns = ns[:min(len(ns), 40)]
	pv := map[string]string{"NAMESPACE": ns, "NODES": "cp0 cp1", "SOURCE_NODE": "cp0", "GREETING": v}
	pouts := map[string]string{}
	for _, b := range pr.Blocks {
		tm := paste.Build(pr, b)
		if tm == nil || b.ID == "delete-crd" {
			continue
		}
		out := bash(tm.Fill(pv))
		pouts[b.ID] = out
		for _, c := range b.Captures {
			if m := c.Regexp.FindStringSubmatch(out); c.Regexp != nil && m != nil {
				pv[c.Name] = m[1]
			}
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a pasted practice command ran the greeting as code")
	}
	stamp := pv["STAMP"]
	if len(stamp) != 12 {
		t.Fatalf("no stamp captured from the pasted make-stamp: %q", pouts["make-stamp"])
	}
	for id, want := range map[string][]string{
		"make-stamp":     {"stamp=" + stamp, v},
		"apply-objects":  {"namespace/" + ns + " serverside-applied"},
		"wait-sa":        {"serviceaccount/default condition met"},
		"get-role":       {"leases"},
		"check-stamp":    {"stamp ok: " + stamp},
		"ssh-hostname":   {"host=cp0", "host=cp1"},
		"ssh-make-file":  {"stamp " + stamp + " from cp0"},
		"ssh-check-copy": {"stamp " + stamp + " from cp0"},
		"pod-running":    {"Pending"},
		"ssh-cleanup":    {"removed"},
	} {
		for _, w := range want {
			if !strings.Contains(pouts[id], w) {
				t.Errorf("practice %s printed %q, want %q", id, pouts[id], w)
			}
		}
	}
}
