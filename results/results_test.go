package results_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/results"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

const src = "---\ntitle: T\n---\n\n## S {#s}\n\n```bash {#a target=local}\necho a\n```\n\n```bash {#b target=local}\necho b\n```\n"

func set(t testing.TB, source string) *runbook.Set {
	t.Helper()
	rb, err := runbook.Parse("content/t.md", []byte(source))
	if err != nil {
		t.Fatal(err)
	}
	return &runbook.Set{Runbooks: []*runbook.Runbook{rb}}
}

func rec(t testing.TB, s *runbook.Set, block string, edit func(map[string]any)) string {
	rb := s.Runbooks[0]
	m := map[string]any{
		"id": "site-r1-" + block, "runbook": rb.Slug, "path": rb.Path, "block": block, "step": "s",
		"hash": rb.BlockByID(block).Hash, "target": "local", "status": "verified", "reasons": []string{},
		"hosts": []any{map[string]any{"host": "", "exit": 0, "duration": 0}}, "start": "2026-12-06T10:00:00.5Z",
		"duration": 0.02, "output": block + "\n", "attempts": 1,
		"site": map[string]any{"run": "r1", "by": "ops@site", "script": strings.Repeat("5", 64), "bundle": strings.Repeat("b", 64), "source": rb.Hash, "version": "dev"},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func TestRead(t *testing.T) {
	s := set(t, src)
	good := rec(t, s, "a", nil) + rec(t, s, "b", func(m map[string]any) { m["status"] = "skipped"; m["hosts"] = []any{} })
	f, err := results.Read("r.jsonl", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Records) != 1 || len(f.Skipped) != 1 || f.Records[0].Site.By != "ops@site" {
		t.Fatalf("read %+v", f)
	}
	if !results.IsResults([]byte(good)) || results.IsResults([]byte(`{"id":"x","runbook":"t"}`+"\n")) {
		t.Error("IsResults")
	}
	cases := []struct{ name, data, want string }{
		{"empty", "", "no records"},
		{"not json", "hello\n", "r.jsonl:1: not a result record"},
		{"journal export", `{"id":"x","runbook":"t","block":"a","hash":"h","status":"verified","start":"2026-01-01T00:00:00Z"}` + "\n", "r.jsonl:1: no \"site\""},
		{"unknown field", rec(t, s, "a", func(m map[string]any) { m["script_text"] = "rm -rf /" }), "unknown field"},
		{"bad status", rec(t, s, "a", func(m map[string]any) { m["status"] = "great" }), `unknown status "great"`},
		{"no hash", rec(t, s, "a", func(m map[string]any) { m["hash"] = "" }), "hash are required"},
		{"no start", rec(t, s, "a", func(m map[string]any) { delete(m, "start") }), "no start time"},
		{"duplicate id", rec(t, s, "a", nil) + rec(t, s, "a", nil), "r.jsonl:2: id \"site-r1-a\" again (first at line 1)"},
		{"cut short", rec(t, s, "a", nil) + rec(t, s, "b", nil)[:40], "r.jsonl:2: the last line is cut short"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := results.Read("r.jsonl", []byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	// A results file cannot claim what only the import says.
	claim := rec(t, s, "a", func(m map[string]any) {
		m["site"].(map[string]any)["signature"] = "checked"
		m["site"].(map[string]any)["signer"] = "ceo@example"
		m["write_back"] = "written"
		m["captures"] = map[string]string{"JOIN_TOKEN": "from-the-file"}
	})
	f, err = results.Read("r.jsonl", []byte(claim))
	if err != nil {
		t.Fatal(err)
	}
	if si := f.Records[0].Site; si.Signature != "" || si.Signer != "" || f.Records[0].WriteBack != "" || f.Records[0].Captures != nil {
		t.Errorf("claims kept: %+v", si)
	}
}

func TestCheckContent(t *testing.T) {
	s := set(t, src)
	data := rec(t, s, "a", nil) + rec(t, s, "b", nil)
	f, err := results.Read("r.jsonl", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := results.CheckContent(f, s); err != nil {
		t.Fatal(err)
	}
	// Block b's text changed, block a is gone: both are named, with where.
	changed := set(t, strings.Replace(strings.Replace(src, "echo b", "echo B", 1), "{#a target=local}", "{#a2 target=local}", 1))
	err = results.CheckContent(f, changed)
	for _, want := range []string{"results for 2 blocks", `t: block "a" (content/t.md: no such block now)`, `t: block "b" (content/t.md:11)`, "nothing imported"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
	if err := results.CheckContent(f, &runbook.Set{}); err == nil || !strings.Contains(err.Error(), "no runbook t in the content") {
		t.Errorf("no runbook: %v", err)
	}
}

func TestCheckBundle(t *testing.T) {
	s := set(t, src)
	dir := t.TempDir()
	script := strings.Repeat("5", 64)
	manifest := script + "  scripts/t.sh\n" + strings.Repeat("9", 64) + "  site/index.html\n"
	os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte(manifest), 0o644)
	b, err := results.ReadBundle(dir)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(edit func(map[string]any)) *results.File {
		f, err := results.Read("r.jsonl", []byte(rec(t, s, "a", func(m map[string]any) {
			m["site"].(map[string]any)["bundle"] = b.Manifest
			if edit != nil {
				edit(m)
			}
		})))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if err := results.CheckBundle(mk(nil), b); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"other bundle", func(m map[string]any) { m["site"].(map[string]any)["bundle"] = strings.Repeat("c", 64) }, "from bundle cccccccccccc…, not this one"},
		{"no bundle", func(m map[string]any) { m["site"].(map[string]any)["bundle"] = "" }, "outside any bundle"},
		{"edited script", func(m map[string]any) { m["site"].(map[string]any)["script"] = strings.Repeat("6", 64) }, "edited at the site?"},
	} {
		err := results.CheckBundle(mk(c.edit), b)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "results for another bundle") {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := results.ReadBundle(filepath.Join(dir, "nope.tar.gz")); err == nil {
		t.Error("a missing bundle reads")
	}
}

// TestVerify signs with OpenSSH's real ssh-keygen and checks with it.
func TestVerify(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("no ssh-keygen")
	}
	dir := t.TempDir()
	ops, allowed := testrig.Signer(t, dir, "ops@site")
	mallory, _ := testrig.Signer(t, dir, "m")
	data := []byte(rec(t, set(t, src), "a", nil))
	sign := func(key, ns string, data []byte) []byte {
		cmd := exec.Command("ssh-keygen", "-q", "-Y", "sign", "-f", key, "-n", ns)
		cmd.Stdin = strings.NewReader(string(data))
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	good := sign(ops, results.Namespace, data)
	s, err := results.Verify(ctx, "r.jsonl", data, good, allowed)
	if err != nil || s.State != executor.SignatureChecked || s.Signer != "ops@site" {
		t.Fatalf("good signature: %+v %v", s, err)
	}
	for _, c := range []struct {
		name      string
		data, sig []byte
		allowed   string
		want      string
	}{
		{"tampered", append([]byte(nil), strings.Replace(string(data), `"verified"`, `"failed"`, 1)...), good, allowed, "the signature does not match the file"},
		{"wrong signer", data, sign(mallory, results.Namespace, data), allowed, "signed by a key that"},
		{"other namespace", data, sign(ops, "git", data), allowed, "signed for another purpose"},
		{"unsigned", data, nil, allowed, "not signed"},
		{"garbage signature", data, []byte("-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"), allowed, "does not list"},
	} {
		_, err := results.Verify(ctx, "r.jsonl", c.data, c.sig, c.allowed)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	if s, err := results.Verify(ctx, "r.jsonl", data, good, ""); err != nil || s.State != executor.SignatureUnchecked {
		t.Errorf("no allowed signers: %+v %v", s, err)
	}
	if s, err := results.Verify(ctx, "r.jsonl", data, nil, ""); err != nil || s.State != executor.SignatureNone {
		t.Errorf("unsigned, nothing asked: %+v %v", s, err)
	}
}

func FuzzRead(f *testing.F) {
	s := set(f, src)
	f.Add([]byte(rec(f, s, "a", nil)))
	f.Add([]byte(rec(f, s, "a", nil) + rec(f, s, "b", nil)[:30]))
	f.Add([]byte("{}\n\n{\"site\":{}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := results.Read("f", data)
		if err != nil {
			return
		}
		for _, r := range file.Records {
			if r.Site == nil || r.ID == "" || r.Status == executor.StatusSkipped || r.Site.Signature != "" {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}
