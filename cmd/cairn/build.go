package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/site"
)

const buildExamples = `  # Build content/ into public/
  cairn build

  # In CI: warnings (another tool's front-matter keys, no front matter) fail too
  cairn build --strict

  # Build another folder for a deployment at its public URL
  cairn build --content runbooks --out dist --base-url https://docs.example.org/`

// siteFlags are the flags build and serve share.
type siteFlags struct {
	content, theme, baseURL, editURL, config string
	minify                                   bool
}

func (f *siteFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&f.content, "content", "content", "folder of runbooks (.md)")
	fs.StringVar(&f.theme, "theme", "", "theme folder with layouts/ and assets/ (default: the embedded theme)")
	fs.StringVar(&f.baseURL, "base-url", "", "absolute URL the site is served at, for sitemap.xml (default http://127.0.0.1:1313/)")
	fs.StringVar(&f.editURL, "edit-url", "", "\"edit this page\" link: a URL with {path}, the runbook's path in the content folder (e.g. https://github.com/ORG/REPO/edit/main/content/{path})")
	fs.BoolVar(&f.minify, "minify", true, "minify the theme's CSS and JavaScript (--minify=false keeps them as written, to debug a theme)")
	fs.StringVar(&f.config, "config", "", "site configuration (title, base_url, edit_url, lang, raw_html; default: "+site.ConfigFile+" here, if there is one); flags override it")
}

// siteConfig reads --config, or cairn.yaml in the current folder when it
// exists.
func (f *siteFlags) siteConfig() (site.Config, error) {
	path := f.config
	if path == "" {
		if _, err := os.Stat(site.ConfigFile); err != nil {
			return site.Config{}, nil
		}
		path = site.ConfigFile
	}
	c, err := site.LoadConfig(path)
	if err != nil {
		return c, &usageError{msg: err.Error()}
	}
	return c, nil
}

func (f *siteFlags) options(m *Main) (site.Options, error) {
	cfg, err := f.siteConfig()
	if err != nil {
		return site.Options{}, err
	}
	// Flags override the file.
	if f.baseURL == "" {
		f.baseURL = cfg.BaseURL
	}
	if f.editURL == "" {
		f.editURL = cfg.EditURL
	}
	opts := site.Options{Content: f.content, BaseURL: f.baseURL, EditURL: f.editURL, Title: cfg.Title, Lang: cfg.Lang, RawHTML: cfg.RawHTML,
		NoMinify: !f.minify}
	if f.editURL != "" {
		if u, err := url.Parse(f.editURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.Contains(f.editURL, "{path}") {
			return opts, &usageError{msg: fmt.Sprintf("--edit-url %q: want an http(s) URL holding {path}, e.g. https://github.com/ORG/REPO/edit/main/content/{path}", f.editURL)}
		}
	}
	if fi, err := os.Stat(f.content); err != nil || !fi.IsDir() {
		return opts, &usageError{msg: fmt.Sprintf("--content %s: not a folder", f.content)}
	}
	if f.theme != "" {
		if _, err := os.Stat(filepath.Join(f.theme, "layouts", "base.html")); err != nil {
			return opts, &usageError{msg: fmt.Sprintf("--theme %s: no layouts/base.html there", f.theme)}
		}
		opts.Theme = os.DirFS(f.theme)
	}
	return opts, nil
}

func runBuild(ctx context.Context, m *Main, args []string) error {
	flags := newFlagSet(m, "build", "build [--content DIR] [--out DIR] [--theme DIR] [--base-url URL]", buildExamples)
	var sf siteFlags
	sf.register(flags)
	out := flags.String("out", "public", "output folder (replaced as a whole when the build succeeds)")
	quiet := flags.Bool("quiet", false, "print only errors")
	strict := flags.Bool("strict", false, "fail on warnings too (unknown front-matter keys, files without front matter): for CI")
	if err := parseFlags(flags, args); err != nil {
		return done(err)
	}
	if flags.NArg() > 0 {
		return &usageError{cmd: "build", msg: fmt.Sprintf("unexpected argument %q", flags.Arg(0))}
	}
	opts, err := sf.options(m)
	if err != nil {
		return err
	}
	if err := safeOutDir(*out, sf.content); err != nil {
		return err
	}
	if !*quiet {
		opts.Progress = m.Stderr
		fmt.Fprintf(m.Stderr, "building %s → %s\n", sf.content, *out)
	}
	b, err := site.New(opts)
	if err != nil {
		return err
	}
	// Pages go to disk as they are rendered, into a sibling folder that
	// replaces --out only when the whole site is there.
	w, err := site.NewDirWriter(*out)
	if err != nil {
		return err
	}
	res, err := b.BuildTo(ctx, w, *strict)
	if err == nil {
		err = reportProblems(m, res, fmt.Sprintf("build failed: %%s; %s left as it was", *out), *strict)
	}
	if err != nil {
		_ = w.Abort()
		return err
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if !*quiet {
		fmt.Fprintf(m.Stderr, "built %s, %s in %d ms (%s)\n",
			count(res.Pages, "runbook"), count(res.Steps, "step"), res.Duration.Milliseconds(), count(res.Written, "file"))
	}
	return nil
}

// safeOutDir refuses output folders that would swallow the sources.
func safeOutDir(out, content string) error {
	absOut, err1 := filepath.Abs(out)
	absContent, err2 := filepath.Abs(content)
	wd, err3 := os.Getwd()
	if err := firstErr(err1, err2, err3); err != nil {
		return err
	}
	if absOut == wd || absOut == filepath.Dir(absOut) || strings.HasPrefix(absContent+string(filepath.Separator), absOut+string(filepath.Separator)) {
		return &usageError{cmd: "build", msg: fmt.Sprintf("--out %s would replace the sources; choose a separate folder such as public", out)}
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		// Only replace folders that look like a previous build (or are empty).
		entries, _ := os.ReadDir(out)
		if len(entries) > 0 {
			if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil {
				return &usageError{cmd: "build", msg: fmt.Sprintf("--out %s exists and is not a cairn site (no index.html); refusing to replace it", out)}
			}
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// buildSite builds the site; problems in runbooks are printed, followed by
// failMsg (with %s for their number: "2 problems"), and end the command.
//
// Warnings are printed too; with strict they count as problems.
func buildSite(ctx context.Context, m *Main, opts site.Options, failMsg string, strict bool) (*site.Result, error) {
	b, err := site.New(opts)
	if err != nil {
		return nil, err
	}
	res, err := b.Build(ctx)
	if err != nil {
		return nil, err
	}
	if err := reportProblems(m, res, failMsg, strict); err != nil {
		return nil, err
	}
	return res, nil
}

// reportProblems prints a build's warnings and problems; with problems (or,
// with strict, warnings) it prints failMsg and ends the command.
func reportProblems(m *Main, res *site.Result, failMsg string, strict bool) error {
	for _, d := range res.Warnings {
		fmt.Fprintln(m.Stderr, d.String())
	}
	problems := len(res.Diagnostics)
	if strict {
		problems += len(res.Warnings)
	}
	if problems > 0 {
		for _, d := range res.Diagnostics {
			fmt.Fprintln(m.Stderr, d.String())
		}
		msg := count(problems, "problem")
		if strict && len(res.Warnings) > 0 {
			msg += " (warnings count: --strict)"
		}
		fmt.Fprintf(m.Stderr, failMsg+"\n", msg)
		return errSilent
	}
	return nil
}
