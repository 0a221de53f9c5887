package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/internal/httpguard"
	"github.com/cairn-dev/cairn/runbook"
)

const daemonExamples = `  # Let the deployed site https://runbooks.example.org run steps on this machine
  cairn daemon --allow-origin https://runbooks.example.org

  # Another port and content folder, against the sandbox
  cairn daemon --listen 127.0.0.1:7799 --content runbooks --sandbox yes`

func runDaemon(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "daemon", "daemon [--listen ADDR] [--content DIR] [--allow-origin URL ...] [executor flags]", daemonExamples)
	listen := flags.String("listen", "127.0.0.1:7788", "address to listen on (loopback only unless --allow-remote)")
	content := flags.String("content", "content", "folder of runbooks: the daemon runs only blocks it loaded from here")
	var origins stringList
	flags.Var(&origins, "allow-origin", "page origin allowed to call the executor, e.g. https://runbooks.example.org (repeatable)")
	allowRemote := flags.Bool("allow-remote", false, "allow a non-loopback --listen address (every request still needs the token)")
	var ef execFlags
	ef.register(flags)
	var tf termFlags
	tf.register(flags)
	if err := parseFlags(flags, args); err != nil {
		return done(err)
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		return &usageError{cmd: "daemon", msg: fmt.Sprintf("--listen %q: %v", *listen, err)}
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && !*allowRemote {
		return &usageError{cmd: "daemon", msg: fmt.Sprintf("--listen %s is not a loopback address; add --allow-remote if you really mean it", *listen)}
	}
	for _, o := range origins {
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || u.Path != "" && u.Path != "/" {
			return &usageError{cmd: "daemon", msg: fmt.Sprintf("--allow-origin %q: give scheme://host[:port], e.g. https://runbooks.example.org", o)}
		}
	}
	set, err := runbook.LoadDir(*content)
	if err != nil {
		if ds := runbook.AllDiagnostics(err); len(ds) > 0 {
			for _, d := range ds {
				fmt.Fprintln(m.Stderr, d.String())
			}
			fmt.Fprintln(m.Stderr, "daemon: runbooks with problems are not loaded until fixed")
		} else {
			return err
		}
	}
	st := &daemon.Store{}
	st.Set(daemon.Loaded(set, err))
	x, err := openExecutor(ctx, &ef, *content)
	if err != nil {
		return err
	}
	defer x.Close()
	for _, n := range x.Notes {
		fmt.Fprintf(m.Stderr, "executor: %s\n", n)
	}
	d := &daemon.Server{Content: st, Token: daemon.NewToken(), AllowOrigins: origins, Version: Version}
	say := func(line string) { fmt.Fprintf(m.Stderr, "executor: %s\n", line) }
	x.Wire(d, say)
	if tf.on {
		x.WireTerminals(d, tf.max, tf.grace, nil)
	}
	x.Follow(ctx, say)
	x.SweepNodePods(ctx, say)
	if ef.Sandbox == "start" {
		x.StartSandbox(ctx, say)
	}
	defer d.Close()
	d.OnRecord = func(rb *runbook.Runbook, rec *executor.Record) {
		if rec.Status == executor.StatusVerified && (ef.writeBack || rb.Meta.WriteBack) {
			writeBack(m.Stderr, st, x.Engine.Journal, rb, rec)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another daemon running? try --listen 127.0.0.1:7799)", *listen, err)
	}
	srv := &http.Server{Handler: d.Handler()}
	httpguard.Harden(srv, httpguard.Limits{})
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(m.Stderr, "executor listening on %s with %s\n", base, count(len(st.Runbooks()), "runbook"))
	frag := "#cairn-executor=" + url.QueryEscape(base) + "&cairn-token=" + d.Token
	if len(origins) == 0 {
		fmt.Fprintf(m.Stderr, "no --allow-origin given: only clients without an Origin (the CLI, curl) can use it\ntoken: %s\n", d.Token)
	}
	for _, o := range origins {
		fmt.Fprintf(m.Stderr, "pair a browser by opening %s/%s\n", strings.TrimSuffix(o, "/"), frag)
	}
	go daemon.Watch(ctx, *content, st, m.Stderr)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
