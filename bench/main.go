// Command bench times Cairn on a large generated site (`make bench`):
//
//   - `cairn build` (the binary) against Hugo on the same Markdown: one
//     warm-up run each, then -runs timed runs, alternating the tools;
//   - an incremental rebuild under the dev server: from writing one runbook
//     to the server's OnUpdate, over -edits edits.
//
// It prints a table and the ratios, and a MISSED line for each target it
// misses (cairn ≤ 0.5× Hugo; incremental < 50 ms). It exits 0 when targets
// are missed and 1 only when it could not measure.
//
// Hugo is installed once, at a pinned version, with `go install` into the
// user cache folder (cairn/bench/bin).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/bench/gen"
	"github.com/cairn-dev/cairn/site"
)

// Targets from issue 34 §1 (build time and peak memory against Hugo's) and
// issue 2 §5 (incremental rebuild).
const (
	targetRatio       = 0.2
	targetRSSRatio    = 0.25
	targetIncremental = 50 * time.Millisecond
)

// hugoVersion is the newest Hugo whose go.mod needs at most the Go on the
// project's machines (1.26.8): v0.166.0 and later need go 1.27.
const hugoVersion = "v0.165.0"

type config struct {
	n, steps, runs, edits int
	seed                  uint64
	cairn, hugo, hugoVer  string
	work                  string
	cpuProfile            string
	theme                 string
	skipHugo              bool
	// The first load of a bundled page (issue 34 §3).
	loadContent, loadPage string
	loadRuns, patchEdits  int
	lhRuns                int // Lighthouse runs per preset and site
	// One block on N SSH hosts (issue 34 §4).
	fanHosts string
	fanWide  int
	fanRuns  int
	// only names the parts to measure (all when empty).
	only map[string]bool
}

// benchParts are the parts -only can name, in the order they run.
var benchParts = []string{"build", "incremental", "firstload", "patch", "fanout"}

func (c config) want(part string) bool { return len(c.only) == 0 || c.only[part] }

