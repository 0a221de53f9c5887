package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cairn-dev/cairn/sandbox/testrig"
	"github.com/cairn-dev/cairn/site"
)

// planPage has what a plan goes through: a block that runs, one its
// condition skips, one that asks first, a manual step, a failure.
const planPage = "---\ntitle: 계획 시험\nslug: plantest\nlang: ko\nparams:\n  - name: MODE\n    type: enum\n    values: [a, b]\n    default: a\n  - name: NODE\n    type: host\n    default: cp0\n---\n" +
	"## 하나 {#one}\n\n" +
	"```bash {#first target=local expect.contains=first mute='^W: deprecated' mute.why=\"이 도구가 늘 내는 경고예요\" capture.TOKEN='token (\\S+)' secret=TOKEN}\necho first\necho 'W: deprecated flag'\necho token abcdefgh12345678\n```\n\n" +
	"```bash {#only-b target=local when='MODE == \"b\"'}\necho b\n```\n\n" +
	"```bash {#change target=local confirm=\"무언가를 바꿉니다\"}\ntest -n \"$TOKEN\" && echo changed\n```\n\n" +
	"## 둘 {#two}\n\n" +
	"```text {#by-hand target=manual}\n손으로 파일을 고칩니다\n```\n\n" +
	"```bash {#after-hand target=local}\necho after-hand \"$NODE\"\n```\n\n" +
	"## 셋 {#three}\n\n" +
	"```bash {#breaks target=local expect.contains=never retries=1 interval=3s}\necho nope\n```\n\n" +
	"```bash {#not-reached target=local}\necho not-reached\n```\n"

