package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

const keepRunbook = `---
title: Keep
params:
  - name: HOSTS
    type: hosts
    default: cp0
---

# Keep

## 1. Hosts {#hosts}

` + "```bash {#host target=ssh hosts=HOSTS}\necho on-$(hostname)\n```\n"

// TestServerKeepsItsSandbox (review, Medium): a running server silently
// adopted another sandbox, and a paired page's Run buttons then pointed at
// another cluster with no sign. Now the server keeps to the sandbox it
// used; another one appearing in its state folder is shown on the page
// (real Chromium), SSH blocks stay off, and only the reader's "use it"
// switches. Real sshd hosts, a real serve.
func TestServerKeepsItsSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("browser and sandbox")
	}
	bctx := testrig.Browser(t)
	tmp := t.TempDir()
	sbDir := filepath.Join(tmp, "sb")
	t.Setenv(sandbox.EnvStateDir, sbDir)
	t.Setenv("KUBECONFIG", "")
	upArgs := []string{"up", "--state-dir", sbDir, "--no-kube", "--network=loopback", "--control-planes=1", "--workers=0", "--quiet"}
	sandboxCLI(t, upArgs...)
	t.Cleanup(func() { sandboxCLI(t, "down", "--state-dir", sbDir) })
	first, err := sandbox.StatusOf(context.Background(), sbDir)
	if err != nil {
		t.Fatal(err)
	}

	dir := contentDir(t, map[string]string{"keep.md": keepRunbook})
	base, token, stderr := startServe(t, "--content", dir, "--sandbox", "auto", "--kubeconfig", "", "--journal", filepath.Join(tmp, "j.db"))
	pg := testrig.NewPage(t, bctx, 90*time.Second, stderr, `(document.getElementById("cairn-exec-status") || {}).textContent`)
	pg.Run("open the page", chromedp.Navigate(base+"keep/#cairn-token="+token))
	pg.Poll("the executor pairs", `(((document.getElementById("cairn-exec-status") || {}).textContent || "").indexOf("SSH cp0") >= 0)`, 20*time.Second)
	pg.Run("run on the first sandbox", chromedp.Click(chromedp.CSS(`#block-host .cb-run`)))
	pg.Poll("verified on the first sandbox", `!!document.querySelector("#block-host.cb-verified")`, 30*time.Second)

	// Another sandbox takes the folder: down, then up again (new keys, new
	// processes, a new start time).
	sandboxCLI(t, "down", "--state-dir", sbDir)
	sandboxCLI(t, upArgs...)
	second, err := sandbox.StatusOf(context.Background(), sbDir)
	if err != nil || second.ID() == first.ID() {
		t.Fatalf("second sandbox: %v, id %s (first %s)", err, second.ID(), first.ID())
	}
	pg.Poll("the page shows the other sandbox", `!!document.querySelector("#cairn-sandbox-offer .sandbox-accept")`, 20*time.Second)
	pill := pg.Eval(`document.getElementById("cairn-exec-status").textContent`)
	if strings.Contains(pill, "SSH cp0") {
		t.Errorf("the pill still offers the hosts: %q", pill)
	}

	// Until accepted, SSH blocks are refused with the reason.
	api := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, strings.TrimSuffix(base, "/")+"/api"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	hash := pg.Eval(`document.getElementById("block-host").getAttribute("data-hash")`)
	code, body := api("POST", "/runs", `{"runbook":"keep","block":"host","hash":"`+hash+`"}`)
	if code != 503 || !strings.Contains(body, "accept it on the page") {
		t.Errorf("ssh block before accepting: %d %s", code, body)
	}
	if code, body := api("POST", "/sandbox/accept", `{"id":"`+first.ID()+`"}`); code != 409 {
		t.Errorf("accepting a sandbox that is not offered: %d %s", code, body)
	}
	if code, body := api("POST", "/sandbox/accept", `{"id":"x","more":1}`); code != 400 {
		t.Errorf("a bad accept body: %d %s", code, body)
	}

	pg.Run("use the new sandbox", chromedp.Click(chromedp.CSS(`#cairn-sandbox-offer .sandbox-accept`)))
	pg.Poll("the offer is gone and the hosts are back", `!document.getElementById("cairn-sandbox-offer") && (((document.getElementById("cairn-exec-status") || {}).textContent || "").indexOf("SSH cp0") >= 0)`, 20*time.Second)
	if code, body := api("POST", "/runs", `{"runbook":"keep","block":"host","hash":"`+hash+`"}`); code != 202 {
		t.Errorf("ssh block after accepting: %d %s", code, body)
	}
	if !strings.Contains(stderr.String(), "the reader accepted the sandbox") {
		t.Errorf("the terminal was not told:\n%s", stderr.String())
	}
}
