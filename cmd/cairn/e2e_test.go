package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/cairn-dev/cairn/executor/local"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestMain(m *testing.M) {
	// The in-process CLI's local runner runs blocks through this binary's
	// __supervise, as the real cairn does.
	if len(os.Args) > 1 && os.Args[1] == superviseCmd {
		os.Exit(local.Supervise(os.Args[2:]))
	}
	// `cairn sandbox up`, started by serve --sandbox=start, is this binary too.
	selfEnv = []string{"CAIRN_TEST_MAIN=1"}
	if os.Getenv("CAIRN_TEST_MAIN") == "1" {
		// The test binary as the cairn command (a daemon the tests kill).
		os.Unsetenv("CAIRN_TEST_MAIN")
		main()
		return
	}
	// The txtar scripts (TestScripts) run this binary as `cairn`.
	testscript.Main(rigMain{m}, map[string]func(){"cairn": main})
}

// rigMain runs the tests inside testrig.Main (the shared sandbox's start
// and stop) for testscript.Main, which wants an M.
type rigMain struct{ m *testing.M }

func (r rigMain) Run() int { return testrig.Main(r.m) }

var screenshots = flag.Bool("screenshots", false, "write docs/screenshot-executor.png from the end-to-end test")

// syncBuffer is a Stderr the test can read while the command writes.
type syncBuffer = testrig.Buffer

var pairRe = regexp.MustCompile(`pair this browser by opening (http://127\.0\.0\.1:\d+/)#cairn-token=([0-9a-f]+)`)

