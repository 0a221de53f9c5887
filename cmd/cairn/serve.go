package main

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/site"
)

const serveExamples = `  # Serve content/ on http://127.0.0.1:1313 with live reload
  cairn serve

  # Another port and content folder
  cairn serve --port 8080 --content runbooks`

func runServe(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "serve", "serve [--port N] [--content DIR] [--theme DIR]", serveExamples)
	var sf siteFlags
	sf.register(flags)
	port := flags.Int("port", 1313, "port on 127.0.0.1 (the next free one is used if it is taken)")
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
	b, err := site.New(opts)
	if err != nil {
		return err
	}
	srv := site.NewServer(b, site.ServerOptions{
		Addr:     fmt.Sprintf("127.0.0.1:%d", *port),
		ThemeDir: sf.theme,
		Log:      m.Stderr,
	})
	return srv.Run(ctx)
}
