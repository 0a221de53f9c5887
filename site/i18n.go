package site

import (
	"html/template"
	"strings"
	"sync"
)

// Strings are the UI strings of one language, by key.
type Strings map[string]string

// uiStrings holds every UI string in Korean and English. Both maps must have
// the same keys; TestStringsComplete checks that.
var uiStrings = map[string]Strings{
	"ko": {
		"copy": "복사", "copied": "복사됨", "run": "실행", "mark_done": "완료 표시",
		"run_disabled": "실행하려면 로컬 실행기를 켜세요: cairn serve 또는 cairn daemon",
		"search":       "검색", "search_placeholder": "런북 검색 (/)", "no_results": "결과가 없어요",
		"params": "매개변수", "params_hint": "값을 입력하면 아래 명령에 바로 반영돼요. 비밀 값은 저장되지 않아요.",
		"steps": "단계", "progress": "진행", "reset": "진행 초기화", "reset_confirm": "체크한 단계를 모두 지울까요?",
		"toc": "이 페이지의 단계", "expected_output": "예상 출력", "expected_output_checked": "예상 출력 (비슷하면 통과)",
		"recorded_output": "검증된 출력", "theme_toggle": "밝게/어둡게", "menu": "메뉴",
		"skip_to_content": "본문으로 건너뛰기", "skip_to_steps": "첫 단계로 건너뛰기", "run_invalid": "먼저 이 값을 고치세요: ", "targets_later": "실행할 때 정해져요", "plan_again": "이 단계부터 다시 실행",
		"plan_missing": "블록 %s에는 $%s 값이 필요한데, 이번 실행에서 그 앞에 이 값을 캡처하는 블록이 없어요", "plan_missing_secret": " (비밀 값이라 실행 사이에 저장되지 않아요)",
		"plan_missing_start": "여기서 시작하세요: ", "plan_missing_when": "조건: ", "plan_start_at": "'%s'부터 실행", "and_more": "외 %d개", "prerequisites": "사전 준비", "duration": "예상 소요 시간",
		"tags": "태그", "not_applicable": "선택한 값에는 해당하지 않아요", "required": "필수",
		"invalid": "값이 올바르지 않아요", "note": "참고", "tip": "팁", "caution": "주의", "warning": "경고",
		"captures": "캡처", "expectations": "기대 결과", "all_runbooks": "모든 런북",
		"page_not_found": "페이지를 찾을 수 없어요", "back_home": "처음으로", "confirm_needed": "실행 전에 확인이 필요해요",
		"flag_confirm": "확인 필요", "secret": "비밀",
		"target_local": "이 컴퓨터에서 실행", "target_ssh": "SSH로 원격 호스트에서 실행",
		"target_kube": "쿠버네티스 API로 실행", "target_manual": "사람이 직접 하는 단계",
		"target_pod": "쿠버네티스 API로 파드 안에서 실행 (kubectl exec)", "target_node": "쿠버네티스 API로 노드에서 root로 실행 (노드마다 잠깐 쓰는 특권 파드)",
		"runs_in_pods": "실행할 파드", "runs_on_nodes": "실행할 노드",
		"step_done_label": "%d단계 완료", "link_to_step": "이 단계로 가는 링크",
		"expect_exit": "종료 코드", "expect_any_exit": "종료 코드는 상관없음", "expect_contains": "출력에 포함:",
		"expect_not_contains": "출력에 없음:", "expect_match": "출력이 정규식과 일치:", "expect_jsonpath": "JSONPath 조건:",
		"expect_count": "객체 수:", "expect_lease": "Lease를 이 보유자가 잡고 갱신하는 중:", "expect_wait": "조건이 될 때까지 대기:", "expect_similar": "예상 출력과 비슷해야 함",
		"runbooks": "런북", "index_intro": "단계별로 따라 하며 실행하고 검증하는 쿠버네티스 운영 런북이에요.",
		"minutes": "분", "step_count": "%d단계", "step_count_one": "%d단계", "default": "기본값", "build_error": "런북에 문제가 있어요",
		"exec_connected": "실행기 연결됨", "exec_connecting": "실행기에 연결하는 중…", "exec_offline": "실행기에 연결할 수 없어요",
		"params_sandbox": "샌드박스 값 채우기", "params_sandbox_done": "샌드박스 값 사용 중", "params_sandbox_title": "실행 중인 샌드박스가 알려 준 값:",
		"exec_not_paired": "실행기와 연결되지 않았어요. cairn serve가 출력한 연결 URL(#cairn-token=…)로 이 페이지를 여세요.",
		"run_not_paired":  "이 탭은 아직 실행기와 연결되지 않았어요: cairn serve(또는 cairn daemon)가 출력한 연결 URL을 여세요.",
		"run_unreachable": "실행기에 연결할 수 없어요",
		"run_static":      "실행하려면 cairn daemon --allow-origin으로 실행기를 켜고, 출력된 연결 URL로 이 페이지를 여세요.",
		"status_verified": "검증됨", "status_failed": "실패", "status_error": "오류", "status_cancelled": "취소됨",
		"status_skipped": "건너뜀", "status_running": "실행 중", "cancel": "취소",
		"writeback_failed": "Markdown에 기록하지 못했어요: ",
		"stream_lost":      "실행이 끝나기 전에 실행기와의 연결이 끊겼어요",
		"runs_on":          "실행할 호스트", "flag_timeout": "제한 시간", "edit_page": "이 페이지 고치기", "pager": "이전·다음 런북", "prev": "이전", "next": "다음",
		"tag_filter": "태그로 거른 런북:", "show_all": "모두 보기", "wrap_toggle": "긴 줄 접기", "na_hidden": "지금 선택에는 쓰이지 않는 매개변수 %d개를 숨겼어요", "show": "보기", "hide": "숨기기", "flag_retries": "재시도",
		"confirm_command": "실행할 명령", "confirm_run": "실행",
		"where_cluster": "클러스터", "where_namespace": "네임스페이스", "where_hosts": "호스트", "where_sudo": "root 권한(sudo)으로",
		"where_pods": "파드", "where_nodes": "노드", "where_node_pod": "노드마다 잠깐 만드는 특권 파드로 (끝나면 지움)",
		"site_run": "현장에서 실행(내보낸 스크립트)", "site_by": "실행: ", "sig_checked": "서명 확인: ", "sig_unchecked": "서명 있음, 확인 안 함", "sig_none": "서명 없음",
		"where_local": "이 컴퓨터", "kube_off": "쿠버네티스 블록 꺼짐", "sandbox_absent": "클러스터도 샌드박스도 없어요(cairn sandbox up)",
		"sandbox_building": "샌드박스 바이너리 빌드 중", "sandbox_starting": "샌드박스 시작 중",
		"sandbox_unavailable": "샌드박스를 시작할 수 없어요", "sandbox_unhealthy": "샌드박스가 응답하지 않아요",
		"sandbox_replaced": "쓰던 샌드박스 대신 다른 샌드박스가 실행 중", "sandbox_accept": "새 샌드박스 사용하기",
		"sandbox_offer": "이 페이지가 쓰던 샌드박스가 사라지고 같은 폴더에서 다른 샌드박스가 실행 중이에요. 사용하기로 고르기 전까지 쿠버네티스와 SSH 블록은 실행되지 않아요.",
		"for_example":   "예:", "invalid_pattern": "형식이 맞지 않아요.", "invalid_int": "정수를 입력하세요.",
		"invalid_bool": "true 또는 false여야 해요.", "invalid_enum": "목록에서 고르세요.",
		"invalid_host":  "호스트 이름이나 IP 주소여야 해요(앞에 user@, 뒤에 :포트를 붙일 수 있어요).",
		"invalid_hosts": "공백이나 쉼표로 구분한 호스트 이름 또는 IP 주소여야 해요.",
		"invalid_cidr":  "10.0.0.0/16 같은 CIDR 프리픽스여야 해요.", "invalid_duration": "90s, 5m 같은 시간이어야 해요.",
		"run_step": "이 단계 실행", "run_from_here": "여기부터 끝까지", "plan_title_step": "이 단계를 실행할까요?",
		"plan_title_from": "이 단계부터 끝까지 실행할까요?", "plan_sum": "블록 %d개를 실행해요(모두 %d개). 하나라도 실패하면 거기서 멈춰요.",
		"plan_skipped": "건너뜀: ", "plan_manual_done": "사람이 직접 하는 단계예요. 이미 했다면 체크하세요(아니면 여기서 멈춰요).",
		"plan_asks": "대상을 바꾸는 블록: ", "plan_run": "블록 %d개 실행", "close": "닫기", "plan_starting": "시작하는 중…",
		"plan_at": "%d/%d: ", "plan_manual_ok": "직접 함", "plan_done": "끝났어요: ", "plan_continue": "했어요, 계속",
		"plan_stopped_manual": "사람이 직접 하는 단계에서 멈췄어요. 하고 나서 계속하세요: ", "plan_cancelled": "멈춤: 취소했어요",
		"plan_failed": "실패해서 멈췄어요: ", "plan_error": "멈췄어요: ", "plan_cond_false": "건너뜀, 고른 값에서 거짓인 조건: ",
		"plan_resume": "고친 뒤 '%s' 단계부터 다시 실행하세요", "plan_after_failure": "실행 안 함: 앞 블록이 실패했어요",
		"plan_unconfirmed": "실행 안 함: 확인하지 않았어요", "retry_line": "%d/%d번째 시도 실패: %s; %s 뒤에 다시 시도해요",
		"confirm_captures": "앞 블록이 캡처한 값", "capture_missing": "(아직 캡처되지 않음: 그중 하나를 먼저 실행하세요)",
		"capture_secret": "(비밀 값: 여기서는 가려 보이고, 실행기가 갖고 있어요)",
		"muted":          "알려진 무해한 출력: ", "muted_note": "흐리게 표시한 %d줄은 알려진 무해한 출력이에요: ",
		"session": "셸 세션 ", "term_open": "터미널", "term_open_any": "이 컴퓨터나 이 런북의 호스트에서 터미널을 열어요", "term_open_title": "여기서 터미널을 열어 직접 해요", "term_ask": "터미널을 열까요?", "term_where": "어디에서",
		"term_local": "이 컴퓨터", "term_yes": "열기", "term_note": "세션은 실행 기록(저널)에 남고, 기록에서는 비밀 값이 가려져요.",
		"term_done": "이 단계를 했어요", "term_close": "터미널 닫기", "term_ended": "셸이 끝났어요", "term_elsewhere": "다른 탭이 이 터미널을 열었어요",
		"term_on": "터미널: ", "term_failed": "터미널을 열지 못했어요: ", "term_by": "작업자 ", "status_by-hand": "직접 함(터미널)", "status_terminal": "터미널 세션",
	},
	"en": {
		"copy": "Copy", "copied": "Copied", "run": "Run", "mark_done": "Mark done",
		"run_disabled": "Start the local executor to run steps: cairn serve or cairn daemon",
		"search":       "Search", "search_placeholder": "Search runbooks (/)", "no_results": "No results",
		"params": "Parameters", "params_hint": "Values you enter fill in the commands below. Secret values are never stored.",
		"steps": "Steps", "progress": "Progress", "reset": "Reset progress", "reset_confirm": "Clear every ticked step?",
		"toc": "Steps on this page", "expected_output": "Expected output", "expected_output_checked": "Expected output (checked: similar)",
		"recorded_output": "Verified output", "theme_toggle": "Light/dark", "menu": "Menu",
		"skip_to_content": "Skip to content", "skip_to_steps": "Skip to the first step", "run_invalid": "Fix these values first: ", "targets_later": "listed when it runs", "plan_again": "Run again from this step",
		"plan_missing": "block %s needs $%s, which no block before it in this run captures", "plan_missing_secret": " (a secret value: not kept between runs)",
		"plan_missing_start": "Start at: ", "plan_missing_when": "with ", "plan_start_at": "Run from '%s'", "and_more": "and %d more", "prerequisites": "Prerequisites", "duration": "Estimated time",
		"tags": "Tags", "not_applicable": "Does not apply to the chosen values", "required": "required",
		"invalid": "Invalid value", "note": "Note", "tip": "Tip", "caution": "Caution", "warning": "Warning",
		"captures": "Captures", "expectations": "Expectations", "all_runbooks": "All runbooks",
		"page_not_found": "Page not found", "back_home": "Back to the start", "confirm_needed": "Needs confirmation before it runs",
		"flag_confirm": "confirm", "secret": "secret",
		"target_local": "Runs on this machine", "target_ssh": "Runs on remote hosts over SSH",
		"target_kube": "Runs against the Kubernetes API", "target_manual": "A step a person does",
		"target_pod": "Runs in pods through the Kubernetes API (kubectl exec)", "target_node": "Runs on nodes as root through the Kubernetes API (a short-lived privileged pod on each)",
		"runs_in_pods": "Pods it runs in", "runs_on_nodes": "Nodes it runs on",
		"step_done_label": "Step %d done", "link_to_step": "Link to this step",
		"expect_exit": "Exit code", "expect_any_exit": "Any exit code", "expect_contains": "Output contains",
		"expect_not_contains": "Output lacks", "expect_match": "Output matches", "expect_jsonpath": "JSONPath holds",
		"expect_count": "Object count", "expect_lease": "Lease held and being renewed by", "expect_wait": "Waits until", "expect_similar": "Output is similar to the expected output",
		"runbooks": "Runbooks", "index_intro": "Guided Kubernetes runbooks you follow step by step, run and verify.",
		"minutes": "min", "step_count": "%d steps", "step_count_one": "%d step", "default": "default", "build_error": "A runbook has problems",
		"exec_connected": "Executor connected", "exec_connecting": "Connecting to the executor…", "exec_offline": "Executor not reachable",
		"params_sandbox": "Fill in from the sandbox", "params_sandbox_done": "Sandbox values in use", "params_sandbox_title": "What the running sandbox knows:",
		"exec_not_paired": "Not paired with the executor. Open the pairing URL (#cairn-token=…) that cairn serve printed.",
		"run_not_paired":  "This tab is not paired yet: open the pairing URL that cairn serve (or cairn daemon) printed.",
		"run_unreachable": "The executor is not reachable",
		"run_static":      "To run steps, start cairn daemon --allow-origin for this site and open the pairing URL it prints.",
		"status_verified": "verified", "status_failed": "failed", "status_error": "error", "status_cancelled": "cancelled",
		"status_skipped": "skipped", "status_running": "running", "cancel": "Cancel",
		"writeback_failed": "Not written back to the Markdown: ",
		"stream_lost":      "the connection to the executor ended before the run did",
		"runs_on":          "Hosts it runs on", "flag_timeout": "timeout", "edit_page": "Edit this page", "pager": "Previous and next runbook", "prev": "Previous", "next": "Next",
		"tag_filter": "Runbooks tagged:", "show_all": "Show all", "wrap_toggle": "Wrap long lines", "na_hidden": "%d parameters not used by the current choice are hidden", "show": "Show", "hide": "Hide", "flag_retries": "retries",
		"confirm_command": "Command", "confirm_run": "Run it",
		"where_cluster": "cluster", "where_namespace": "namespace", "where_hosts": "hosts", "where_sudo": "as root (sudo)",
		"where_pods": "pods", "where_nodes": "nodes", "where_node_pod": "through a privileged pod on each node, deleted afterwards",
		"site_run": "run at the site (exported script)", "site_by": "by ", "sig_checked": "signature checked: ", "sig_unchecked": "signed, not checked", "sig_none": "unsigned",
		"where_local": "this machine", "kube_off": "kube blocks are off", "sandbox_absent": "no cluster and no sandbox (cairn sandbox up)",
		"sandbox_building": "building the sandbox", "sandbox_starting": "starting the sandbox",
		"sandbox_unavailable": "the sandbox cannot start", "sandbox_unhealthy": "the sandbox does not answer",
		"sandbox_replaced": "another sandbox took the place of the one in use", "sandbox_accept": "Use the new sandbox",
		"sandbox_offer": "The sandbox this page ran against is gone and another one runs in its folder. Kube and SSH blocks stay off until you choose to use it.",
		"for_example":   "e.g.", "invalid_pattern": "Not in the expected form.", "invalid_int": "Enter a whole number.",
		"invalid_bool": "Must be true or false.", "invalid_enum": "Choose one from the list.",
		"invalid_host":  "A host name or IP address (optionally user@ before and :port after).",
		"invalid_hosts": "Host names or IP addresses, separated by spaces or commas.",
		"invalid_cidr":  "A CIDR prefix such as 10.0.0.0/16.", "invalid_duration": "A duration such as 90s or 5m.",
		"run_step": "Run this step", "run_from_here": "Run from here", "plan_title_step": "Run this step?",
		"plan_title_from": "Run from this step to the end?", "plan_sum": "%d of %d blocks run; the plan stops at the first that fails.",
		"plan_skipped": "skipped: ", "plan_manual_done": "a step done by hand: tick it if it is done already (else the plan stops there)",
		"plan_asks": "changes its target: ", "plan_run": "Run %d blocks", "close": "Close", "plan_starting": "starting…",
		"plan_at": "%d/%d: ", "plan_manual_ok": "done by hand", "plan_done": "done: ", "plan_continue": "Done — continue",
		"plan_stopped_manual": "stopped at a step done by hand; do it, then continue: ", "plan_cancelled": "stopped: cancelled",
		"plan_failed": "stopped at a failure: ", "plan_error": "stopped: ", "plan_cond_false": "skipped, false with the chosen values: ",
		"plan_resume": "fix it, then run again from step '%s'", "plan_after_failure": "not run: an earlier block failed",
		"plan_unconfirmed": "not run: not confirmed", "retry_line": "attempt %d of %d failed: %s; retrying in %s",
		"confirm_captures": "Values from earlier blocks", "capture_missing": "(not captured yet: run one of them first)",
		"capture_secret": "(secret: masked here, the executor has it)",
		"muted":          "known and harmless: ", "muted_note": "%d muted lines are known and harmless: ",
		"session": "shell session ", "term_open": "Terminal", "term_open_any": "Open a terminal here or on a host of this runbook", "term_open_title": "Open a terminal here and do it by hand", "term_ask": "Open a terminal?", "term_where": "Where",
		"term_local": "this machine", "term_yes": "Open", "term_note": "The session is recorded in the journal; secret values are masked in the record.",
		"term_done": "I did this step", "term_close": "Close the terminal", "term_ended": "the shell ended", "term_elsewhere": "another tab opened this terminal",
		"term_on": "Terminal: ", "term_failed": "Could not open a terminal: ", "term_by": "by ", "status_by-hand": "done by hand (terminal)", "status_terminal": "terminal session",
	},
}

