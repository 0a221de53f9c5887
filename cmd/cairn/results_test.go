package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

const siteRunbook = `---
title: Site run
---

# Site run

## 1. Check {#check}

` + "```bash {#uname target=local expect.contains='Linux'}\nuname -s\necho checked-at-the-site\n```" + `

` + "```bash {#later target=local}\necho later\n```\n"

// TestResultsRoundTrip is the air-gapped round trip without a cluster: a
// bundle is exported and unpacked; its script runs with bash alone (no
// cairn on PATH) and signs its results with an SSH key (OpenSSH's
// ssh-keygen); cairn journal import checks the signature, the block hashes
// and the bundle; a tampered file, a wrong signer, another bundle and a
// changed block are refused with nothing lost; Chromium shows the imported
// run on the page with who ran it and that the signature checked.
func TestResultsRoundTrip(t *testing.T) {
	for _, tool := range []string{"ssh-keygen", "tar", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	tmp := t.TempDir()
	content := contentDir(t, map[string]string{"site.md": siteRunbook})
	journal := filepath.Join(tmp, "journal.db")
	bundle := filepath.Join(tmp, "bundle.tar.gz")
	if code, _, stderr := run(t, "export", "--bundle", bundle, "--content", content); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	site := filepath.Join(tmp, "site")
	os.MkdirAll(site, 0o755)
	if out, err := exec.Command("tar", "-xzf", bundle, "-C", site).CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v %s", err, out)
	}
	root := filepath.Join(site, "cairn-bundle")

	key, allowed := testrig.Signer(t, tmp, "ops@site")

	// At the site: bash, coreutils, ssh-keygen; no cairn.
	bin := testrig.ToolPath(t, filepath.Join(tmp, "bin"), "bash", "env", "awk", "sed", "grep", "tail", "tr", "cat", "date", "mktemp",
		"rm", "mv", "sha256sum", "dirname", "id", "hostname", "uname", "timeout", "tee", "base64", "ssh-keygen", "sleep")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := filepath.Join(root, "scripts", "site.sh")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "bash"), script, "--yes", "--sign", key)
	cmd.Env = []string{"PATH=" + bin, "HOME=" + tmp, "LC_ALL=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the script at the site: %v\n%s", err, out)
	}
	res := filepath.Join(root, "scripts", "site.results.jsonl")
	if _, err := os.Stat(res + ".sig"); err != nil {
		t.Fatalf("not signed: %v\n%s", err, out)
	}

	// Something in the journal already: it must survive every refusal.
	if code, _, stderr := run(t, "run", filepath.Join(content, "site.md"), "--step", "check", "--yes", "--journal", journal, "--sandbox", "no"); code != 0 {
		t.Fatalf("cairn run: %s", stderr)
	}
	before := journalLines(t, journal)

	data, _ := os.ReadFile(res)
	tampered := filepath.Join(tmp, "tampered.jsonl")
	os.WriteFile(tampered, []byte(strings.Replace(string(data), "checked-at-the-site", "checked-at-the-SITE", 1)), 0o644)
	sig, _ := os.ReadFile(res + ".sig")
	os.WriteFile(tampered+".sig", sig, 0o644)

	_, otherAllowed := testrig.Signer(t, tmp, "m@x")

	otherContent := contentDir(t, map[string]string{"site.md": strings.Replace(siteRunbook, "echo checked-at-the-site", "echo changed", 1)})
	otherBundle := filepath.Join(tmp, "other.tar.gz")
	if code, _, stderr := run(t, "export", "--bundle", otherBundle, "--content", otherContent); code != 0 {
		t.Fatalf("bundle: %s", stderr)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"tampered", []string{tampered, "--allowed-signers", allowed}, "the signature does not match the file"},
		{"wrong signer", []string{res, "--allowed-signers", otherAllowed}, "signed by a key that"},
		{"unsigned but signers asked", []string{res, "--allowed-signers", allowed, "--signature", filepath.Join(tmp, "nope.sig")}, "--signature"},
		{"another bundle", []string{res, "--allowed-signers", allowed, "--bundle", otherBundle}, "results for another bundle"},
		{"block changed", []string{res, "--allowed-signers", allowed, "--content", otherContent}, `site: block "uname" (`},
	} {
		args := append([]string{"journal", "import", "--journal", journal, "--content", content}, c.args...)
		code, _, stderr := run(t, args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want an error with %q:\n%s", c.name, code, c.want, stderr)
		}
		if got := journalLines(t, journal); got != before {
			t.Fatalf("%s: the journal changed after a refused import", c.name)
		}
	}

	code, _, stderr := run(t, "journal", "import", res, "--journal", journal, "--content", content, "--allowed-signers", allowed, "--bundle", bundle)
	if code != 0 || !strings.Contains(stderr, "imported 2 of 2 results") || !strings.Contains(stderr, "signature checked: ops@site") {
		t.Fatalf("import: exit %d\n%s", code, stderr)
	}
	after := journalLines(t, journal)
	if !strings.HasPrefix(after, before) || strings.Count(after, `"signature":"checked"`) != 2 {
		t.Fatalf("journal after import:\n%s", after)
	}
	if code, _, stderr := run(t, "journal", "import", res, "--journal", journal, "--content", content, "--allowed-signers", allowed); code != 0 || !strings.Contains(stderr, "imported 0 of 2 results") {
		t.Errorf("second import: %s", stderr)
	}

	if testing.Short() {
		return
	}
	bctx := testrig.Browser(t)
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--journal", journal)
	pg := testrig.NewPage(t, bctx, 60*time.Second, serr, `(document.querySelector("#block-uname .cb-result")||{}).textContent`)
	pg.Run("open the page", chromedp.Navigate(base+"site/#cairn-token="+token))
	pg.Poll("the site run shows", `(document.querySelector("#block-uname .prov-site")||{}).textContent`, 20*time.Second)
	head := pg.Eval(`document.querySelector("#block-uname .cb-result-head").textContent`)
	for _, want := range []string{"verified", "run at the site", "by ", "signature checked: ops@site"} {
		if !strings.Contains(head, want) {
			t.Errorf("result head %q lacks %q", head, want)
		}
	}
	if got := pg.Eval(`document.querySelector("#block-uname .cb-result pre").textContent`); !strings.Contains(got, "checked-at-the-site") {
		t.Errorf("output %q", got)
	}
	if got := pg.Eval(`document.querySelector("#block-uname .site-sig").className`); !strings.Contains(got, "site-sig-checked") {
		t.Errorf("signature class %q", got)
	}
	if tip := pg.Eval(`document.querySelector("#block-uname .prov-site").title`); !strings.Contains(tip, "bundle MANIFEST sha256") || !strings.Contains(tip, "site.results.jsonl") {
		t.Errorf("tooltip %q", tip)
	}
}

func journalLines(t *testing.T, path string) string {
	t.Helper()
	j, err := executor.OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	var b strings.Builder
	if _, err := j.Export(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
