package testrig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// AxeVersion is the axe-core release the accessibility tests inject.
const AxeVersion = "4.11.0"

var (
	axeOnce sync.Once
	axeJS   []byte
	axeErr  error
)

// Axe is axe-core's axe.min.js, fetched once with npm from the npm
// registry into the user's cache (npm pack: no network address in the
// repo) and kept there. Without npm a test is skipped, in CI it fails:
// the machine's Node.js comes with npm.
func Axe(t testing.TB) []byte {
	t.Helper()
	axeOnce.Do(func() { axeJS, axeErr = fetchAxe() })
	if axeErr != nil {
		if InCI() {
			t.Fatalf("axe-core: %v", axeErr)
		}
		t.Skipf("axe-core: %v", axeErr)
	}
	return axeJS
}

func fetchAxe() ([]byte, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "cairn", "axe-core-"+AxeVersion)
	js := filepath.Join(dir, "package", "axe.min.js")
	if b, err := os.ReadFile(js); err == nil {
		return b, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return nil, fmt.Errorf("npm not found (Node.js's npm fetches axe-core): %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".axe-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, err
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), ".axe-"); err != nil {
			return nil, err
		}
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "pack", "axe-core@"+AxeVersion, "--pack-destination", tmp, "--silent")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("npm pack axe-core@%s: %v\n%s", AxeVersion, err, out)
	}
	tgz := filepath.Join(tmp, "axe-core-"+AxeVersion+".tgz")
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", tgz, "-C", tmp, "package/axe.min.js").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("unpack %s: %v\n%s", tgz, err, out)
	}
	os.Remove(tgz)
	// Whole or not at all: the folder appears once its file is there.
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(js); serr != nil {
			return nil, err
		}
	}
	return os.ReadFile(js)
}

// axeRun is JavaScript that runs axe-core (injected first) on the page for
// WCAG 2.1 A and AA and resolves with its violations as JSON: rule,
// impact, node count, up to three selectors and the first node's summary.
const axeRun = `axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}, resultTypes: ["violations"]})
  .then(function (r) { return JSON.stringify(r.violations.map(function (v) {
    return {id: v.id, impact: v.impact, n: v.nodes.length, target: v.nodes.slice(0, 3).map(function (n) { return n.target.join(" "); }),
      summary: (v.nodes[0] && v.nodes[0].failureSummary || "").split("\n").slice(0, 3).join(" ")};
  })); })`

// AxeViolation is one rule axe-core found broken.
type AxeViolation struct {
	ID, Impact, Summary string
	N                   int
	Target              []string
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s (%s): %d nodes, e.g. %s — %s", v.ID, v.Impact, v.N, strings.Join(v.Target, " | "), v.Summary)
}

// RunAxe injects axe-core (Axe's script) into the page of ctx and returns
// what it finds there as it is now (axeRun).
func RunAxe(ctx context.Context, js []byte) ([]AxeViolation, error) {
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](string(js)+";true")); err != nil {
		return nil, fmt.Errorf("inject axe-core: %w", err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("axe.run: %w", err)
	}
	var vs []AxeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		return nil, fmt.Errorf("axe.run's answer: %w", err)
	}
	return vs, nil
}

// Axe runs axe-core on the page as it is now and returns what it found.
func (p *Page) Axe() []AxeViolation {
	p.t.Helper()
	vs, err := RunAxe(p.ctx, Axe(p.t))
	if err != nil {
		p.Fail("axe-core", err)
	}
	return vs
}