func main() {
	var c config
	flag.IntVar(&c.n, "n", 1000, "runbooks to generate")
	flag.IntVar(&c.steps, "steps", 10, "steps per runbook")
	flag.Uint64Var(&c.seed, "seed", 1, "generator seed")
	flag.IntVar(&c.runs, "runs", 5, "timed runs per tool (after one warm-up run)")
	flag.IntVar(&c.edits, "edits", 20, "edits for the incremental rebuild")
	flag.StringVar(&c.cairn, "cairn", "bin/cairn", "cairn binary (built with go build when missing)")
	flag.StringVar(&c.hugo, "hugo", "", "hugo binary (default: go install the pinned version into the user cache)")
	flag.StringVar(&c.hugoVer, "hugo-version", hugoVersion, "Hugo version to install")
	flag.BoolVar(&c.skipHugo, "skip-hugo", false, "time cairn only")
	flag.StringVar(&c.theme, "theme", "", "theme folder for cairn (default: the embedded theme), to measure a theme change")
	flag.StringVar(&c.work, "work", "", "keep generated files and output in this folder (default: a temporary folder, removed)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "also profile in-process builds and incremental updates into this file")
	flag.StringVar(&c.loadContent, "firstload-content", "content", "content folder of the page whose first load is measured in Chromium (\"\": skip)")
	flag.StringVar(&c.loadPage, "firstload-page", "kubeadm-ha", "the page (a runbook's slug) whose first load is measured")
	flag.IntVar(&c.loadRuns, "firstload-runs", 9, "cold loads per site, alternating")
	flag.IntVar(&c.lhRuns, "lighthouse-runs", 3, "Lighthouse runs (npm, installed into the user cache) per preset on the first-load page of each static build (0: skip)")
	flag.IntVar(&c.patchEdits, "patch-edits", 10, "edits of the first-load page's prose under cairn serve and hugo server, timed from the write to the words in Chromium (0: skip)")
	flag.StringVar(&c.fanHosts, "fanout-hosts", "1,10,100", "host counts for the fan-out comparison (cairn run, parallel-ssh, ansible; \"\": skip)")
	flag.IntVar(&c.fanWide, "fanout-wide", 1000, "then cairn run alone on this many host names spread over the largest -fanout-hosts sshd (0: skip)")
	flag.IntVar(&c.fanRuns, "fanout-runs", 3, "timed runs per tool and host count, alternating")
	onlyFlag := flag.String("only", "", "measure only these parts, comma-separated: "+strings.Join(benchParts, ", ")+" (default: all)")
	flag.Parse()
	for _, p := range strings.Split(*onlyFlag, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !slices.Contains(benchParts, p) {
			fmt.Fprintf(os.Stderr, "bench: -only %q: unknown part %q (known: %s)\n", *onlyFlag, p, strings.Join(benchParts, ", "))
			os.Exit(2)
		}
		if c.only == nil {
			c.only = map[string]bool{}
		}
		c.only[p] = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config, out io.Writer) error {
	work := c.work
	if work == "" {
		tmp, err := os.MkdirTemp("", "cairn-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	work, _ = filepath.Abs(work)
	content := filepath.Join(work, "content")
	_ = os.RemoveAll(content)

	start := time.Now()
	paths, err := gen.Generate(content, gen.Options{N: c.n, Steps: c.steps, Seed: c.seed})
	if err != nil {
		return err
	}
	st, err := contentStats(paths)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "generated %d runbooks in %s: %.1f MiB of Markdown, %d steps, %d fenced blocks (seed %d) in %s\n",
		len(paths), time.Since(start).Round(time.Millisecond), float64(st.bytes)/(1<<20), st.steps, st.fences, c.seed, content)

	fmt.Fprintf(out, "load average at start: %s (%d CPUs)\n", loadAvg(), runtime.NumCPU())
	cairnBin, err := ensureCairn(ctx, c.cairn)
	if err != nil {
		return err
	}

	var hugoBin, hugoVer, hugoSrc string
	if !c.skipHugo && (c.want("build") || c.want("firstload") || c.want("patch")) {
		hugoBin, hugoVer, err = ensureHugo(ctx, c.hugo, c.hugoVer, out)
		if err != nil {
			fmt.Fprintf(out, "hugo: not available (%v); timing cairn only\n", err)
		} else {
			hugoSrc = filepath.Join(work, "hugo")
			if err := hugoSite(hugoSrc, paths); err != nil {
				return err
			}
			fmt.Fprintf(out, "hugo site: %s (for Hugo's copy only: front matter key params renamed cairn_params, since Hugo\n"+
				"  reserves params for a map; fence attributes {...} dropped, language kept, since Hugo's attribute parser\n"+
				"  rejects values such as timeout=10m and '...' strings; taxonomy, term and RSS pages disabled)\n", hugoSrc)
		}
	}

	tools := []tool{{name: "cairn build", cmd: func() *exec.Cmd {
		args := []string{"build", "--quiet", "--content", content, "--out", filepath.Join(work, "out-cairn")}
		if c.theme != "" {
			args = append(args, "--theme", c.theme)
		}
		return exec.CommandContext(ctx, cairnBin, args...)
	}}}
	if hugoBin != "" {
		tools = append(tools, tool{name: "hugo " + hugoVer, cmd: func() *exec.Cmd {
			cmd := exec.CommandContext(ctx, hugoBin, "--quiet", "--source", hugoSrc, "--destination", filepath.Join(work, "out-hugo"),
				"--cacheDir", filepath.Join(work, "hugo-cache"))
			return cmd
		}})
	}
	if c.want("build") {
		fmt.Fprintf(out, "timing full builds: 1 warm-up + %d runs per tool, alternating\n", c.runs)
		if err := timeBuilds(ctx, tools, c.runs, out); err != nil {
			return err
		}
		if err := checkOutputs(work, len(paths), st, hugoBin != "", out); err != nil {
			return err
		}
	}

	var prof *os.File
	if c.cpuProfile != "" {
		if prof, err = os.Create(c.cpuProfile); err != nil {
			return err
		}
		defer prof.Close()
		if err := pprof.StartCPUProfile(prof); err != nil {
			return err
		}
		if err := inProcessBuilds(ctx, siteOptions(content, c.theme), 3, out); err != nil {
			return err
		}
	}

	var inc *incResult
	if c.want("incremental") {
		fmt.Fprintf(out, "timing incremental rebuilds under the dev server: %d edits\n", c.edits)
		incOpts := siteOptions(content, c.theme)
		incOpts.Dev = true
		inc, err = incremental(ctx, incOpts, paths, c.edits, out)
	}
	if prof != nil {
		pprof.StopCPUProfile()
		fmt.Fprintf(out, "cpu profile: %s (go tool pprof -top %s)\n", c.cpuProfile, c.cpuProfile)
	}
	if err != nil {
		return err
	}

	var load *loadResult
	if c.loadContent != "" && c.want("firstload") {
		fmt.Fprintf(out, "first load of %s in Chromium (cache off, gzip as a static host serves it): %d cold loads per site, alternating\n", c.loadPage, c.loadRuns)
		load, err = measureFirstLoad(ctx, c, work, cairnBin, hugoBin, out)
		if err != nil {
			fmt.Fprintf(out, "first load: not measured: %v\n", err)
		}
	}

	var patchC, patchH []patchSample
	if c.loadContent != "" && c.patchEdits > 0 && c.want("patch") {
		fmt.Fprintf(out, "edit → visible: %d edits of a prose line of %s under cairn serve and hugo server, in Chromium\n", c.patchEdits, c.loadPage)
		patchC, patchH, err = measurePatch(ctx, c, work, hugoBin, out)
		if err != nil {
			fmt.Fprintf(out, "edit → visible: not measured: %v\n", err)
		}
	}

	var fan *fanResult
	if sizes, err := hostCounts(c.fanHosts); err != nil {
		return err
	} else if len(sizes) > 0 && c.want("fanout") {
		fmt.Fprintf(out, "fan-out: one `sleep 1` block on %s hosts: cairn run, parallel-ssh, ansible, %d runs each, alternating\n", c.fanHosts, c.fanRuns)
		if fan, err = measureFanOut(ctx, sizes, c.fanWide, c.fanRuns, work, cairnBin, out); err != nil {
			fmt.Fprintf(out, "fan-out: not measured: %v\n", err)
		}
	}

	report(out, c, tools, inc, load, func() []string {
		if !c.want("patch") {
			return nil
		}
		return reportPatch(out, patchC, patchH)
	},
		func() []string {
			if fan == nil && c.want("fanout") && c.fanHosts != "" {
				return []string{"MISSED: the fan-out was not measured (see above)"}
			}
			return reportFanOut(out, fan)
		})
	return nil
}

// hostCounts reads -fanout-hosts: host counts, comma-separated.
func hostCounts(s string) ([]int, error) {
	var n []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-fanout-hosts %q: %q is not a host count", s, f)
		}
		n = append(n, v)
	}
	return n, nil
}

func siteOptions(content, theme string) site.Options {
	opts := site.Options{Content: content}
	if theme != "" {
		opts.Theme = os.DirFS(theme)
	}
	return opts
}

type stats struct {
	bytes, steps, fences int
	expected             int // expected-output fences: shown as plain output by Cairn
}

func contentStats(paths []string) (stats, error) {
	var s stats
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return s, err
		}
		s.bytes += len(b)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "## ") {
				s.steps++
			}
			if strings.HasPrefix(line, "```") && len(line) > 3 {
				s.fences++ // opening fences have a language
				if strings.Contains(line, "{expected") {
					s.expected++
				}
			}
		}
	}
	return s, nil
}

