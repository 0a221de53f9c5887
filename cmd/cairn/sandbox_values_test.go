package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/executor/targets"
	"github.com/cairn-dev/cairn/internal/bundledtest"
	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

// valuesRunbook asks the sandbox for its load balancer, its login user and
// its node images (which a sandbox without nodes does not have).
const valuesRunbook = `---
title: Values
params:
  - name: LB
    type: host
    sandbox: lb-name
  - name: LB_PORT
    type: int
    default: 6443
    sandbox: lb-port
  - name: LOGIN
    default: ubuntu
    sandbox: ssh-user
  - name: IMAGES
    required: false
    sandbox: node-images
---

# Values

## 1. Echo {#echo-step}

` + "```bash {#echo target=local expect.contains=\"lb=\"}\necho \"lb=$LB:$LB_PORT login=$LOGIN images=$IMAGES\"\n```\n"

// TestSandboxFillsParameters: against the running sandbox (the shared full
// one: cluster, load balancer, SSH hosts), what the sandbox knows of itself
// fills a runbook's parameters. The page offers the values it has (not the
// node images: no nodes), one click fills them in, and the block runs with
// them; `cairn run --sandbox=yes` uses them where --param says nothing, and
// --param still wins.
func TestSandboxFillsParameters(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox and browser")
	}
	_, s := testrig.Full(t)
	bctx := testrig.Browser(t)
	sbDir := filepath.Dir(s.InventoryPath)
	st, err := sandbox.StatusOf(context.Background(), sbDir)
	if err != nil || st.LB == nil {
		t.Fatalf("the full sandbox in %s: %v (load balancer %v)", sbDir, err, st.LB)
	}
	lb := st.LB.Name + ":" + strconv.Itoa(st.LB.Port)
	want := "lb=" + lb + " login=" + s.Inventory.User + " images="
	t.Setenv(sandbox.EnvStateDir, sbDir)
	t.Setenv("KUBECONFIG", "")
	dir := contentDir(t, map[string]string{"values.md": valuesRunbook})

	base, token, stderr := startServe(t, "--content", dir, "--sandbox", "auto", "--journal", filepath.Join(t.TempDir(), "j.db"))
	pg := testrig.NewPage(t, bctx, 90*time.Second, stderr, `(document.querySelector("form.params")||{}).outerHTML + " | " + (document.getElementById("cairn-exec-status")||{}).textContent`)
	poll := func(what, js string) { t.Helper(); pg.Poll(what, js, 20*time.Second) }
	eval := pg.Eval
	pg.Run("open the page", chromedp.Navigate(base+"values/#cairn-token="+token))
	poll("the page offers the sandbox's values", `(function(){ var b = document.querySelector("form.params .params-sandbox"); return b && !b.hidden && !b.disabled; })()`)
	if got := eval(`document.querySelector("form.params .params-sandbox").textContent`); !strings.Contains(got, "(3)") {
		t.Errorf("button %q: want 3 values offered (no node images without nodes)", got)
	}
	title := eval(`document.querySelector("form.params .params-sandbox").title`)
	for _, w := range []string{"LB=" + st.LB.Name, "LB_PORT=" + strconv.Itoa(st.LB.Port), "LOGIN=" + s.Inventory.User} {
		if !strings.Contains(title, w) {
			t.Errorf("button title %q lacks %q", title, w)
		}
	}
	if strings.Contains(title, "IMAGES") {
		t.Errorf("a sandbox without nodes offered node images: %q", title)
	}
	pg.Run("click", chromedp.Click(chromedp.CSS(`form.params .params-sandbox`)))
	poll("the values are in the form", `document.querySelector("input[name=LB]").value === "`+st.LB.Name+`" && document.querySelector("input[name=LB_PORT]").value === "`+strconv.Itoa(st.LB.Port)+`" && document.querySelector("form.params .params-sandbox").disabled`)
	pg.Run("run", chromedp.Click(chromedp.CSS(`#block-echo .cb-run`)))
	poll("the block ran with them", `!!document.querySelector("#block-echo.cb-verified")`)
	if out := eval(`document.querySelector("#block-echo .cb-result pre").textContent`); !strings.Contains(out, want) {
		t.Errorf("the block printed %q, want %q", out, want)
	}
	// A value the reader changes is theirs: the button offers the sandbox's again.
	eval(`(function(){ var i = document.querySelector("input[name=LB]"); i.value = "lb.example.org"; i.dispatchEvent(new Event("input", {bubbles: true})); return ""; })()`)
	poll("the button is back", `!document.querySelector("form.params .params-sandbox").disabled`)

	// The terminal: the same values where --param says nothing.
	file := filepath.Join(dir, "values.md")
	journal := filepath.Join(t.TempDir(), "j.db")
	code, out, errOut := run(t, "run", file, "--content", dir, "--sandbox", "yes", "--journal", journal)
	if code != exitOK || !strings.Contains(out, want) {
		t.Errorf("cairn run --sandbox=yes: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "executor: from the sandbox: LB="+st.LB.Name+" LB_PORT="+strconv.Itoa(st.LB.Port)+" LOGIN="+s.Inventory.User+"\n") {
		t.Errorf("cairn run does not say which values came from the sandbox:\n%s", errOut)
	}
	code, out, errOut = run(t, "run", file, "--content", dir, "--sandbox", "yes", "--journal", journal, "--param", "LB=lb.example.org")
	if code != exitOK || !strings.Contains(out, "lb=lb.example.org:"+strconv.Itoa(st.LB.Port)+" ") || strings.Contains(errOut, "LB="+st.LB.Name) {
		t.Errorf("--param LB did not win over the sandbox: exit %d\n%s%s", code, out, errOut)
	}
	// Not against the sandbox: nothing from it, and LB is missing.
	code, _, errOut = run(t, "run", file, "--content", dir, "--sandbox", "no", "--journal", journal)
	if code == exitOK || strings.Contains(errOut, "from the sandbox") || !strings.Contains(errOut, "LB") {
		t.Errorf("cairn run --sandbox=no: exit %d\n%s", code, errOut)
	}
}

