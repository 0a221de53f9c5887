package main

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// TestPageFollowSurvivesDroppedConnection: the page follows a running
// block over a stream; when the connection drops (the kernel destroys the
// browser's sockets to cairn serve, as a sleeping laptop or a restarted
// proxy would), the page opens the stream again and shows the run to its
// end, not "Failed to fetch". A verified block written back into the
// Markdown re-renders its page without reloading the open one, which would
// cut such streams (CI stop 25).
func TestPageFollowSurvivesDroppedConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	ss, err := exec.LookPath("ss")
	if err != nil || os.Geteuid() != 0 {
		if testrig.InCI() {
			t.Fatalf("ss (iproute2) and root are needed to drop connections: %v", err)
		}
		t.Skip("needs ss and root")
	}
	bctx := testrig.Browser(t)
	tmp := t.TempDir()
	gate := filepath.Join(tmp, "gate")
	dir := contentDir(t, map[string]string{"drop.md": `---
title: Drop
write_back: true
---

# Drop

## 1. Quick {#quick}

` + "```bash {#quick-one target=local}\necho quick\n```" + `

## 2. Wait {#wait}

` + "```bash {#gate target=local timeout=2m}\necho waiting\nwhile [ ! -e " + gate + " ]; do sleep 0.1; done\necho released\n```\n"})
	base, token, stderr := startServe(t, "--content", dir, "--sandbox", "no", "--journal", filepath.Join(tmp, "j.db"))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	pg := testrig.NewPage(t, bctx, 90*time.Second, stderr, `Array.from(document.querySelectorAll(".cb-result")).map(e => e.closest(".cb").id + ": " + e.textContent.slice(0, 300)).join(" || ")`)
	pg.Run("open the page", chromedp.Navigate(base+"drop/#cairn-token="+token))
	// Connected; no cluster, but the page's blocks are local: the pill
	// says nothing of kube blocks.
	pg.Poll("the page is paired", `document.querySelector("#cairn-exec-status.exec-on") && !document.querySelector(".cb-run[aria-disabled=true]")`, 20*time.Second)
	pg.Eval(`(window.__notReloaded = "yes")`)

	// A verified block is written back; the page re-renders, the open one
	// stays as it is.
	pg.Run("click quick-one", chromedp.Click(chromedp.CSS(`#block-quick-one .cb-run`)))
	pg.Poll("quick-one verified", `document.querySelector("#block-quick-one.cb-verified")`, 20*time.Second)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "wrote verified output of quick-one"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			pg.Fail("write-back", errors.New("serve did not write quick-one back"))
		}
	}
	src, _ := os.ReadFile(filepath.Join(dir, "drop.md"))
	if !strings.Contains(string(src), "{output=quick-one ") {
		t.Errorf("no written-back output in the Markdown:\n%s", src)
	}

	if got := pg.Eval(`String(window.__notReloaded)`); got != "yes" {
		t.Errorf("the page was reloaded after a write-back\n%s", stderr.String())
	}

	// The stream of a running block breaks; the page follows it again.
	pg.Run("click gate", chromedp.Click(chromedp.CSS(`#block-gate .cb-run`)))
	// The output in the result box (the block's own listing says "echo
	// waiting" too): the stream is open and delivering.
	pg.Poll("gate's output streams in", `(document.querySelector("#block-gate.cb-running .cb-result pre") || {}).textContent === "waiting\n"`, 20*time.Second)
	// The server's ends: the kernel resets each, and the browser gets
	// ECONNRESET on its stream as from a dropped network.
	kill := exec.Command(ss, "-K", "src", u.Hostname(), "sport", "=", ":"+u.Port())
	killed, err := kill.CombinedOutput()
	if err != nil {
		pg.Fail("ss -K: "+string(killed), err)
	}
	t.Logf("ss -K:\n%s", killed)
	pg.Poll("the page reconnects", `document.querySelector("#block-gate .cb-result[data-reconnects]")`, 15*time.Second)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pg.Poll("gate verified", `document.querySelector("#block-gate.cb-verified")`, 30*time.Second)
	out := pg.Eval(`document.querySelector("#block-gate .cb-result pre").textContent`)
	if !strings.Contains(out, "waiting") || !strings.Contains(out, "released") {
		t.Errorf("output after the reconnect: %q", out)
	}
	if e := pg.Eval(`Array.from(document.querySelectorAll(".cb-error")).map(e => e.textContent).join(" | ")`); e != "" {
		t.Errorf("the page shows an error: %s", e)
	}
	if got := pg.Eval(`String(window.__notReloaded)`); got != "yes" {
		t.Errorf("the page was reloaded when its connections dropped\n%s", stderr.String())
	}
}
