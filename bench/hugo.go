package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// ensureHugo returns a hugo binary and its version: bin when given, else the
// pinned version in the user cache, installed with go install if missing.
func ensureHugo(ctx context.Context, bin, version string, out io.Writer) (string, string, error) {
	if bin != "" {
		v, err := hugoVersionOf(ctx, bin)
		return bin, v, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", "", err
	}
	gobin := filepath.Join(cache, "cairn", "bench", "bin")
	bin = filepath.Join(gobin, "hugo")
	if v, err := hugoVersionOf(ctx, bin); err == nil && v == version {
		return bin, v, nil
	}
	fmt.Fprintf(out, "installing hugo %s into %s (go install; takes a few minutes once)\n", version, gobin)
	cmd := exec.CommandContext(ctx, "go", "install", "github.com/gohugoio/hugo@"+version)
	cmd.Dir = os.TempDir() // outside the main module: go.mod stays as it is
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOTOOLCHAIN=local")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go install hugo@%s: %w", version, err)
	}
	v, err := hugoVersionOf(ctx, bin)
	return bin, v, err
}

var hugoVersionRe = regexp.MustCompile(`\bv\d+\.\d+\.\d+\S*`)

func hugoVersionOf(ctx context.Context, bin string) (string, error) {
	b, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", err
	}
	v := hugoVersionRe.FindString(string(b))
	if v == "" {
		return "", fmt.Errorf("%s version: unexpected output %q", bin, b)
	}
	return strings.TrimSuffix(strings.SplitN(v, "+", 2)[0], "-DEV"), nil
}

// hugoConfig is a minimal site: Chroma with CSS classes (like Cairn), no
// taxonomy, term or RSS pages (Cairn renders none).
const hugoConfig = `baseURL = "http://127.0.0.1:1313/"
title = "Cairn bench"
disableKinds = ["taxonomy", "term", "rss"]

[markup.highlight]
noClasses = false
`

var hugoLayouts = map[string]string{
	"layouts/_default/single.html": `<!doctype html>
<html><head><meta charset="utf-8"><title>{{ .Title }}</title></head>
<body><main><h1>{{ .Title }}</h1>
{{ .Content }}
</main></body></html>
`,
	"layouts/_default/list.html": `<!doctype html>
<html><head><meta charset="utf-8"><title>{{ .Title }}</title></head>
<body><main><h1>{{ .Title }}</h1>
{{ .Content }}
<ul>{{ range .Pages }}<li><a href="{{ .RelPermalink }}">{{ .Title }}</a></li>{{ end }}</ul>
</main></body></html>
`,
}

// hugoSite writes a Hugo site with the same runbooks under content/.
func hugoSite(dir string, paths []string) error {
	_ = os.RemoveAll(dir)
	files := map[string][]byte{"hugo.toml": []byte(hugoConfig)}
	for name, body := range hugoLayouts {
		files[name] = []byte(body)
	}
	files["layouts/index.html"] = files["layouts/_default/list.html"]
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[filepath.Join("content", filepath.Base(p))] = forHugo(src)
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

var fenceAttrs = regexp.MustCompile("(?m)^(```+[A-Za-z0-9_+-]*) \\{.*\\}$")

// forHugo makes the two changes Hugo needs to build a Cairn runbook:
//   - the front matter key params becomes cairn_params: Hugo reserves params
//     for a map of page parameters and fails on Cairn's list;
//   - fence attributes are dropped, keeping the language: Hugo's attribute
//     parser fails on values such as timeout=10m or '…' strings.
//
// Everything else, heading attributes included, is left as it is.
func forHugo(src []byte) []byte {
	src = bytes.Replace(src, []byte("\nparams:\n"), []byte("\ncairn_params:\n"), 1)
	return fenceAttrs.ReplaceAll(src, []byte("$1"))
}