// TestE2EExecutorInBrowser builds and serves the practice runbook with the
// executor against the sandbox's real kube-apiserver and sshd hosts, opens
// it in headless Chromium, fills a parameter and clicks Run on a local, a
// kube and an ssh block: output streams in, the verified result appears,
// and after a reload (and in the re-rendered HTML) it is still there.
func TestE2EExecutorInBrowser(t *testing.T) {
	k := testrig.Kube(t)
	s := testrig.SSH(t)
	bctx := testrig.Browser(t)

	dir := t.TempDir()
	src, err := os.ReadFile("../../content/practice.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "practice.md"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	ns := k.Namespace + "-p"
	t.Cleanup(func() { k.KubectlErr(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })

	ctx, cancel := context.WithCancel(context.Background())
	stderr := &syncBuffer{}
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: stderr}
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, []string{"serve", "--port", "0", "--content", dir, "--sandbox", "no",
			"--kubeconfig", k.Kubeconfig, "--context", k.Context,
			"--ssh-config", s.Inventory.SSHConfig, "--known-hosts", s.Inventory.KnownHosts, "--identity", s.Inventory.IdentityFile,
			"--journal", filepath.Join(t.TempDir(), "journal.jsonl")})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("serve did not stop")
		}
	})
	var base, token string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if mm := pairRe.FindStringSubmatch(stderr.String()); mm != nil {
			base, token = mm[1], mm[2]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pairing URL; serve said:\n%s", stderr.String())
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}

	run := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actx, c := context.WithTimeout(bctx, 60*time.Second)
		defer c()
		if _, err := chromedp.Run(actx, chromedp.Steps(actions...)); err != nil {
			t.Fatalf("%v\nserve said:\n%s", err, stderr.String())
		}
	}
	waitJS := func(js string, timeout time.Duration) {
		t.Helper()
		actx, c := context.WithTimeout(bctx, timeout+5*time.Second)
		defer c()
		if _, err := chromedp.Run(actx, chromedp.Poll[bool]("!!("+js+")", chromedp.WithPollingTimeout(timeout))); err != nil {
			state, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`(document.getElementById("cairn-exec-status")||{}).textContent + " | " + Array.from(document.querySelectorAll(".cb-result:not([hidden])")).map(e => e.closest(".cb").id + ": " + e.textContent.slice(0, 300)).join(" || ")`))
			t.Fatalf("waiting for %s: %v\npage: %s\nserve said:\n%s", js, err, state, stderr.String())
		}
	}
	text := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// A tab that was never paired says so, on the page and on Run.
	run(chromedp.Navigate(base + "practice/"))
	waitJS(`document.querySelector("#cairn-exec-status.exec-off")`, 15*time.Second)
	if tip := text(`document.querySelector(".cb-run").title`); !strings.Contains(tip, "cairn serve") || !strings.Contains(text(`document.getElementById("cairn-exec-status").textContent`), "#cairn-token=") {
		t.Errorf("unpaired tab: tooltip %q", tip)
	}
	// The status the executor client fills in is the one cairn serve put at
	// the top of the runbook (so that filling it in moves nothing), not a
	// second one.
	if got := text(`document.querySelectorAll("#cairn-exec-status").length + " " + document.querySelector(".runbook-head").firstElementChild.id`); got != "1 cairn-exec-status" {
		t.Errorf("executor status: %q, want one, first in the runbook's header", got)
	}
	// Pasting the fragment into the open tab pairs it.
	text(`(location.hash = "cairn-token=` + token + `", "")`)
	waitJS(`document.querySelector("#cairn-exec-status.exec-on") && !document.querySelector(".cb-run[aria-disabled=true]")`, 15*time.Second)
	text(`(sessionStorage.clear(), "")`)

	// Exactly the printed URL: the index, then a click through to the runbook.
	run(chromedp.Navigate(base + "#cairn-token=" + token))
	waitJS(`document.querySelector("#cairn-exec-status.exec-on")`, 15*time.Second)
	if strings.Contains(text(`location.href`), token) {
		t.Error("the token stayed in the address bar")
	}
	run(chromedp.Click(chromedp.CSS(`.card-title a[href$="practice/"]`)))
	run(chromedp.WaitReady(chromedp.CSS(`body.kind-runbook`)))
	waitJS(`location.pathname.endsWith("/practice/") && document.querySelector("#cairn-exec-status.exec-on")`, 15*time.Second)
	// Fill a parameter by typing into the form.
	run(chromedp.Focus(chromedp.CSS(`input[name="NAMESPACE"]`)))
	text(`(document.querySelector('input[name="NAMESPACE"]').select(), "")`)
	if _, err := chromedp.Call(bctx, input.InsertText, input.InsertTextParams{Text: ns}); err != nil {
		t.Fatal(err)
	}
	waitJS(fmt.Sprintf(`window.Cairn.values().NAMESPACE === %q`, ns), 5*time.Second)
	// Block headers show the form's values and where a block runs, whole.
	if got := text(`document.querySelector("#block-wait-sa .cb-title").textContent`); !strings.Contains(got, "namespace="+ns) && !strings.Contains(got, "-n "+ns) || strings.Contains(got, "$NAMESPACE") {
		t.Errorf("kube header: %q", got)
	}
	if got := text(`document.querySelector("#block-ssh-hostname .cb-hosts").textContent`); !strings.Contains(got, "cp0") || strings.Contains(got, "$") {
		t.Errorf("ssh header: %q", got)
	}
	if got := text(`(function(){var e=document.querySelector("#block-wait-sa .cb-title"); return String(e.scrollWidth <= e.clientWidth + 1)})()`); got != "true" {
		t.Error("the kube header is cut off")
	}

	click := func(block string) {
		t.Helper()
		run(chromedp.Click(chromedp.CSS(`#block-` + block + ` .cb-run`)))
	}
	verified := func(block string) string {
		t.Helper()
		waitJS(`document.querySelector("#block-`+block+`.cb-verified")`, 40*time.Second)
		return text(`(function(){var b=document.querySelector("#block-` + block + `"); var r=b.querySelector(".cb-result"); return r ? r.textContent : "NO RESULT: " + b.outerHTML.slice(0, 3000)})()`)
	}

	click("make-stamp") // local
	if out := verified("make-stamp"); !regexp.MustCompile(`stamp=[0-9a-f]{12}`).MatchString(out) {
		t.Errorf("local output: %q", out)
	}
	// Its step has no other block: it is ticked (auto-progress); the kube
	// step, with blocks still to run, is not.
	waitJS(`document.querySelector('.step-done[data-step="local"]').checked`, 5*time.Second)
	// The runbook is Korean: so are the executor's words on it.
	// The pill says what blocks run against before anything runs there.
	if got := text(`document.querySelector("#block-make-stamp .cb-result .status").textContent + "|" + document.getElementById("cairn-exec-status").textContent`); got != "검증됨|실행기 연결됨 · 클러스터 cairn-sandbox" {
		t.Errorf("status words on a Korean page: %q", got)
	}
	click("apply-objects") // kube, uses the capture and the typed namespace
	if out := verified("apply-objects"); !strings.Contains(out, "namespace/"+ns+" serverside-applied") {
		t.Errorf("kube output: %q", out)
	}
	// Copy on a kube block gives the kubectl command, with the form's
	// values: pasted into a terminal, it does what the block did.
	for _, tc := range []struct{ block, want string }{
		{"apply-objects", "namespace/" + ns + " serverside-applied"},
		{"wait-sa", "serviceaccount/default condition met"},
	} {
		run(chromedp.Click(chromedp.CSS(`#block-` + tc.block + ` .cb-copy`)))
		waitJS(`window.Cairn.lastCopied && window.Cairn.lastCopied.indexOf("kubectl --context cairn-sandbox") > 0 && window.Cairn.lastCopied.indexOf("`+ns+`") > 0`, 5*time.Second)
		copied := text(`window.Cairn.lastCopied`)
		text(`(window.Cairn.lastCopied = "", "")`)
		cmd := exec.Command("bash", "-c", copied)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+k.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: the copied command %q: %v\n%s", tc.block, copied, err, out)
		}
	}
	if text(`String(document.querySelector('.step-done[data-step="kube-apply"]').checked)`) != "false" {
		t.Error("a step was ticked before all its blocks verified")
	}
	if got := k.Kubectl(t, "", "get", "practicenotes.cairn.dev", "first", "-n", ns, "-o", "jsonpath={.spec.stamp}"); len(got) != 12 {
		t.Errorf("the captured stamp did not reach the cluster: %q", got)
	}
	click("ssh-hostname") // ssh on a host group
	out := verified("ssh-hostname")
	for _, h := range []string{"cp0", "cp1", "cp2"} {
		if !strings.Contains(out, "host="+h) {
			t.Errorf("ssh output lacks %s: %q", h, out)
		}
	}
	click("apply-pod")
	verified("apply-pod")
	click("pod-running") // fails on purpose (after retries), with the reason shown
	// A reload while it runs follows the same run, live, to its end.
	// Once the executor has the run (a reload before the request left would
	// rightly find none).
	waitJS(`document.querySelector("#block-pod-running.cb-running .cb-result[data-run]")`, 10*time.Second)
	run(chromedp.Reload())
	waitJS(`document.querySelector("#block-pod-running.cb-running .cb-result-running")`, 10*time.Second)
	waitJS(`document.querySelector("#block-pod-running.cb-failed")`, 40*time.Second)
	// In the page's language, with the executor's own words kept in the title.
	if reason := text(`document.querySelector("#block-pod-running .cb-reasons li").textContent + "|" + document.querySelector("#block-pod-running .cb-reasons li").title`); !strings.Contains(reason, `출력에 "Running"이(가) 없어요|`) || !strings.Contains(reason, `does not contain "Running"`) {
		t.Errorf("failure reason: %q", reason)
	}

	// A block that changes the cluster asks first, and says what will
	// happen: the command with the form's values, and the cluster.
	click("delete-ns")
	waitJS(`document.querySelector("dialog.confirm-run[open]")`, 5*time.Second)
	dlg := text(`document.querySelector("dialog.confirm-run").textContent`)
	for _, want := range []string{"kubectl --context cairn-sandbox delete", ns, "클러스터", "cairn-sandbox"} {
		if !strings.Contains(dlg, want) {
			t.Errorf("confirmation lacks %q: %q", want, dlg)
		}
	}
	run(chromedp.Click(chromedp.CSS(`dialog.confirm-run .confirm-no`)))
	waitJS(`!document.querySelector("dialog.confirm-run")`, 5*time.Second)
	if got := text(`String(document.querySelector("#block-delete-ns .cb-result").hidden)`); got != "true" {
		t.Error("cancelled confirmation ran the block anyway")
	}

	// After a reload (the token is kept for the tab) the results are there.
	run(chromedp.Navigate(base + "practice/"))
	waitJS(`document.querySelector("#cairn-exec-status.exec-on")`, 15*time.Second)
	verified("make-stamp")
	verified("ssh-hostname")
	// ... and so is the failure, with its reason.
	waitJS(`document.querySelector("#block-pod-running.cb-failed .cb-reasons")`, 15*time.Second)
	if *screenshots {
		var png []byte
		run(chromedp.EmulateViewport(1280, 900),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("block-ssh-hostname").scrollIntoView({block: "start"}); window.scrollBy(0, -120)`),
			chromedp.Sleep(300*time.Millisecond))
		png, err = chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/screenshot-executor.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		// The same paired page in dark mode, at a kube block's YAML.
		run(chromedp.Evaluate[chromedp.Void](`document.documentElement.setAttribute("data-theme", "dark"); document.getElementById("block-apply-objects").scrollIntoView({block: "start"}); window.scrollBy(0, -160)`),
			chromedp.Sleep(300*time.Millisecond))
		if png, err = chromedp.Run(bctx, chromedp.CaptureScreenshot()); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../../docs/screenshot-dark.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		run(chromedp.Evaluate[chromedp.Void](`document.documentElement.setAttribute("data-theme", "light")`))
	}
	// The bundled practice page after its runs (results, a failure, the
	// pill): WCAG 2.1 AA in both themes, as before them (site's
	// TestAccessibility).
	axe := testrig.Axe(t)
	for _, theme := range []string{"light", "dark"} {
		// Colours change by CSS transition: measure once they are done.
		run(chromedp.Evaluate[chromedp.Void](`document.documentElement.setAttribute("data-theme", "`+theme+`")`),
			chromedp.Poll[chromedp.Void](`document.getAnimations().every(a => a.playState !== "running")`, chromedp.WithPollingTimeout(10*time.Second)))
		vs, err := testrig.RunAxe(bctx, axe)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vs {
			t.Errorf("axe-core on the practice page after its runs (%s): %s", theme, v)
		}
	}
	run(chromedp.Evaluate[chromedp.Void](`document.documentElement.setAttribute("data-theme", "light")`))
	// And they are baked into the served HTML for readers without the executor.
	resp, err := http.Get(base + "practice/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`id="block-make-stamp"[\s\S]*?cb-result-baked" data-status="verified"`).Match(page) {
		t.Error("the verified result is not baked into the page")
	}
}