// TestBundledSandboxValuesValid: against a node sandbox, every bundled
// runbook parameter that asks the sandbox gets a value, and a valid one (a
// value its pattern refused would be dropped without a word).
func TestBundledSandboxValuesValid(t *testing.T) {
	st := sandbox.Status{Nodes: true, LB: &sandbox.LBInfo{Name: sandbox.LBName, Port: 41234},
		Inventory: &sandbox.Inventory{User: "cairn", IdentityFile: "/tmp/cairn-sandbox/ssh/id_ed25519",
			Hosts:     []sandbox.Host{{Name: "cp0"}, {Name: "w0"}},
			Groups:    map[string][]string{sandbox.GroupWorkers: {"w0"}},
			ImagesDir: "/root/.cache/cairn/sandbox/v1.37.2-etcd3.6.16/bin/images"}}
	facts := st.Facts()
	for _, file := range []string{"kubeadm-ha.md", "ccm-leader-migration.md", "cilium-multipool.md", "practice.md"} {
		rb := bundledtest.Parse(t, file)
		got := targets.Values(facts, rb)
		for _, p := range rb.Params {
			if p.Sandbox == "" {
				continue
			}
			v, ok := facts[p.Sandbox]
			if !ok {
				if p.Sandbox == sandbox.FactPreflightIgnore {
					continue // a cgroup v2 machine has nothing to ignore
				}
				t.Errorf("%s: param %s: a node sandbox has no fact %q", file, p.Name, p.Sandbox)
				continue
			}
			if got[p.Name] != v {
				t.Errorf("%s: param %s: sandbox value %q not offered (%v)", file, p.Name, v, p.Validate(v))
			}
		}
	}
}