// TestPagePlanRunsFromHere: in real Chromium against cairn serve, "Run
// from here" on the first step shows one confirmation listing every block
// as the executor would take it (where, asks first, manual, skipped and
// why, in Korean), runs them, stops at the manual step with a button to go
// on, and stops again at the failure, naming it; the blocks after it do
// not run. Three clicks for seven blocks.
func TestPagePlanRunsFromHere(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	bctx := testrig.Browser(t)
	content := contentDir(t, map[string]string{"plantest.md": planPage})
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--journal", filepath.Join(t.TempDir(), "journal.db"))
	pg := testrig.NewPage(t, bctx, 90*time.Second, serr,
		`(document.querySelector(".plan-bar")||{}).textContent + " | " + Array.from(document.querySelectorAll(".cb-result")).map(e => e.closest(".cb").id + ": " + e.textContent.slice(0, 200)).join(" || ")`)
	pg.Run("open the page", chromedp.Navigate(base+"plantest/#cairn-token="+token))
	pg.Poll("the step buttons", `document.querySelector("#one .step-run-from:not(:disabled)")`, 20*time.Second)
	if got := pg.Eval(`document.querySelector("#one .step-run-from").textContent + "|" + document.querySelector("#one .step-run-step").textContent`); got != "여기부터 끝까지|이 단계 실행" {
		t.Errorf("step buttons %q", got)
	}

	pg.Run("run from here", chromedp.Click(chromedp.CSS(`#one .step-run-from`)))
	pg.Poll("the plan's confirmation", `document.querySelector("dialog.confirm-plan[open] .plan-item")`, 10*time.Second)
	items := pg.Eval(`Array.from(document.querySelectorAll(".plan-item")).map(li => li.getAttribute("data-block") + " " + li.className.replace("plan-item ", "") + " " + li.textContent.replace(/\s+/g, " ")).join("\n")`)
	for _, want := range []string{
		"first plan-run first", "only-b plan-condition only-b", `건너뜀, 고른 값에서 거짓인 조건: MODE == "b"`,
		"change plan-run change", "대상을 바꾸는 블록: 무언가를 바꿉니다", "by-hand plan-manual", "이미 했다면 체크하세요",
		"after-hand plan-run", "breaks plan-run", "not-reached plan-run", "이 컴퓨터",
	} {
		if !strings.Contains(items, want) {
			t.Errorf("the plan's list lacks %q:\n%s", want, items)
		}
	}
	if got := pg.Eval(`document.querySelector("dialog.confirm-plan .confirm-yes").textContent + "|" + document.querySelector(".plan-sum").textContent`); !strings.HasPrefix(got, "블록 5개 실행|블록 5개를 실행해요(모두 7개)") {
		t.Errorf("the confirmation says %q", got)
	}
	if *screenshots {
		pg.Screenshot("../../docs/screenshot-plan.png")
	}
	pg.Run("confirm the plan", chromedp.Click(chromedp.CSS(`dialog.confirm-plan .confirm-yes`)))

	pg.Poll("the plan stops at the manual step", `document.querySelector(".plan-bar.plan-manual .plan-continue")`, 30*time.Second)
	if got := pg.Eval(`[".cb-verified#block-first", ".cb-verified#block-change", "#block-after-hand .cb-result[data-status]"].map(s => !!document.querySelector(s)).join(",")`); got != "true,true,false" {
		t.Errorf("before the manual step: first, change verified and after-hand not run: %s", got)
	}
	// The known warning is muted, with why.
	if got := pg.Eval(`(function(){var m=document.querySelector("#block-first .out-muted"); return m ? m.textContent + "|" + m.title + "|" + document.querySelector("#block-first .cb-muted-note").textContent : "none"})()`); got != "W: deprecated flag\n|알려진 무해한 출력: 이 도구가 늘 내는 경고예요|흐리게 표시한 1줄은 알려진 무해한 출력이에요: 이 도구가 늘 내는 경고예요" {
		t.Errorf("muted line: %q", got)
	}
	if got := pg.Eval(`document.querySelector(".plan-bar").textContent`); !strings.Contains(got, "사람이 직접 하는 단계에서 멈췄어요") || !strings.Contains(got, "by-hand") {
		t.Errorf("plan bar: %q", got)
	}

	if *screenshots {
		pg.Screenshot("../../docs/screenshot-plan-manual.png")
	}
	pg.Run("the manual step is done: continue", chromedp.Click(chromedp.CSS(`.plan-bar .plan-continue`)))
	// While breaks waits to try again: the retry line in the page's
	// language (the executor's words in its title).
	pg.Poll("the retry line", `document.querySelector("#block-breaks .retry")`, 20*time.Second)
	if got := pg.Eval(`document.querySelector("#block-breaks .retry").textContent`); !strings.Contains(got, "1/2번째 시도 실패: 출력에 \"never\"이(가) 없어요; 3s 뒤에 다시 시도해요") {
		t.Errorf("retry line: %q", got)
	}
	pg.Poll("the plan stops at the failure", `document.querySelector(".plan-bar.plan-failed")`, 30*time.Second)
	if got := pg.Eval(`document.querySelector(".plan-bar").textContent`); !strings.Contains(got, "실패해서 멈췄어요: breaks") || !strings.Contains(got, "고친 뒤 '셋' 단계부터 다시 실행하세요") {
		t.Errorf("plan bar after the failure: %q", got)
	}
	// Once fixed, one button runs again from the failing step: its plan.
	pg.Run("run again from the step", chromedp.Click(chromedp.CSS(`.plan-bar .plan-again`)))
	pg.Poll("the plan from step three", `document.querySelector("dialog.confirm-plan[open] .plan-item")`, 10*time.Second)
	if got := pg.Eval(`Array.from(document.querySelectorAll("dialog.confirm-plan .plan-item")).map(li => li.getAttribute("data-block")).join(" ")`); got != "breaks not-reached" {
		t.Errorf("the plan to run again: %q", got)
	}
	pg.Run("not now", chromedp.Click(chromedp.CSS(`dialog.confirm-plan .confirm-no`)))
	if got := pg.Eval(`["#block-after-hand.cb-verified", "#block-breaks.cb-failed", "#block-not-reached .cb-result[data-status=running]", "#block-not-reached.cb-verified"].map(s => !!document.querySelector(s)).join(",")`); got != "true,true,false,false" {
		t.Errorf("after-hand verified, breaks failed, not-reached never run: %s", got)
	}
	// Local blocks only: the pill says nothing of kube blocks being off.
	if got := pg.Eval(`document.getElementById("cairn-exec-status").className + " " + document.getElementById("cairn-exec-status").textContent`); got != "exec-status exec-on 실행기 연결됨" {
		t.Errorf("pill: %q", got)
	}
	// After the runs (results, the pill, the plan's bar): WCAG 2.1 AA, as
	// the static pages are (site's TestAccessibility).
	for _, theme := range []string{"light", "dark"} {
		pg.Run("theme "+theme, chromedp.Evaluate[chromedp.Void](`document.documentElement.setAttribute("data-theme", "`+theme+`")`))
		// Colours change by CSS transition: axe measures only once they are
		// done (a fixed sleep lost that race on a loaded CI machine).
		pg.Poll("the theme's transitions end", `document.getAnimations().every(a => a.playState !== "running")`, 10*time.Second)
		for _, v := range pg.Axe() {
			t.Errorf("axe-core after the plan (%s): %s", theme, v)
		}
	}
	// An invalid value turns off the Run of the blocks that read it, saying
	// which field to fix; fixed, Run is back.
	setNode := func(v string) {
		pg.Eval(`(function(){var c=document.querySelector('form.params [name="NODE"]'); c.value=` + strconv.Quote(v) + `; c.dispatchEvent(new Event("input", {bubbles: true})); return ""})()`)
	}
	setNode("not a host!")
	if got := pg.Eval(`(function(){var b=document.querySelector("#block-after-hand .cb-run"); return b.getAttribute("aria-disabled") + "|" + b.title + "|" + document.querySelector("#block-first .cb-run").getAttribute("aria-disabled")})()`); got != "true|먼저 이 값을 고치세요: NODE|null" {
		t.Errorf("Run with NODE invalid: %q", got)
	}
	setNode("cp1")
	if got := pg.Eval(`document.querySelector("#block-after-hand .cb-run").getAttribute("aria-disabled") + ""`); got != "null" {
		t.Errorf("Run after NODE was fixed: aria-disabled %q", got)
	}
	// No English UI string is visible on this Korean page after the runs
	// (the executor's own words may sit in title attributes).
	visible := pg.Eval(`(function(){
	  var w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT), out = [], n;
	  while ((n = w.nextNode())) {
	    var p = n.parentElement;
	    if (!p || p.closest("pre, code, script, style, .cb-title, .plan-id, .prm") || !p.checkVisibility()) continue;
	    if (n.nodeValue.trim()) out.push(n.nodeValue.trim());
	  }
	  return out.join("\n");
	})()`)
	if !strings.Contains(visible, "실행기 연결됨") || !strings.Contains(visible, "검증됨") || !strings.Contains(visible, "실패해서 멈췄어요") {
		t.Fatalf("the visible text is not the page's:\n%s", visible)
	}
	en, ko := site.UIStrings("en"), site.UIStrings("ko")
	for k, v := range en {
		for _, part := range regexp.MustCompile(`%[ds]`).Split(v, -1) {
			part = strings.TrimSpace(strings.Trim(part, ":—()…·"))
			if len(part) < 6 || part == strings.TrimSpace(ko[k]) {
				continue
			}
			if strings.Contains(visible, part) {
				t.Errorf("English UI text %q (%s) visible on the Korean page", part, k)
			}
		}
	}
	// Run on its own, change asks first and says where $TOKEN comes from.
	pg.Run("run change", chromedp.Click(chromedp.CSS(`#block-change .cb-run`)))
	pg.Poll("its confirmation", `document.querySelector("dialog.confirm-run[open] .confirm-captures")`, 10*time.Second)
	if got := pg.Eval(`document.querySelector("dialog.confirm-run .confirm-captures").textContent`); got != "$TOKEN ← first (비밀 값: 여기서는 가려 보이고, 실행기가 갖고 있어요)" {
		t.Errorf("where $TOKEN comes from: %q", got)
	}
	pg.Run("cancel", chromedp.Click(chromedp.CSS(`dialog.confirm-run .confirm-no`)))
	if got := pg.Eval(`(document.querySelector("#block-not-reached .cb-result")||{}).textContent || ""`); !strings.Contains(got, "실행 안 함: 앞 블록이 실패했어요") {
		t.Errorf("the box of the block after the failure: %q", got)
	}
	if got := pg.Eval(`(document.querySelector("#block-by-hand .cb-result")||{}).textContent || ""`); !strings.Contains(got, "직접 함") {
		t.Errorf("the manual step's box: %q", got)
	}
}

