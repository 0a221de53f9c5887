package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/executor/daemon"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/site"
)

const serveExamples = `  # Serve content/ on http://127.0.0.1:1313 with live reload and the executor
  cairn serve

  # Start the sandbox in the background if none runs (what make run does)
  cairn serve --sandbox=start --sandbox-build scripts/sandbox-bins.sh

  # Against the local sandbox, writing verified output back into the Markdown
  cairn sandbox up && cairn serve --write-back

  # With terminals on the page (a shell here or on a runbook's hosts)
  cairn serve --terminal

  # Another port, content folder and cluster context
  cairn serve --port 8080 --content runbooks --context staging`

func runServe(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "serve", "serve [--port N] [--content DIR] [--theme DIR] [executor flags]", serveExamples)
	var sf siteFlags
	sf.register(flags)
	var ef execFlags
	ef.register(flags)
	var tf termFlags
	tf.register(flags)
	port := flags.Int("port", 1313, "port on 127.0.0.1 (the next free one is used if it is taken)")
	noExec := flags.Bool("no-executor", false, "serve the site only; Run buttons stay off")
	if err := parseFlags(flags, args); err != nil {
		return done(err)
	}
	if flags.NArg() > 0 {
		return &usageError{cmd: "serve", msg: fmt.Sprintf("unexpected argument %q", flags.Arg(0))}
	}
	if *port < 0 || *port > 65535 {
		return &usageError{cmd: "serve", msg: fmt.Sprintf("--port %d: not a port", *port)}
	}
	opts, err := sf.options(m)
	if err != nil {
		return err
	}
	opts.Dev = true
	sopts := site.ServerOptions{Addr: fmt.Sprintf("127.0.0.1:%d", *port), ThemeDir: sf.theme, Log: m.Stderr}

	var d *daemon.Server
	st := &daemon.Store{}
	var srv *site.Server
	if !*noExec {
		x, err := openExecutor(ctx, &ef, sf.content)
		if err != nil {
			return err
		}
		defer x.Close()
		for _, n := range x.Notes {
			fmt.Fprintf(m.Stderr, "executor: %s\n", n)
		}
		d = &daemon.Server{Content: st, Token: daemon.NewToken(), Version: Version}
		say := func(line string) { fmt.Fprintf(m.Stderr, "executor: %s\n", line) }
		x.Wire(d, say)
		x.Follow(ctx, say)
		x.SweepNodePods(ctx, say)
		if ef.Sandbox == "start" {
			x.StartSandbox(ctx, say)
		}
		defer d.Close()
		opts.Results = journalResults(x.Engine.Journal)
		d.OnRecord = func(rb *runbook.Runbook, rec *executor.Record) {
			if rec.Status == executor.StatusVerified && (ef.writeBack || rb.Meta.WriteBack) {
				// Written and re-rendered under the build lock: the watcher
				// then finds the file rendered and reloads no open page (a
				// reload would cut the streams of blocks still running).
				srv.RefreshAfter(ctx, []string{rb.Path}, func() { writeBack(m.Stderr, st, x.Engine.Journal, rb, rec) })
				return
			}
			srv.Refresh(ctx, []string{rb.Path}) // bake the result into the page
		}
		if tf.on {
			x.WireTerminals(d, tf.max, tf.grace, func(rec executor.Record) {
				if rec.Block != "" && rec.Path != "" {
					srv.Refresh(ctx, []string{rec.Path}) // bake "done by hand" into the page
				}
			})
		}
		sopts.API = d.Handler()
		sopts.OnUpdate = func(res *site.Result, err error) {
			if res != nil {
				st.Set(res.Runbooks)
			}
		}
		sopts.Ready = func(url string) {
			base := strings.TrimSuffix(url, "/")
			d.AllowOrigins = []string{base, strings.Replace(base, "127.0.0.1", "localhost", 1)}
			fmt.Fprintf(m.Stderr, "executor: pair this browser by opening %s#cairn-token=%s\n", url, d.Token)
		}
	}
	b, err := site.New(opts)
	if err != nil {
		return err
	}
	srv = site.NewServer(b, sopts)
	return srv.Run(ctx)
}