// stringsJSON holds each language's strings as a page's
// <script type="application/json">{{.T}}</script> would print them
// (html/template's JSON escaping), made once instead of for every page.
var stringsJSON = sync.OnceValue(func() map[string]template.JS {
	const open, end = `<script type="application/json">`, `</script>`
	t := template.Must(template.New("").Parse(open + "{{.}}" + end))
	out := map[string]template.JS{}
	for lang, s := range uiStrings {
		var b strings.Builder
		if err := t.Execute(&b, s); err != nil {
			panic(err) // a map of strings always marshals
		}
		out[lang] = template.JS(strings.TrimSuffix(strings.TrimPrefix(b.String(), open), end))
	}
	return out
})

// stringsJSONFor is stringsFor(lang) escaped as JSON for a script element.
func stringsJSONFor(lang string) template.JS {
	if s, ok := stringsJSON()[lang]; ok {
		return s
	}
	return stringsJSON()["en"]
}

// stringsFor returns the UI strings for lang, falling back to English.
func stringsFor(lang string) Strings {
	if s, ok := uiStrings[lang]; ok {
		return s
	}
	return uiStrings["en"]
}

// UIStrings returns a copy of the UI strings for lang (English when the
// site has none for it): what a test compares a page's visible text with.
func UIStrings(lang string) Strings {
	out := Strings{}
	for k, v := range stringsFor(lang) {
		out[k] = v
	}
	return out
}
