package nodetest

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

var pairingRE = regexp.MustCompile(`pair this browser by opening (http://127\.0\.0\.1:\d+/)#cairn-token=([0-9a-f]+)`)

// joinTimedOut finds a join block that failed waiting on the cluster.
var joinTimedOut = regexp.MustCompile(`(?s)join-\S+ .*(waiting for TLS bootstrap|context deadline exceeded|timed out waiting)`)

// maxPageClicks is what #32 allows for the kubeadm walk from the page.
const maxPageClicks = 6

// runKubeadmViaPage is the reader's walk of the kubeadm runbook in the
// page, in real Chromium against `cairn serve --sandbox yes` on the
// sandbox's nodes: the values the reader types (the host names, the
// topology, the certificate method), one click on "Fill in from the
// sandbox" for the rest, "Run from here" on the first step, the manual
// steps ticked as done (the sandbox made the load balancer), one
// confirmation for the whole plan. It returns the blocks the page shows
// verified, and fails when the plan stops or takes more than
// maxPageClicks clicks.
func runKubeadmViaPage(ctx context.Context, t *testing.T, sbDir, dir string, typed map[string]string) map[string]bool {
	t.Helper()
	out := &testrig.Buffer{}
	srvCtx, stop := context.WithCancel(ctx)
	cmd, err := startCairn(srvCtx, []string{sandbox.EnvStateDir + "=" + sbDir}, nil, out, out, "serve", "--port", "0",
		"--content", filepath.Dir(bundledtest.Path("kubeadm-ha.md")), "--sandbox", "yes",
		"--kubeconfig", filepath.Join(dir, "no-kubeconfig"), "--journal", filepath.Join(dir, "page-journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); _ = cmd.Wait() })
	var base, token string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if m := pairingRE.FindStringSubmatch(out.String()); m != nil {
			base, token = m[1], m[2]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cairn serve printed no pairing URL:\n%s", out.String())
		}
	}
	pg := testrig.NewPage(t, testrig.Browser(t), 25*time.Minute, out,
		`(document.querySelector(".plan-bar")||{}).textContent + " || " + Array.from(document.querySelectorAll(".cb-failed")).map(b => b.id + ": " + b.querySelector(".cb-result").textContent.slice(-1500)).join(" || ")`)
	clicks := 0
	click := func(what, sel string) {
		t.Helper()
		pg.Run(what, chromedp.Click(chromedp.CSS(sel)))
		clicks++
	}
	pg.Run("open the kubeadm runbook", chromedp.Navigate(base+"kubeadm-ha/#cairn-token="+token))
	pg.Poll("the sandbox's values are offered", `(function(){ var b = document.querySelector("form.params .params-sandbox"); return b && !b.hidden && !b.disabled; })()`, 2*time.Minute)
	for k, v := range typed {
		pg.Eval(`(window.Cairn.setParam(` + strconv.Quote(k) + `, ` + strconv.Quote(v) + `), "")`)
	}
	click("fill in from the sandbox", "form.params .params-sandbox")
	pg.Poll("the step buttons", `document.querySelector("section.step .step-run-from:not(:disabled)")`, time.Minute)
	click("run from here, on the first step", "section.step .step-run-from")
	pg.Poll("the plan's confirmation", `document.querySelector("dialog.confirm-plan[open] .plan-item")`, time.Minute)
	for _, id := range strings.Fields(pg.Eval(`Array.from(document.querySelectorAll("dialog.confirm-plan li.plan-manual")).map(li => li.getAttribute("data-block")).join(" ")`)) {
		click("tick "+id+" done", `dialog.confirm-plan li.plan-manual[data-block="`+id+`"] input`)
	}
	t.Logf("the page's plan: %s", pg.Eval(`document.querySelector(".plan-sum").textContent`))
	start := time.Now()
	click("confirm the plan", "dialog.confirm-plan .confirm-yes")
	pg.Poll("the plan ends", `document.querySelector(".plan-bar.plan-verified, .plan-bar.plan-failed, .plan-bar.plan-error, .plan-bar.plan-manual, .plan-bar.plan-cancelled")`, 20*time.Minute)
	bar := pg.Eval(`document.querySelector(".plan-bar").className + ": " + document.querySelector(".plan-bar").textContent`)
	t.Logf("phase %-28s %6.1fs; %s", "the page's plan", time.Since(start).Seconds(), bar)
	// A join that timed out waiting for the cluster (the kubelet's TLS
	// bootstrap, on a CI machine at load 30) is what a reader meets on a
	// slow cluster too, and the page's answer is its "run again from this
	// step" button: the join blocks skip nodes that joined and reset one
	// that stopped half-way. The walk presses it once, and says so; a
	// second failure fails the test. Not counted as the walk's clicks.
	if failed := pg.Eval(`Array.from(document.querySelectorAll(".cb.cb-failed[data-block]")).map(b => b.getAttribute("data-block") + " " + b.querySelector(".cb-result").textContent).join(" ")`); strings.Contains(bar, "plan-failed") && joinTimedOut.MatchString(failed) {
		t.Logf("RETRY: the plan stopped at a join that timed out; pressing \"run again from this step\" once:\n%s", bundledtest.Tail(failed, 1500))
		pg.Run("run again from the failed step", chromedp.Click(chromedp.CSS(".plan-bar .plan-again")))
		pg.Poll("the plan's confirmation", `document.querySelector("dialog.confirm-plan[open] .plan-item")`, time.Minute)
		for _, id := range strings.Fields(pg.Eval(`Array.from(document.querySelectorAll("dialog.confirm-plan li.plan-manual")).map(li => li.getAttribute("data-block")).join(" ")`)) {
			pg.Run("tick "+id+" done", chromedp.Click(chromedp.CSS(`dialog.confirm-plan li.plan-manual[data-block="`+id+`"] input`)))
		}
		again := time.Now()
		pg.Run("confirm the plan", chromedp.Click(chromedp.CSS("dialog.confirm-plan .confirm-yes")))
		pg.Poll("the plan starts", `!document.querySelector(".plan-bar.plan-failed")`, time.Minute)
		pg.Poll("the plan ends", `document.querySelector(".plan-bar.plan-verified, .plan-bar.plan-failed, .plan-bar.plan-error, .plan-bar.plan-manual, .plan-bar.plan-cancelled")`, 20*time.Minute)
		bar = pg.Eval(`document.querySelector(".plan-bar").className + ": " + document.querySelector(".plan-bar").textContent`)
		t.Logf("phase %-28s %6.1fs; %s", "the page's plan, again", time.Since(again).Seconds(), bar)
	}
	if !strings.Contains(bar, "plan-verified") {
		pg.Fail("the plan from the page", fmt.Errorf("it ended %s", bar))
	}
	if clicks > maxPageClicks {
		t.Errorf("the walk took %d clicks, want at most %d", clicks, maxPageClicks)
	}
	t.Logf("the kubeadm runbook from the page in %d clicks", clicks)
	ran := map[string]bool{}
	for _, id := range strings.Fields(pg.Eval(`Array.from(document.querySelectorAll(".cb.cb-verified[data-block]")).map(b => b.getAttribute("data-block")).join(" ")`)) {
		ran[id] = true
	}
	if failed := pg.Eval(`Array.from(document.querySelectorAll(".cb.cb-failed[data-block]")).map(b => b.getAttribute("data-block")).join(" ")`); failed != "" {
		t.Errorf("blocks failed on the page: %s", failed)
	}
	return ran
}
