package site

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
		"skip_to_content": "본문으로 건너뛰기", "prerequisites": "사전 준비", "duration": "예상 소요 시간",
		"tags": "태그", "not_applicable": "선택한 값에는 해당하지 않아요", "required": "필수",
		"invalid": "값이 올바르지 않아요", "note": "참고", "tip": "팁", "caution": "주의", "warning": "경고",
		"captures": "캡처", "expectations": "기대 결과", "all_runbooks": "모든 런북",
		"page_not_found": "페이지를 찾을 수 없어요", "back_home": "처음으로", "confirm_needed": "실행 전에 확인이 필요해요",
		"flag_confirm": "확인 필요", "secret": "비밀",
		"target_local": "이 컴퓨터에서 실행", "target_ssh": "SSH로 원격 호스트에서 실행",
		"target_kube": "쿠버네티스 API로 실행", "target_manual": "사람이 직접 하는 단계",
		"step_done_label": "%d단계 완료", "link_to_step": "이 단계로 가는 링크",
		"expect_exit": "종료 코드", "expect_any_exit": "종료 코드는 상관없음", "expect_contains": "출력에 포함:",
		"expect_not_contains": "출력에 없음:", "expect_match": "출력이 정규식과 일치:", "expect_jsonpath": "JSONPath 조건:",
		"expect_count": "객체 수:", "expect_wait": "조건이 될 때까지 대기:", "expect_similar": "예상 출력과 비슷해야 함",
		"runbooks": "런북", "index_intro": "단계별로 따라 하며 실행하고 검증하는 쿠버네티스 운영 런북이에요.",
		"minutes": "분", "step_count": "%d단계", "default": "기본값", "build_error": "런북에 문제가 있어요",
		"exec_connected": "실행기 연결됨", "exec_offline": "실행기에 연결할 수 없어요",
		"exec_not_paired": "실행기와 연결되지 않았어요. cairn serve가 출력한 연결 URL(#cairn-token=…)로 이 페이지를 여세요.",
		"run_not_paired":  "이 탭은 아직 실행기와 연결되지 않았어요: cairn serve(또는 cairn daemon)가 출력한 연결 URL을 여세요.",
		"run_unreachable": "실행기에 연결할 수 없어요",
		"run_static":      "실행하려면 cairn daemon --allow-origin으로 실행기를 켜고, 출력된 연결 URL로 이 페이지를 여세요.",
		"status_verified": "검증됨", "status_failed": "실패", "status_error": "오류", "status_cancelled": "취소됨",
		"status_skipped": "건너뜀", "status_running": "실행 중", "cancel": "취소",
		"writeback_failed": "Markdown에 기록하지 못했어요: ",
		"runs_on":          "실행할 호스트", "flag_timeout": "제한 시간", "flag_retries": "재시도",
		"for_example": "예:", "invalid_pattern": "형식이 맞지 않아요.", "invalid_int": "정수를 입력하세요.",
		"invalid_bool": "true 또는 false여야 해요.", "invalid_enum": "목록에서 고르세요.",
		"invalid_host":  "호스트 이름이나 IP 주소여야 해요(앞에 user@, 뒤에 :포트를 붙일 수 있어요).",
		"invalid_hosts": "공백이나 쉼표로 구분한 호스트 이름 또는 IP 주소여야 해요.",
		"invalid_cidr":  "10.0.0.0/16 같은 CIDR 프리픽스여야 해요.", "invalid_duration": "90s, 5m 같은 시간이어야 해요.",
	},
	"en": {
		"copy": "Copy", "copied": "Copied", "run": "Run", "mark_done": "Mark done",
		"run_disabled": "Start the local executor to run steps: cairn serve or cairn daemon",
		"search":       "Search", "search_placeholder": "Search runbooks (/)", "no_results": "No results",
		"params": "Parameters", "params_hint": "Values you enter fill in the commands below. Secret values are never stored.",
		"steps": "Steps", "progress": "Progress", "reset": "Reset progress", "reset_confirm": "Clear every ticked step?",
		"toc": "Steps on this page", "expected_output": "Expected output", "expected_output_checked": "Expected output (checked: similar)",
		"recorded_output": "Verified output", "theme_toggle": "Light/dark", "menu": "Menu",
		"skip_to_content": "Skip to content", "prerequisites": "Prerequisites", "duration": "Estimated time",
		"tags": "Tags", "not_applicable": "Does not apply to the chosen values", "required": "required",
		"invalid": "Invalid value", "note": "Note", "tip": "Tip", "caution": "Caution", "warning": "Warning",
		"captures": "Captures", "expectations": "Expectations", "all_runbooks": "All runbooks",
		"page_not_found": "Page not found", "back_home": "Back to the start", "confirm_needed": "Needs confirmation before it runs",
		"flag_confirm": "confirm", "secret": "secret",
		"target_local": "Runs on this machine", "target_ssh": "Runs on remote hosts over SSH",
		"target_kube": "Runs against the Kubernetes API", "target_manual": "A step a person does",
		"step_done_label": "Step %d done", "link_to_step": "Link to this step",
		"expect_exit": "Exit code", "expect_any_exit": "Any exit code", "expect_contains": "Output contains",
		"expect_not_contains": "Output lacks", "expect_match": "Output matches", "expect_jsonpath": "JSONPath holds",
		"expect_count": "Object count", "expect_wait": "Waits until", "expect_similar": "Output is similar to the expected output",
		"runbooks": "Runbooks", "index_intro": "Guided Kubernetes runbooks you follow step by step, run and verify.",
		"minutes": "min", "step_count": "%d steps", "default": "default", "build_error": "A runbook has problems",
		"exec_connected": "Executor connected", "exec_offline": "Executor not reachable",
		"exec_not_paired": "Not paired with the executor. Open the pairing URL (#cairn-token=…) that cairn serve printed.",
		"run_not_paired":  "This tab is not paired yet: open the pairing URL that cairn serve (or cairn daemon) printed.",
		"run_unreachable": "The executor is not reachable",
		"run_static":      "To run steps, start cairn daemon --allow-origin for this site and open the pairing URL it prints.",
		"status_verified": "verified", "status_failed": "failed", "status_error": "error", "status_cancelled": "cancelled",
		"status_skipped": "skipped", "status_running": "running", "cancel": "Cancel",
		"writeback_failed": "Not written back to the Markdown: ",
		"runs_on":          "Hosts it runs on", "flag_timeout": "timeout", "flag_retries": "retries",
		"for_example": "e.g.", "invalid_pattern": "Not in the expected form.", "invalid_int": "Enter a whole number.",
		"invalid_bool": "Must be true or false.", "invalid_enum": "Choose one from the list.",
		"invalid_host":  "A host name or IP address (optionally user@ before and :port after).",
		"invalid_hosts": "Host names or IP addresses, separated by spaces or commas.",
		"invalid_cidr":  "A CIDR prefix such as 10.0.0.0/16.", "invalid_duration": "A duration such as 90s or 5m.",
	},
}

// stringsFor returns the UI strings for lang, falling back to English.
func stringsFor(lang string) Strings {
	if s, ok := uiStrings[lang]; ok {
		return s
	}
	return uiStrings["en"]
}
