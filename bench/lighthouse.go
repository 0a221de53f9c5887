package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Lighthouse (issue 34 §3): the performance score of the first-load page,
// from Cairn's and Hugo's static builds, in Lighthouse's two presets. The
// pinned version runs on Node 18+: 13.x wants Node 22.
const (
	lighthouseVersion = "12.2.3"
	targetLighthouse  = 95
)

// lhPresets are Lighthouse's mobile (its default: a mid-range phone on a
// slow 4G link, simulated) and desktop presets.
var lhPresets = []string{"mobile", "desktop"}

// lhSample is one Lighthouse run's performance score and the metrics it is
// made of.
type lhSample struct {
	score                  int // 0–100
	fcp, lcp, tbt, si, cls float64
}

// ensureLighthouse returns the Lighthouse CLI script, installed with npm
// into the user cache when missing.
func ensureLighthouse(ctx context.Context, out io.Writer) (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("no node on PATH (apt-get install -y nodejs npm)")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "cairn", "bench", "lighthouse-"+lighthouseVersion)
	cli := filepath.Join(dir, "node_modules", "lighthouse", "cli", "index.js")
	if _, err := os.Stat(cli); err == nil {
		return cli, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("no npm on PATH (apt-get install -y npm)")
	}
	fmt.Fprintf(out, "installing lighthouse %s into %s (npm; once)\n", lighthouseVersion, dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "npm", "install", "--save-exact", "--no-audit", "--no-fund", "--prefix", dir, "lighthouse@"+lighthouseVersion)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("npm install lighthouse@%s: %w", lighthouseVersion, err)
	}
	return cli, nil
}

// lighthouse runs Lighthouse runs times per preset on each site's page,
// alternating sites, and returns the samples by site and preset.
func lighthouse(ctx context.Context, cli string, urls map[string]string, runs int, out io.Writer) (map[string]map[string][]lhSample, error) {
	chromium, err := chromiumPath()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(urls))
	for n := range urls {
		names = append(names, n)
	}
	slices.Sort(names)
	res := map[string]map[string][]lhSample{}
	for _, preset := range lhPresets {
		for i := range runs {
			for _, name := range names {
				s, err := lighthouseOnce(ctx, cli, chromium, urls[name], preset)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", name, preset, err)
				}
				if res[name] == nil {
					res[name] = map[string][]lhSample{}
				}
				res[name][preset] = append(res[name][preset], s)
				fmt.Fprintf(out, "  lighthouse %d/%d %-7s %-6s %3d (FCP %.0f ms, LCP %.0f ms, TBT %.0f ms, CLS %.3f, SI %.0f ms)\n",
					i+1, runs, preset, name, s.score, s.fcp, s.lcp, s.tbt, s.cls, s.si)
			}
		}
	}
	return res, nil
}

func lighthouseOnce(ctx context.Context, cli, chromium, url, preset string) (lhSample, error) {
	profile, err := os.MkdirTemp("", "cairn-bench-lighthouse-")
	if err != nil {
		return lhSample{}, err
	}
	defer os.RemoveAll(profile)
	args := []string{cli, url, "--only-categories=performance", "--output=json", "--output-path=stdout", "--quiet",
		"--chrome-flags=--headless=new --no-sandbox --disable-gpu --user-data-dir=" + profile + ` --host-resolver-rules="` + hostResolverRules + `"`}
	if preset == "desktop" {
		args = append(args, "--preset=desktop")
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "CHROME_PATH="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return lhSample{}, fmt.Errorf("lighthouse: %v: %s", err, tail(stderr.String(), 400))
	}
	var r struct {
		Categories struct {
			Performance struct {
				Score *float64 `json:"score"`
			} `json:"performance"`
		} `json:"categories"`
		Audits map[string]struct {
			NumericValue float64 `json:"numericValue"`
		} `json:"audits"`
		RuntimeError *struct{ Code, Message string } `json:"runtimeError"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return lhSample{}, fmt.Errorf("lighthouse's report: %w", err)
	}
	if r.RuntimeError != nil && r.RuntimeError.Code != "" {
		return lhSample{}, fmt.Errorf("lighthouse: %s: %s", r.RuntimeError.Code, r.RuntimeError.Message)
	}
	if r.Categories.Performance.Score == nil {
		return lhSample{}, fmt.Errorf("lighthouse gave no performance score")
	}
	a := func(k string) float64 { return r.Audits[k].NumericValue }
	return lhSample{
		score: int(*r.Categories.Performance.Score*100 + 0.5),
		fcp:   a("first-contentful-paint"), lcp: a("largest-contentful-paint"), tbt: a("total-blocking-time"),
		si: a("speed-index"), cls: a("cumulative-layout-shift"),
	}, nil
}

// medianLH is the sample with the median score.
func medianLH(s []lhSample) lhSample {
	c := slices.Clone(s)
	slices.SortFunc(c, func(a, b lhSample) int { return a.score - b.score })
	return c[len(c)/2]
}

// reportLighthouse prints the score rows and returns the targets missed.
func reportLighthouse(out io.Writer, page string, res map[string]map[string][]lhSample) (missed []string) {
	if len(res["cairn"]) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nlighthouse %s, /%s/     runs  score (median)   FCP, LCP, TBT, CLS, Speed Index of that run\n", lighthouseVersion, page)
	for _, preset := range lhPresets {
		for _, name := range []string{"cairn", "hugo"} {
			s := res[name][preset]
			if len(s) == 0 {
				continue
			}
			m := medianLH(s)
			label := name
			if name == "hugo" {
				label = "hugo (minimal layouts)"
			}
			fmt.Fprintf(out, "%-8s %-22s %4d %7d           %.0f ms, %.0f ms, %.0f ms, %.3f, %.0f ms\n", preset, label, len(s), m.score, m.fcp, m.lcp, m.tbt, m.cls, m.si)
		}
		if m := medianLH(res["cairn"][preset]); m.score < targetLighthouse {
			missed = append(missed, fmt.Sprintf("MISSED: lighthouse performance of %s (%s): %d (median); target ≥ %d", page, preset, m.score, targetLighthouse))
		}
	}
	fmt.Fprintf(out, "%-31s target: performance ≥ %d\n", "", targetLighthouse)
	return missed
}

// lhURLs are the first-load page's addresses on the static servers.
func lhURLs(sites map[string]string, page string) map[string]string {
	m := map[string]string{}
	for name, base := range sites {
		m[name] = strings.TrimSuffix(base, "/") + "/" + page + "/"
	}
	return m
}
