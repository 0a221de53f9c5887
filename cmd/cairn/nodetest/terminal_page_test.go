package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// pageHands is a reader who does a runbook's manual steps in the page's
// terminal: cairn serve --terminal with the runbook, the reader's
// kubeconfig and SSH settings, in Chromium.
type pageHands struct {
	t           testing.TB
	pg          *testrig.Page
	base, token string
	slug        string
}

// newPageHands serves runbook (a bundled one) with terminals on, opens its
// page and fills in params as the reader would.
func newPageHands(t *testing.T, dir, runbook, kubeconfig string, inv *sandbox.Inventory, params map[string]string) *pageHands {
	t.Helper()
	out, base, token := serveRunbook(t, dir, "terminal-content", bundledtest.Path(runbook), []string{"SHELL=/bin/bash"}, "--terminal",
		"--kubeconfig", kubeconfig, "--ssh-config", inv.SSHConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile,
		"--journal", filepath.Join(dir, "terminal-journal.db"))
	// The reader's hands work while cairn run waits at a manual step, on
	// the goroutine that answers it: a failure there must become that
	// step's error, not end the goroutine (try).
	h := &pageHands{t: panicky{t}, slug: strings.TrimSuffix(runbook, ".md"), base: base, token: token}
	h.pg = testrig.NewPage(h.t, testrig.Browser(t), 10*time.Minute, out,
		`"loaded " + Math.round(performance.now()) + "ms ago (" + ((performance.getEntriesByType("navigation")[0]||{}).type||"?") + "), dialogs " + document.querySelectorAll("dialog[open]").length + ", terminal.js " + (typeof CairnTerminal) + " | " + (window.Cairn && Cairn.terminal ? Cairn.terminal.box.textContent.slice(0, 300) + " | " + screenText().slice(-1500) : "no terminal")`)
	h.pg.Run("open the page", chromedp.Navigate(h.base+h.slug+"/#cairn-token="+h.token))
	h.defineScreen()
	h.pg.Poll("the executor is on", `document.querySelector("#cairn-exec-status.exec-on")`, 30*time.Second)
	for k, v := range params {
		js, _ := json.Marshal([]string{k, v})
		h.pg.Eval(`(function(kv){ Cairn.setParam(kv[0], kv[1]); return "" })(` + string(js) + `)`)
	}
	return h
}

// pageFailure is a failed page action, on its way to try.
type pageFailure struct{ msg string }

func (p pageFailure) Error() string { return p.msg }

// panicky is t whose fatal failures panic with a pageFailure.
type panicky struct{ *testing.T }

func (p panicky) Fatalf(f string, a ...any) { panic(pageFailure{fmt.Sprintf(f, a...)}) }
func (p panicky) Fatal(a ...any)            { panic(pageFailure{fmt.Sprint(a...)}) }
func (p panicky) FailNow()                  { panic(pageFailure{"failed"}) }

// try runs f and returns its page failure as an error.
func (h *pageHands) try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			pf, ok := r.(pageFailure)
			if !ok {
				panic(r)
			}
			err = pf
		}
	}()
	f()
	return nil
}

func (h *pageHands) defineScreen() {
	h.pg.Eval(`(window.screenText = function(){ try { var b=Cairn.terminal.term.buffer.active, out=[]; for (var i=0;i<b.length;i++){out.push(b.getLine(i).translateToString(true))} return out.join("\n") } catch (e) { return "" } }, "")`)
}