// ensureCairn returns the binary's path, building it if it is missing.
func ensureCairn(ctx context.Context, bin string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(abs); err == nil {
		return abs, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", abs, "./cmd/cairn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build cairn: %w", err)
	}
	return abs, nil
}

type tool struct {
	name  string
	cmd   func() *exec.Cmd
	times []time.Duration // wall clock
	cpu   []time.Duration // user + system time of the process
	rss   []int64         // peak resident set size of the process, bytes
}

func timeBuilds(ctx context.Context, tools []tool, runs int, out io.Writer) error {
	once := func(t *tool) (wall, cpu time.Duration, rss int64, err error) {
		cmd := t.cmd()
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		// Each run starts with the last one's output on disk, so that no
		// run pays for writing back another's (with this, both tools'
		// CPU at 1,000 runbooks fell by a sixth: cairn 4.75 → 3.9 s, Hugo
		// 21.3 → 17.9 s; the ratio stayed at 0.24×).
		syscall.Sync()
		start := time.Now()
		if err := cmd.Start(); err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w", t.name, err)
		}
		peak := watchPeakRSS(cmd.Process.Pid)
		err = cmd.Wait()
		wall = time.Since(start)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s: %w\n%s", t.name, err, tail(stderr.String(), 2000))
		}
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), peak(), nil
	}
	for i := range tools {
		if _, _, _, err := once(&tools[i]); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	for r := range runs {
		for i := range tools {
			if err := ctx.Err(); err != nil {
				return err
			}
			d, cpu, rss, err := once(&tools[i])
			if err != nil {
				return err
			}
			tools[i].times = append(tools[i].times, d)
			tools[i].cpu = append(tools[i].cpu, cpu)
			tools[i].rss = append(tools[i].rss, rss)
			fmt.Fprintf(out, "  run %d/%d %-16s %s (cpu %s, peak RSS %s)\n", r+1, runs, tools[i].name, ms(d), ms(cpu), mib(rss))
		}
	}
	return nil
}

