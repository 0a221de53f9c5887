package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// termPage has a manual step a reader does by hand, and a secret value.
const termPage = "---\ntitle: 터미널 시험\nslug: termtest\nlang: ko\nparams:\n  - name: NODE\n    type: host\n    default: cp0\n  - name: TOKEN\n    secret: true\n    required: false\n---\n" +
	"## 손으로 {#by-hand}\n\n" +
	"```text {#edit-file target=manual}\n설정 파일을 직접 고칩니다\n```\n"

// TestPageTerminal: in real Chromium against cairn serve --terminal, a
// manual step's Terminal button asks where (this machine, or the hosts the
// runbook names) and opens a real shell in the page (xterm.js, vendored):
// what is typed runs, a Korean word comes back whole; after a reload the
// page attaches to the same shell, with what it showed; "I did this step"
// ends it, and the step shows as done by hand, with the transcript, in
// which the secret value typed there is masked (also in the journal).
func TestPageTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	bctx := testrig.Browser(t)
	content := contentDir(t, map[string]string{"termtest.md": termPage})
	work := t.TempDir()
	journal := filepath.Join(t.TempDir(), "journal.db")
	t.Setenv("SHELL", "/bin/bash")
	t.Setenv("HOME", work) // the login shell's own start-up files: none
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--journal", journal, "--terminal")
	pg := testrig.NewPage(t, bctx, 90*time.Second, serr,
		`(window.Cairn && Cairn.terminal ? Cairn.terminal.box.textContent.slice(0, 200) + " | " + screenText() : "no terminal") + " | " + Array.from(document.querySelectorAll(".cb-result")).map(e => e.textContent.slice(0, 300)).join(" || ")`)
	screen := `(function(){var b=Cairn.terminal.term.buffer.active, out=[]; for (var i=0;i<b.length;i++){out.push(b.getLine(i).translateToString(true))} return out.join("\n")})()`
	pg.Run("open the page", chromedp.Navigate(base+"termtest/#cairn-token="+token))
	pg.Eval(`(window.screenText = function(){ try { return ` + screen + ` } catch (e) { return "" } }, "")`)
	pg.Poll("the Terminal button", `document.querySelector("#block-edit-file .cb-term")`, 20*time.Second)
	if got := pg.Eval(`document.querySelector("#block-edit-file .cb-term").textContent`); got != "터미널" {
		t.Errorf("the button says %q", got)
	}
	if got := pg.Eval(`(document.querySelector("#cairn-term-open")||{}).textContent`); got != "터미널" {
		t.Errorf("no Terminal button beside the executor's status: %q", got)
	}
	pg.Eval(`(Cairn.setParam("TOKEN", "tok-5e6f7a8b9c0d"), "")`) // as the reader types it into the form
	pg.Run("open a terminal", chromedp.Click(chromedp.CSS(`#block-edit-file .cb-term`)))
	pg.Poll("where to open it", `document.querySelector("dialog.term-ask[open] select.term-host")`, 10*time.Second)
	if got := pg.Eval(`Array.from(document.querySelectorAll("dialog.term-ask option")).map(o => o.value + "=" + o.textContent).join(",")`); got != "=이 컴퓨터,cp0=cp0" {
		t.Errorf("the hosts offered: %q", got)
	}
	pg.Run("on this machine", chromedp.Click(chromedp.CSS(`dialog.term-ask .confirm-yes`)))
	pg.Poll("the terminal", `window.Cairn.terminal && document.querySelector(".term-panel .xterm-helper-textarea")`, 20*time.Second)
	pg.Eval(`(window.screenText = function(){ try { return ` + screen + ` } catch (e) { return "" } }, "")`)
	typeLine := func(what, line string) {
		t.Helper()
		// Text arrives as an input method commits it (CDP insertText: what
		// a Korean IME does at the end of a syllable), Enter as a key.
		pg.Run(what, chromedp.Focus(chromedp.CSS(`.term-panel .xterm-helper-textarea`)), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: line})
			return err
		}), chromedp.KeyEvent(kb.Enter))
	}
	pg.Poll("a prompt", `screenText().trim().length > 0`, 20*time.Second)
	typeLine("type a command", `cd `+work+` && echo "sum-$((40+2))" && echo 안녕 > greeting && cat greeting`)
	pg.Poll("its answer", `/sum-42/.test(screenText()) && /\n안녕/.test(screenText())`, 20*time.Second)
	typeLine("type the secret", "echo tok-5e6f7a8b9c0d")

	// A reload: the tab attaches to the same shell and sees what it showed.
	pg.Run("reload", chromedp.Reload())
	pg.Eval(`(window.screenText = function(){ try { return ` + screen + ` } catch (e) { return "" } }, "")`)
	pg.Poll("the terminal again", `window.Cairn && Cairn.terminal && /sum-42/.test(screenText())`, 30*time.Second)
	typeLine("the same shell", `cat greeting && echo "again-$((1+1))"`)
	pg.Poll("its answer", `/again-2/.test(screenText())`, 20*time.Second)
	if b, err := os.ReadFile(filepath.Join(work, "greeting")); err != nil || strings.TrimSpace(string(b)) != "안녕" {
		t.Errorf("the file the shell wrote: %q %v", b, err)
	}

	pg.Run("mark the step done", chromedp.Click(chromedp.CSS(`.term-panel .term-done`)))
	pg.Poll("done by hand", `document.querySelector("#block-edit-file .cb-result .status-by-hand")`, 20*time.Second)
	result := pg.Eval(`document.querySelector("#block-edit-file .cb-result").textContent`)
	for _, want := range []string{"직접 함(터미널)", "sum-42", "작업자 ", "••••"} {
		if !strings.Contains(result, want) {
			t.Errorf("the step's result lacks %q:\n%s", want, result)
		}
	}
	if strings.Contains(result, "tok-5e6f7a8b9c0d") {
		t.Errorf("the secret is in the shown transcript:\n%s", result)
	}
	if got := pg.Eval(`document.querySelector(".term-panel .term-status").textContent`); !strings.Contains(got, "셸이 끝났어요") {
		t.Errorf("the panel says %q", got)
	}

	// The journal has it, masked, from the API a script would read.
	req, _ := http.NewRequest("GET", base+"api/runbooks/termtest/results", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Last map[string]struct {
			Status, Target, Output, By string
		} `json:"last"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	rec := res.Last["edit-file"]
	if rec.Status != "by-hand" || rec.Target != "terminal" || rec.By == "" || !strings.Contains(rec.Output, "sum-42") || strings.Contains(rec.Output, "tok-5e6f7a8b9c0d") {
		t.Errorf("the journal's record: %+v", rec)
	}
}

// TestPageSession: in real Chromium against cairn serve, two blocks of one
// session run from the page: the second starts where the first left the
// shell (its cd and export), and each result says where the session is.
func TestPageSession(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	work := t.TempDir()
	page := "---\ntitle: 세션 시험\nslug: sesstest\nlang: ko\nsession: build\n---\n## 하나 {#one}\n\n" +
		"```bash {#enter target=local}\ncd " + work + "\nexport STAGE=\"$((6*7))-built\"\n```\n\n" +
		"```bash {#use target=local expect.contains=\"42-built in\"}\necho \"$STAGE in $PWD\"\n```\n"
	content := contentDir(t, map[string]string{"sesstest.md": page})
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--journal", filepath.Join(t.TempDir(), "journal.db"))
	pg := testrig.NewPage(t, testrig.Browser(t), 60*time.Second, serr,
		`Array.from(document.querySelectorAll(".cb-result")).map(e => e.closest(".cb").id + ": " + e.textContent.slice(0, 300)).join(" || ")`)
	pg.Run("open the page", chromedp.Navigate(base+"sesstest/#cairn-token="+token))
	for _, id := range []string{"enter", "use"} {
		pg.Poll("Run on "+id, `document.querySelector("#block-`+id+` .cb-run:not(:disabled)")`, 20*time.Second)
		pg.Run("run "+id, chromedp.Click(chromedp.CSS(`#block-`+id+` .cb-run`)))
		pg.Poll(id+" verified", `document.querySelector("#block-`+id+`.cb-verified")`, 20*time.Second)
	}
	if got := pg.Eval(`document.querySelector("#block-use .cb-result pre").textContent`); !strings.Contains(got, "42-built in "+work) {
		t.Errorf("the second block did not start where the first left the shell: %q", got)
	}
	if got := pg.Eval(`Array.from(document.querySelectorAll("#block-enter .cb-session code")).map(c => c.textContent).join(" ")`); got != work+" STAGE=42-built" {
		t.Errorf("the session shown after the first block: %q", got)
	}
}