// TestPageKubeOffInKorean: with no cluster, a Korean page's kube block
// says in Korean that kube blocks are off, the executor's English reason
// in its title; the pill warns, since the page has kube blocks.
func TestPageKubeOffInKorean(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	bctx := testrig.Browser(t)
	md := "---\ntitle: 쿠버네티스\nslug: kubeoff\nlang: ko\n---\n## 하나 {#one}\n\n```bash {#k target=kube}\nkubectl get ns\n```\n"
	content := contentDir(t, map[string]string{"kubeoff.md": md})
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--kubeconfig", filepath.Join(t.TempDir(), "none"),
		"--journal", filepath.Join(t.TempDir(), "journal.db"))
	pg := testrig.NewPage(t, bctx, 60*time.Second, serr, `document.body.innerText.slice(0, 2000)`)
	pg.Run("open the page", chromedp.Navigate(base+"kubeoff/#cairn-token="+token))
	pg.Poll("the block says where it would run", `document.querySelector("#block-k .cb-where")`, 20*time.Second)
	if got := pg.Eval(`document.querySelector("#block-k .cb-where").textContent + " | " + document.querySelector("#block-k .cb-where").title`); !strings.HasPrefix(got, "쿠버네티스 블록 꺼짐 | ") || !strings.Contains(got, "kube blocks are off") {
		t.Errorf("kube block header: %q", got)
	}
	if got := pg.Eval(`document.getElementById("cairn-exec-status").className + " " + document.getElementById("cairn-exec-status").textContent`); !strings.Contains(got, "exec-warn") || !strings.Contains(got, "쿠버네티스 블록 꺼짐") {
		t.Errorf("pill: %q", got)
	}
}