// checkOutputs makes sure both tools rendered every page and highlighted
// every block, so the timings compare the same work.
func checkOutputs(work string, n int, st stats, hugo bool, out io.Writer) error {
	count := func(dir, needle string) (pages, hits int, err error) {
		err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Base(p) != "index.html" || filepath.Dir(p) == dir {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			pages++
			hits += strings.Count(string(b), needle)
			return nil
		})
		return
	}
	pages, hits, err := count(filepath.Join(work, "out-cairn"), `<pre class="chroma">`)
	if err != nil {
		return err
	}
	// Expected-output blocks are shown as plain output, not highlighted.
	if pages != n || hits != st.fences-st.expected {
		return fmt.Errorf("cairn output: %d pages, %d highlighted blocks; want %d pages, %d blocks", pages, hits, n, st.fences-st.expected)
	}
	fmt.Fprintf(out, "  cairn: %d pages, %d highlighted code blocks\n", pages, hits)
	if !hugo {
		return nil
	}
	pages, hits, err = count(filepath.Join(work, "out-hugo"), `<pre tabindex="0" class="chroma">`)
	if err != nil {
		return err
	}
	if pages != n || hits != st.fences {
		return fmt.Errorf("hugo output: %d pages, %d highlighted blocks; want %d pages, %d blocks", pages, hits, n, st.fences)
	}
	fmt.Fprintf(out, "  hugo:  %d pages, %d highlighted code blocks\n", pages, hits)
	return nil
}