// open opens a terminal on host from block's Terminal button.
func (h *pageHands) open(block, host string) {
	h.t.Helper()
	sel := `#block-` + block + ` .cb-term`
	h.pg.Eval(`(window.Cairn.terminal = null, "")`)
	// The button is pressed from the page's script: a mouse click on its
	// place can land on what covers it (the sticky header of a page
	// scrolled to it). A page that reloaded meanwhile gets it pressed
	// again.
	for try := 1; ; try++ {
		h.pg.Poll("the Terminal button of "+block, `document.querySelector("`+sel+`")`, 30*time.Second)
		h.pg.Eval(`(document.querySelector("` + sel + `").click(), "")`)
		shown := false
		for deadline := time.Now().Add(10 * time.Second); !shown && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			shown = h.pg.Eval(`document.querySelector("dialog.term-ask[open] select.term-host") ? "yes" : "no"`) == "yes"
		}
		if shown || try == 3 {
			break
		}
	}
	h.defineScreen() // again: a reloaded page has lost it
	h.pg.Poll("where to open it", `document.querySelector("dialog.term-ask[open] select.term-host")`, 10*time.Second)
	js, _ := json.Marshal(host)
	if got := h.pg.Eval(`(function(h){ var s=document.querySelector("dialog.term-ask select.term-host"); s.value=h; return s.value })(` + string(js) + `)`); got != host {
		h.t.Fatalf("the dialog does not offer %s", host)
	}
	h.pg.Eval(`(document.querySelector("dialog.term-ask .confirm-yes").click(), "")`)
	h.pg.Poll("the terminal on "+host, `window.Cairn.terminal && document.querySelector(".term-panel:not(.term-ended) .xterm-helper-textarea")`, 60*time.Second)
	// The login shell's prompt (root's ends in #), so that what is typed
	// next goes to it.
	h.pg.Poll("a prompt", `/[#$] *$/m.test(screenText())`, 60*time.Second)
}

// typeLine types line into the open terminal, as an input method commits
// text, and Enter.
func (h *pageHands) typeLine(what, line string) {
	h.t.Helper()
	h.pg.Run(what, chromedp.Focus(chromedp.CSS(`.term-panel:not(.term-ended) .xterm-helper-textarea`)), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: line})
		return err
	}), chromedp.KeyEvent(kb.Enter))
}

// waitScreen waits until the open terminal shows want (a regular
// expression, in JavaScript).
func (h *pageHands) waitScreen(what, re string, d time.Duration) {
	h.t.Helper()
	h.pg.Poll(what, `/`+re+`/.test(screenText())`, d)
}

// finish clicks the open terminal's done (the step was done there) or
// close button and waits until it has ended.
func (h *pageHands) finish(done bool) {
	h.t.Helper()
	btn := ".term-close"
	if done {
		btn = ".term-done"
	}
	h.pg.Eval(`(document.querySelector(".term-panel:not(.term-ended) ` + btn + `").click(), "")`)
	h.pg.Poll("the terminal ended", `!document.querySelector(".term-panel:not(.term-ended)")`, 30*time.Second)
}

// record is the journal's last record of block, as GET results has it.
func (h *pageHands) record(block string) map[string]any {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.base+"api/runbooks/"+h.slug+"/results", nil)
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var res struct {
		Last map[string]map[string]any `json:"last"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		h.t.Fatal(err)
	}
	return res.Last[block]
}

// kcmMigrationEdit is the CCM runbook's manual manifest edit as a reader
// types it on a node: the two flags after the command, the configuration
// file's mount and hostPath volume, written over the manifest in place
// (the kubelet restarts the pod), the file kept as it was beside it.
const kcmMigrationEdit = `M=/etc/kubernetes/manifests/kube-controller-manager.yaml; cp $M /root/kcm.yaml.orig && ` +
	`sed -e 's#^\( *\)- kube-controller-manager$#&\n\1- --enable-leader-migration\n\1- --leader-migration-config=` + migrationFile + `#' ` +
	`-e 's#^\( *\)volumeMounts:$#&\n\1- mountPath: ` + migrationFile + `\n\1  name: leadermigration\n\1  readOnly: true#' ` +
	`-e 's#^\( *\)volumes:$#&\n\1- hostPath:\n\1    path: ` + migrationFile + `\n\1    type: File\n\1  name: leadermigration#' ` +
	`/root/kcm.yaml.orig > /root/kcm.yaml && cp /root/kcm.yaml $M && echo "edited-$(grep -c -e leader-migration -e leadermigration $M)"`