// TestPageNamesPodsBeforeRunning: a pod block's confirmation, and the plan's
// list, name the pods it would run in now, listed by the executor from a
// real apiserver; nothing runs in them.
func TestPageNamesPodsBeforeRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	k := testrig.Kube(t)
	bctx := testrig.Browser(t)
	ctx := context.Background()
	for _, name := range []string{"web-a", "web-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "cairn-web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}, NodeName: "cairn-test-nowhere"}}
		if _, err := k.Client.CoreV1().Pods(k.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	md := "---\ntitle: 파드\nslug: podnames\nlang: ko\nkube:\n  contexts: [\"" + k.Context + "\"]\nparams:\n  - name: NS\n    default: " + k.Namespace + "\n---\n" +
		"## 하나 {#one}\n\n```bash {#in-pods target=pod selector=app=cairn-web namespace=\"${NS}\" confirm=\"파드마다 실행합니다\"}\nhostname\n```\n"
	content := contentDir(t, map[string]string{"podnames.md": md})
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--kubeconfig", k.Kubeconfig, "--context", k.Context,
		"--journal", filepath.Join(t.TempDir(), "journal.db"))
	pg := testrig.NewPage(t, bctx, 60*time.Second, serr, `(document.querySelector("dialog")||document.body).innerText.slice(0, 2000)`)
	pg.Run("open the page", chromedp.Navigate(base+"podnames/#cairn-token="+token))
	pg.Poll("Run is on", `document.querySelector("#block-in-pods .cb-run:not([aria-disabled=true])")`, 20*time.Second)
	pg.Run("run the pod block", chromedp.Click(chromedp.CSS(`#block-in-pods .cb-run`)))
	pg.Poll("its confirmation", `document.querySelector("dialog.confirm-run[open]")`, 10*time.Second)
	want := "파드 (2): " + k.Namespace + "/web-a, " + k.Namespace + "/web-b"
	if got := pg.Eval(`(document.querySelector("dialog.confirm-run .plan-targets")||{}).textContent || ""`); got != want {
		t.Errorf("the confirmation names %q, want %q", got, want)
	}
	pg.Run("cancel", chromedp.Click(chromedp.CSS(`dialog.confirm-run .confirm-no`)))
	pg.Run("run the step", chromedp.Click(chromedp.CSS(`#one .step-run-step`)))
	pg.Poll("the plan's confirmation", `document.querySelector("dialog.confirm-plan[open] .plan-targets")`, 10*time.Second)
	if got := pg.Eval(`document.querySelector("dialog.confirm-plan .plan-targets").textContent`); got != want {
		t.Errorf("the plan names %q, want %q", got, want)
	}
	pg.Run("cancel the plan", chromedp.Click(chromedp.CSS(`dialog.confirm-plan .confirm-no`)))
	if got := pg.Eval(`(document.querySelector("#block-in-pods .cb-result[data-status]")||{}).textContent || ""`); got != "" {
		t.Errorf("something ran: %q", got)
	}
}

