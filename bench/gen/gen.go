// Package gen writes synthetic Cairn runbooks for benchmarks: front matter
// with typed parameters, about ten steps each with highlighted bash and YAML
// blocks that reference those parameters, expected-output blocks,
// admonitions, tabs, tables and lists, in Korean or English prose.
//
// Output is deterministic: runbook i depends only on the seed and i, so the
// first hundred files are the same whether a thousand or ten are written.
package gen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Options say how many runbooks to write and what they hold.
type Options struct {
	N     int    // runbooks (default 1000)
	Steps int    // steps per runbook (default 10)
	Seed  uint64 // default 1
}

func (o Options) withDefaults() Options {
	if o.N <= 0 {
		o.N = 1000
	}
	if o.Steps <= 0 {
		o.Steps = 10
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// Name is the file name of runbook i.
func Name(i int) string { return fmt.Sprintf("bench-%04d.md", i) }

// Generate writes opts.N runbooks into dir (created if needed) and returns
// their paths in order.
func Generate(dir string, opts Options) ([]string, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	paths := make([]string, opts.N)
	for i := range opts.N {
		p := filepath.Join(dir, Name(i))
		if err := os.WriteFile(p, Runbook(i, opts), 0o644); err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		paths[i] = p
	}
	return paths, nil
}

// Runbook returns the Markdown of runbook i.
func Runbook(i int, opts Options) []byte {
	opts = opts.withDefaults()
	g := &writer{r: rand.New(rand.NewPCG(opts.Seed, uint64(i))), i: i, ko: i%2 == 0}
	g.runbook(opts.Steps)
	return []byte(g.b.String())
}

type writer struct {
	b     strings.Builder
	r     *rand.Rand
	i     int
	ko    bool
	block int // executable blocks so far
}

func (g *writer) p(format string, args ...any) { fmt.Fprintf(&g.b, format, args...) }

func (g *writer) pick(s []string) string { return s[g.r.IntN(len(s))] }

// lang returns the Korean or the English text.
func (g *writer) lang(ko, en string) string {
	if g.ko {
		return ko
	}
	return en
}

var (
	subjectsKo = []string{"노드 풀", "인그레스 컨트롤러", "etcd 클러스터", "CoreDNS", "메트릭 서버", "로그 수집기", "인증서", "스토리지 클래스", "네트워크 정책", "Cilium 에이전트"}
	subjectsEn = []string{"node pool", "ingress controller", "etcd cluster", "CoreDNS", "metrics server", "log shipper", "certificates", "storage class", "network policy", "Cilium agent"}
	verbsKo    = []string{"업그레이드하기", "교체하기", "점검하기", "복구하기", "확장하기", "이관하기"}
	verbsEn    = []string{"Upgrade the", "Replace the", "Check the", "Restore the", "Scale the", "Migrate the"}
	stepsKo    = []string{"현재 상태 확인", "설정 백업", "매니페스트 적용", "롤아웃 대기", "노드 비우기", "구성 파일 배포", "서비스 재시작", "결과 검증", "임시 리소스 정리", "모니터링 확인", "버전 확인", "권한 점검"}
	stepsEn    = []string{"Check the current state", "Back up the configuration", "Apply the manifest", "Wait for the rollout", "Drain the node", "Distribute the config file", "Restart the service", "Verify the result", "Clean up temporary resources", "Check monitoring", "Check versions", "Review permissions"}
	proseKo    = []string{
		"이 단계에서는 클러스터의 현재 상태를 확인하고, 이후 단계에서 비교할 기준값을 남깁니다.",
		"명령은 관리용 PC에서 실행하며 `kubectl`이 올바른 컨텍스트를 가리키는지 먼저 확인하세요.",
		"작업 중에는 **트래픽이 끊기지 않도록** 한 번에 한 노드씩 진행합니다.",
		"결과가 기대와 다르면 다음 단계로 넘어가지 말고 [문제 해결](#troubleshooting) 절을 참고하세요.",
		"매니페스트의 `replicas` 값은 파라미터에서 채워지며, 네임스페이스도 같은 방식으로 지정됩니다.",
		"이 명령은 여러 번 실행해도 안전합니다. 이미 적용된 변경은 그대로 유지됩니다.",
		"노드마다 `systemctl status`로 서비스가 `active (running)` 상태인지 확인합니다.",
		"백업 파일은 `/var/backups` 아래에 날짜와 함께 저장되므로 롤백할 때 그대로 쓸 수 있습니다.",
	}
	proseEn = []string{
		"This step records the current state of the cluster so that later steps can compare against it.",
		"Run the commands on your workstation, and first make sure `kubectl` points at the right context.",
		"Go **one node at a time** so that traffic keeps flowing while you work.",
		"If the result is not what you expect, stop here and read the [troubleshooting](#troubleshooting) section.",
		"The manifest takes `replicas` from the parameters, and the namespace the same way.",
		"The command is safe to run more than once; changes that are already applied stay as they are.",
		"On every node, check with `systemctl status` that the service is `active (running)`.",
		"Backups go under `/var/backups` with a date stamp, so a rollback can use them as they are.",
	}
	notesKo = []string{"이 작업은 되돌리기 어렵습니다. 백업을 먼저 확인하세요.", "에어갭 환경이라면 이미지를 미리 가져와 두어야 합니다.", "`DRY_RUN`을 켜면 실제로 바꾸지 않고 차이만 보여 줍니다."}
	notesEn = []string{"This is hard to undo. Check the backup first.", "On an air-gapped site, pull the images beforehand.", "With `DRY_RUN` on, nothing changes; you only see the diff."}
)

func (g *writer) runbook(steps int) {
	subj := g.r.IntN(len(subjectsKo))
	verb := g.r.IntN(len(verbsKo))
	title := g.lang(fmt.Sprintf("%s %s %d", subjectsKo[subj], verbsKo[verb], g.i),
		fmt.Sprintf("%s %s %d", verbsEn[verb], subjectsEn[subj], g.i))
	g.p("---\n")
	g.p("title: %q\n", title)
	g.p("lang: %s\n", g.lang("ko", "en"))
	g.p("summary: %q\n", g.lang("합성 벤치마크 런북입니다. "+subjectsKo[subj]+"를 단계별로 다룹니다.",
		"A synthetic benchmark runbook that walks through the "+subjectsEn[subj]+" step by step."))
	g.p("tags: [bench, %s, %s]\n", strings.ReplaceAll(subjectsEn[subj], " ", "-"), g.pick([]string{"upgrade", "backup", "network", "storage"}))
	g.p("duration: %dm\n", 15+g.r.IntN(8)*5)
	g.p("weight: %d\n", g.i)
	g.p("kube:\n  contexts: [cairn-sandbox, \"bench-*\"]\n")
	g.p(`params:
  - name: NAMESPACE
    title: %s
    description: %s
    type: string
    default: app-%d
    pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'
  - name: NODE_HOSTS
    title: %s
    type: hosts
    group: workers
    default: "node0 node1 node2"
  - name: POD_CIDR
    type: cidr
    default: 10.%d.0.0/16
  - name: REPLICAS
    type: int
    default: %d
  - name: MODE
    type: enum
    values: [rolling, recreate]
    default: rolling
  - name: DRY_RUN
    type: bool
    default: false
`, g.lang("네임스페이스", "Namespace"), g.lang("작업 대상 워크로드가 있는 네임스페이스입니다.", "The namespace of the workload."),
		g.i, g.lang("작업할 노드", "Nodes to work on"), g.i%250, 2+g.r.IntN(4))
	g.p("---\n\n")
	g.paragraph(2)
	g.p("\n")
	tabsAt := 1 + g.r.IntN(steps)
	for s := range steps {
		g.step(s, s == tabsAt)
	}
	g.p("## %s {#troubleshooting}\n\n", g.lang("문제 해결", "Troubleshooting"))
	g.paragraph(1)
	g.p("\n| %s | %s |\n| --- | --- |\n", g.lang("증상", "symptom"), g.lang("조치", "fix"))
	for range 3 {
		g.p("| `%s` | %s |\n", g.pick([]string{"CrashLoopBackOff", "ImagePullBackOff", "Pending", "connection refused"}),
			g.lang("로그를 확인하고 다시 시도합니다", "read the logs and retry"))
	}
}

func (g *writer) paragraph(sentences int) {
	for range sentences {
		g.p("%s ", g.pick(g.prose()))
	}
	g.p("%s\n", g.pick(g.prose()))
}

func (g *writer) prose() []string {
	if g.ko {
		return proseKo
	}
	return proseEn
}

func (g *writer) step(s int, tabs bool) {
	title := g.lang(stepsKo[(g.i+s)%len(stepsKo)], stepsEn[(g.i+s)%len(stepsEn)])
	id := fmt.Sprintf("step-%d", s+1)
	switch {
	case s%5 == 4:
		g.p("## %s {#%s when='MODE == \"rolling\"'}\n\n", title, id)
	default:
		g.p("## %s {#%s}\n\n", title, id)
	}
	g.paragraph(1 + g.r.IntN(2))
	g.p("\n")
	if g.r.IntN(3) == 0 {
		for k := range 3 {
			g.p("- %s `%s-%d`\n", g.lang("대상:", "Target:"), g.pick([]string{"node", "pod", "svc"}), k)
		}
		g.p("\n")
	}
	if s%3 == 1 {
		kind := g.pick([]string{"note", "tip", "caution", "warning"})
		g.p("::: %s\n%s\n:::\n\n", kind, g.pick(g.lang2(notesKo, notesEn)))
	}
	if tabs {
		g.tabs(id)
		return
	}
	g.bash(id)
	if s%2 == 0 {
		g.yaml(id)
	}
	if g.r.IntN(4) == 0 {
		g.p("### %s\n\n", g.lang("확인", "Verify"))
		g.paragraph(0)
		g.p("\n")
		g.bashDisplay()
	}
}

func (g *writer) lang2(ko, en []string) []string {
	if g.ko {
		return ko
	}
	return en
}

func (g *writer) nextID(step, what string) string {
	g.block++
	return fmt.Sprintf("%s-%s-%d", step, what, g.block)
}

// bash writes an executable bash block with parameter references and
// sometimes an expected-output block after it.
func (g *writer) bash(step string) {
	id := g.nextID(step, "run")
	var attrs string
	switch g.r.IntN(3) {
	case 0:
		attrs = fmt.Sprintf(`{#%s target=local expect.contains="ok"}`, id)
	case 1:
		attrs = fmt.Sprintf(`{#%s target=ssh hosts=NODE_HOSTS sudo=true timeout=10m expect.contains="ok"}`, id)
	default:
		attrs = fmt.Sprintf(`{#%s target=kube retries=6 interval=5s expect.match='ready=\d+' expect.contains="ok"}`, id)
	}
	g.p("```bash %s\n", attrs)
	g.p("set -euo pipefail\n")
	g.p("# %s\n", g.lang("대상 네임스페이스와 레플리카 수를 확인합니다", "check the namespace and the replica count"))
	g.p("echo \"namespace=$NAMESPACE replicas=${REPLICAS} mode=$MODE\"\n")
	g.p("if [ \"$DRY_RUN\" = true ]; then\n  flags=\"--dry-run=server\"\nelse\n  flags=\"\"\nfi\n")
	for k := range 2 + g.r.IntN(4) {
		switch (k + g.r.IntN(4)) % 4 {
		case 0:
			g.p("kubectl -n \"$NAMESPACE\" get deploy,sts,ds -o wide $flags\n")
		case 1:
			g.p("for host in $NODE_HOSTS; do\n  ssh \"$host\" 'systemctl is-active kubelet' | grep -q active && echo \"$host ok\"\ndone\n")
		case 2:
			g.p("ready=$(kubectl -n \"${NAMESPACE}\" get pods --field-selector=status.phase=Running -o name | wc -l)\necho \"ready=$ready\"\n")
		default:
			g.p("ip route | awk '$1 ~ /^10\\./ {print $1}' | sort -u > /tmp/routes-%d.txt\ngrep -c . /tmp/routes-%d.txt || true\n", g.block, g.block)
		}
	}
	g.p("echo ok\n```\n\n")
	if g.r.IntN(3) == 0 {
		g.p("```text {expected=%s match=similar}\nnamespace=<ns> replicas=<n> mode=<mode>\n...\nok\n```\n\n", id)
	}
}

func (g *writer) bashDisplay() {
	g.p("```bash\nkubectl -n \"$NAMESPACE\" get events --sort-by=.lastTimestamp | tail -n 20\njournalctl -u kubelet --since \"-10m\" --no-pager | grep -i error || echo clean\n```\n\n")
}

// yaml writes a manifest: applied through the API, or display-only.
func (g *writer) yaml(step string) {
	if g.r.IntN(2) == 0 {
		g.p("```yaml {#%s target=kube action=apply namespace=\"${NAMESPACE}\"}\n", g.nextID(step, "apply"))
	} else {
		g.p("```yaml {title=\"deployment.yaml\"}\n")
	}
	g.p(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: bench-%d
  namespace: ${NAMESPACE}
  labels:
    app.kubernetes.io/name: bench-%d
    app.kubernetes.io/part-of: cairn-bench
spec:
  replicas: ${REPLICAS}
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  selector:
    matchLabels:
      app.kubernetes.io/name: bench-%d
  template:
    metadata:
      labels:
        app.kubernetes.io/name: bench-%d
    spec:
      containers:
        - name: web
          image: registry.example/bench/web:1.%d.0
          ports:
            - containerPort: 8080
          readinessProbe:
            httpGet: {path: /healthz, port: 8080}
            periodSeconds: 5
          resources:
            requests: {cpu: 100m, memory: 64Mi}
`, g.i, g.i, g.i, g.i, g.r.IntN(30))
	g.p("```\n\n")
}

func (g *writer) tabs(step string) {
	g.p(":::: tabs {param=MODE}\n")
	for _, v := range []string{"rolling", "recreate"} {
		g.p("::: tab %s {value=%s}\n", v, v)
		g.paragraph(0)
		g.p("\n```bash {#%s target=kube expect.contains=\"ok\"}\nkubectl -n \"$NAMESPACE\" rollout restart deploy/bench-%d\nkubectl -n \"$NAMESPACE\" rollout status deploy/bench-%d --timeout=5m && echo ok\n```\n:::\n",
			g.nextID(step, v), g.i, g.i)
	}
	g.p("::::\n\n")
}
