package testrig

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Page drives one page of cairn serve in the rig's Chromium. A failure
// shows what state (JavaScript returning a string) says about the page
// and what the server printed (out).
type Page struct {
	t     testing.TB
	bctx  context.Context // the browser (for the state after a timeout)
	ctx   context.Context // bounded: every action of the test
	state string
	out   fmt.Stringer
}

// NewPage bounds every action on bctx (from Browser) by timeout, until t
// ends.
func NewPage(t testing.TB, bctx context.Context, timeout time.Duration, out fmt.Stringer, state string) *Page {
	ctx, cancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancel)
	return &Page{t: t, bctx: bctx, ctx: ctx, state: state, out: out}
}

// Fail fails the test with what went wrong, the page's state and what the
// server printed.
func (p *Page) Fail(what string, err error) {
	p.t.Helper()
	state, _ := chromedp.Run(p.bctx, chromedp.Evaluate[string](p.state))
	p.t.Fatalf("%s: %v\npage: %s\nserve said:\n%s", what, err, state, p.out.String())
}

// Poll waits up to d for js to be true.
func (p *Page) Poll(what, js string, d time.Duration) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool]("!!("+js+")", chromedp.WithPollingTimeout(d))); err != nil {
		p.Fail("waiting until "+what, err)
	}
}

// Eval is the string js evaluates to.
func (p *Page) Eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.Fail(js, err)
	}
	return v
}

// Run runs actions, failing with what when one fails.
func (p *Page) Run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Steps(actions...)); err != nil {
		p.Fail(what, err)
	}
}

// Screenshot writes the page as it is now, at 1280×900, to file.
func (p *Page) Screenshot(file string) {
	p.t.Helper()
	p.Run("viewport for a screenshot", chromedp.EmulateViewport(1280, 900), chromedp.Sleep(300*time.Millisecond))
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.Fail("screenshot", err)
	}
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
