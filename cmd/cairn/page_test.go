package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// testPage drives one page of cairn serve in the rig's Chromium. A failure
// shows what state says about the page and what serve printed.
type testPage struct {
	t     *testing.T
	bctx  context.Context // the browser (for the state after a timeout)
	ctx   context.Context // bounded: every action of the test
	state string          // JavaScript returning a string: the page's state
	out   *syncBuffer     // what serve printed
}

// newTestPage bounds every action on bctx by timeout, until t ends.
func newTestPage(t *testing.T, bctx context.Context, timeout time.Duration, out *syncBuffer, state string) *testPage {
	ctx, cancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancel)
	return &testPage{t: t, bctx: bctx, ctx: ctx, state: state, out: out}
}

func (p *testPage) fail(what string, err error) {
	p.t.Helper()
	state, _ := chromedp.Run(p.bctx, chromedp.Evaluate[string](p.state))
	p.t.Fatalf("%s: %v\npage: %s\nserve said:\n%s", what, err, state, p.out.String())
}

// poll waits up to d for js to be true.
func (p *testPage) poll(what, js string, d time.Duration) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool]("!!("+js+")", chromedp.WithPollingTimeout(d))); err != nil {
		p.fail("waiting until "+what, err)
	}
}

func (p *testPage) eval(js string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		p.fail(js, err)
	}
	return v
}

func (p *testPage) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Steps(actions...)); err != nil {
		p.fail(what, err)
	}
}
