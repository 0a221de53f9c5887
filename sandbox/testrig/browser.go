package testrig

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairn-dev/cairn/sandbox"
)

// chromiumFlags are the flags Chromium runs with here: headless, as root
// (--no-sandbox), and with every background connection off, since this
// machine's network is closed.
var chromiumFlags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// Browser starts a headless Chromium with a fresh profile for t and returns
// a chromedp context for it; the browser stops at t's cleanup. Values come
// back from chromedp.Run:
//
//	ctx := testrig.Browser(t)
//	err := chromedp.Do(ctx, chromedp.Navigate(url))
//	title, err := chromedp.Run(ctx, chromedp.Title())
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := chromiumPath(t)
	return startBrowser(t, path, path)
}

// OfflineBrowser is Browser in a network namespace of its own with no
// network at all (not even loopback is up): what a page loads from file://
// there proves it needs no network. chromedp talks to it over
// --remote-debugging-pipe, since no TCP port can reach it. It needs root and
// unshare; like every rig component it fails under CI=true when missing.
func OfflineBrowser(t testing.TB) context.Context {
	t.Helper()
	path := chromiumPath(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		unavailable(t, "a network namespace for Chromium (root and unshare)", fmt.Errorf("euid %d, unshare: %v", os.Geteuid(), err))
	}
	wrapper := filepath.Join(t.TempDir(), "chromium-offline")
	script := "#!/bin/sh\nexec " + unshare + " --net -- " + path + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return startBrowser(t, wrapper, path+" in a network namespace", chromedp.Flag("remote-debugging-pipe", true))
}

// chromiumPath finds Chromium, or skips (fails under CI) when it is missing
// or the test runs with -short.
func chromiumPath(t testing.TB) string {
	t.Helper()
	if testing.Short() && !InCI() {
		t.Skip("testrig: no browser under -short")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	unavailable(t, "headless Chromium", &sandbox.MissingError{Name: "chromium", Where: "PATH", Install: "apt-get install -y chromium"})
	return ""
}

// startBrowser launches exe (Chromium or a wrapper of it; name says which
// in errors) with the rig's flags and a fresh profile.
func startBrowser(t testing.TB, exe, name string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	// TMPDIR too: Chromium makes its singleton socket's directory there
	// and leaves it behind when it is killed, as it is at cleanup. Not
	// t.TempDir(): a subtest's name makes that path longer than a Unix
	// socket's 108 bytes, and Chromium then exits at once.
	tmp, err := os.MkdirTemp("", "cairn-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.UserDataDir(t.TempDir()), chromedp.Env("TMPDIR=" + tmp)}
	for _, f := range chromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	opts = append(opts, extra...)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser process to exit
	})
	// Start the browser now, so that a failure is reported here. The first
	// run on ctx owns the browser: a context derived with a timeout would
	// close it when it expires, so the bound is a timer instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	// A hang guard, not a timing: CI starts browsers beside the node tests
	// on two cores, where 30 s was once not enough.
	const startIn = 2 * time.Minute
	timer := time.NewTimer(startIn)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			unavailable(t, "headless Chromium ("+name+")", err)
		}
	case <-timer.C:
		cancel()
		<-started
		t.Fatalf("testrig: headless Chromium (%s) did not start in %s", name, startIn)
	}
	return ctx
}