// TestPageSaysWhereToStart: "Run this step" on a step whose block reads a
// secret captured by an earlier step (never kept between runs) is refused
// before anything runs, in Korean, with a button that starts at the step
// that captures it.
func TestPageSaysWhereToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("browser")
	}
	bctx := testrig.Browser(t)
	md := "---\ntitle: 토큰\nslug: token\nlang: ko\n---\n## 발급 {#issue}\n\n" +
		"```bash {#make-token target=local capture.TOKEN='token (\\S+)' secret=TOKEN}\necho token abcdefgh12345678\n```\n\n" +
		"## 사용 {#use}\n\n```bash {#use-token target=local}\ntest -n \"$TOKEN\"\n```\n"
	content := contentDir(t, map[string]string{"token.md": md})
	base, token, serr := startServe(t, "--content", content, "--sandbox", "no", "--journal", filepath.Join(t.TempDir(), "journal.db"))
	pg := testrig.NewPage(t, bctx, 60*time.Second, serr, `(document.querySelector(".plan-bar")||document.body).innerText.slice(0, 2000)`)
	pg.Run("open the page", chromedp.Navigate(base+"token/#cairn-token="+token))
	pg.Poll("the step buttons", `document.querySelector("#use .step-run-step:not(:disabled)")`, 20*time.Second)
	// Its block alone: the executor's refusal, in Korean (its words in the title).
	pg.Run("run use-token alone", chromedp.Click(chromedp.CSS(`#block-use-token .cb-run`)))
	pg.Poll("the refusal", `document.querySelector("#block-use-token .cb-error")`, 10*time.Second)
	if got := pg.Eval(`document.querySelector("#block-use-token .cb-error").textContent`); got != "블록 use-token에는 $TOKEN 값이 필요해요. 이 값을 캡처하는 블록 make-token을(를) 먼저 실행하세요" {
		t.Errorf("a block run alone without its value: %q", got)
	}
	pg.Run("run the second step alone", chromedp.Click(chromedp.CSS(`#use .step-run-step`)))
	pg.Poll("the refusal", `document.querySelector(".plan-bar.plan-error .plan-again")`, 10*time.Second)
	if got := pg.Eval(`document.querySelector(".plan-bar .plan-text").textContent + " | " + document.querySelector(".plan-bar .plan-again").textContent`); got != "블록 use-token에는 $TOKEN 값이 필요한데, 이번 실행에서 그 앞에 이 값을 캡처하는 블록이 없어요 (비밀 값이라 실행 사이에 저장되지 않아요). 여기서 시작하세요: '발급' | '발급'부터 실행" {
		t.Errorf("the refusal says %q", got)
	}
	pg.Run("start where it says", chromedp.Click(chromedp.CSS(`.plan-bar .plan-again`)))
	pg.Poll("the plan from the first step", `document.querySelector("dialog.confirm-plan[open] .plan-item")`, 10*time.Second)
	if got := pg.Eval(`Array.from(document.querySelectorAll("dialog.confirm-plan .plan-item")).map(li => li.getAttribute("data-block")).join(" ")`); got != "make-token use-token" {
		t.Errorf("the plan: %q", got)
	}
	pg.Run("confirm", chromedp.Click(chromedp.CSS(`dialog.confirm-plan .confirm-yes`)))
	pg.Poll("it ran", `document.querySelector(".plan-bar.plan-verified")`, 20*time.Second)
}