// inProcessBuilds runs full builds inside this process, for the profile,
// the way cairn build does: streamed into a DirWriter, committed.
func inProcessBuilds(ctx context.Context, opts site.Options, n int, out io.Writer) error {
	outDir, err := os.MkdirTemp("", "cairn-bench-prof-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(outDir)
	for range n {
		start := time.Now()
		b, err := site.New(opts)
		if err != nil {
			return err
		}
		w, err := site.NewDirWriter(filepath.Join(outDir, "public"))
		if err != nil {
			return err
		}
		if _, err := b.BuildTo(ctx, w, false); err != nil {
			_ = w.Abort()
			return err
		}
		if err := w.Commit(); err != nil {
			return err
		}
		fmt.Fprintf(out, "  in-process build (profiled, streamed as cairn build does): %s\n", ms(time.Since(start)))
	}
	return nil
}

func report(out io.Writer, c config, tools []tool, inc *incResult, load *loadResult, more ...func() []string) {
	fmt.Fprintf(out, "\n%d runbooks × %d steps, %d CPUs, %s, load average %s\n\n", c.n, c.steps, runtime.NumCPU(), runtime.Version(), loadAvg())
	if c.theme != "" {
		fmt.Fprintf(out, "cairn theme: %s\n\n", c.theme)
	}
	var missed []string
	switch {
	case !c.want("build"):
	case len(tools[0].times) == 0:
		fmt.Fprintln(out, "no timed runs (-runs 0)")
		return
	default:
		missed = append(missed, reportBuild(out, tools)...)
	}
	if c.want("incremental") {
		missed = append(missed, reportIncremental(out, inc)...)
	}
	if c.want("firstload") {
		missed = append(missed, load.report(out, c.loadPage)...)
	}
	for _, f := range more {
		missed = append(missed, f()...)
	}
	fmt.Fprintln(out)
	if len(missed) == 0 {
		fmt.Fprintln(out, "all targets met")
	}
	for _, m := range missed {
		fmt.Fprintln(out, m)
	}
}

func reportBuild(out io.Writer, tools []tool) (missed []string) {
	fmt.Fprintf(out, "%-26s %5s %10s %10s %10s %12s %12s\n", "", "runs", "median", "min", "max", "median cpu", "peak RSS")
	for _, t := range tools {
		fmt.Fprintf(out, "%-26s %5d %10s %10s %10s %12s %12s\n", t.name, len(t.times), ms(median(t.times)), ms(slices.Min(t.times)), ms(slices.Max(t.times)), ms(median(t.cpu)), mib(slices.Max(t.rss)))
	}
	if len(tools) == 2 {
		rMed := float64(median(tools[0].times)) / float64(median(tools[1].times))
		rMin := float64(slices.Min(tools[0].times)) / float64(slices.Min(tools[1].times))
		rCPU := float64(median(tools[0].cpu)) / float64(median(tools[1].cpu))
		rRSS := float64(slices.Max(tools[0].rss)) / float64(max(1, slices.Max(tools[1].rss)))
		fmt.Fprintf(out, "%-26s %5s %9.2f× %9.2f× %10s %11.2f× %11.2f×   targets ≤ %.2f× (median wall), ≤ %.2f× (peak RSS)\n",
			"ratio cairn/hugo", "", rMed, rMin, "", rCPU, rRSS, targetRatio, targetRSSRatio)
		if rMed > targetRatio {
			missed = append(missed, fmt.Sprintf("MISSED: cairn build takes %.2f× Hugo's time (median); target ≤ %.2f×", rMed, targetRatio))
		}
		if rRSS > targetRSSRatio {
			missed = append(missed, fmt.Sprintf("MISSED: cairn build's peak RSS is %.2f× Hugo's; target ≤ %.2f×", rRSS, targetRSSRatio))
		}
	} else {
		missed = append(missed, "MISSED: no Hugo to compare with; the ratio target is unchecked")
	}
	return missed
}

func reportIncremental(out io.Writer, inc *incResult) (missed []string) {
	if inc != nil && len(inc.latency) > 0 {
		fmt.Fprintf(out, "%-26s %5d %10s %10s %10s   target < %s\n", "incremental write→OnUpdate", len(inc.latency),
			ms(median(inc.latency)), ms(slices.Min(inc.latency)), ms(slices.Max(inc.latency)), ms(targetIncremental))
		fmt.Fprintf(out, "%-26s %5d %10s %10s %10s   (Builder.Update; the rest is fsnotify and the server's debounce)\n", "  of which Update",
			len(inc.update), ms(median(inc.update)), ms(slices.Min(inc.update)), ms(slices.Max(inc.update)))
		if inc.timeouts > 0 {
			missed = append(missed, fmt.Sprintf("MISSED: %d of %d edits got no rebuild within %s", inc.timeouts, inc.timeouts+len(inc.latency), editTimeout))
		}
		if m := median(inc.latency); m >= targetIncremental {
			missed = append(missed, fmt.Sprintf("MISSED: incremental rebuild takes %s (median); target < %s", ms(m), ms(targetIncremental)))
		}
	} else {
		missed = append(missed, "MISSED: no incremental rebuild was measured")
	}
	return missed
}

// loadAvg is the 1, 5 and 15 minute load average: other work on the machine
// inflates wall-clock times (the cpu column is less affected).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
