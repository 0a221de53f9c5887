package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
)

// Targets from issue 34 §4: one block on 100 SSH hosts.
const (
	targetFanPssh = 0.5 // cairn run at 100 hosts ≤ 0.5× parallel-ssh's time
	targetFanOne  = 1.5 // and ≤ 1.5× cairn run on one host
)

// fanBook is the runbook the fan-out bench runs: `sleep 1` on every host of
// HOSTS at once. parallel= is honoured as written (up to the runner's
// ceiling), so one wave.
const fanBook = "---\ntitle: fan-out bench\nparams:\n  - name: HOSTS\n    type: hosts\n---\n\n# Fan-out\n\n## Everywhere {#everywhere}\n\n" +
	"```bash {#fan target=ssh hosts=HOSTS parallel=1024}\nsleep 1\n```\n"

// fanTool is one way to run `sleep 1` on a list of hosts.
type fanTool struct {
	name string
	cmd  func(ctx context.Context, hosts []string) *exec.Cmd
}

// fanSample is one run of a tool over n hosts.
type fanSample struct {
	wall time.Duration
	rss  int64 // peak RSS of the tool's own process (not its children)
	// cpu is the tool's user and system time with its children's (the
	// ssh clients of parallel-ssh and Ansible); machine is all the CPU
	// the machine spent meanwhile, the hosts' sshd, shells and commands
	// included: on loopback the hosts share these cores, which a real
	// fleet does not.
	cpu, machine time.Duration
}

type fanRow struct {
	hosts   int
	samples map[string][]fanSample // by tool name
	aliases bool                   // host names over fewer sshd (aliasConfig)
}

type fanResult struct {
	sshd  int // sshd hosts started
	tools []string
	rows  []fanRow
	up    time.Duration
}

// measureFanOut starts max(sizes) sshd hosts on loopback (the sandbox's own
// hosts, in a state folder of the bench's own), and times `cairn run` of
// one `sleep 1` block on the first n of them against parallel-ssh and
// Ansible's raw module (when installed) doing the same, for each n in
// sizes: one warm-up each, then runs, alternating the tools. Each tool gets
// the same ssh_config, key and known_hosts, and no ssh-agent.
//
// With wide > 0, cairn run alone then runs the block on wide host names:
// aliases in an ssh_config of the bench's, several per sshd (a thousand
// sshd would not start on 2 cores in reasonable time), each its own TCP
// connection, SSH handshake and session.
func measureFanOut(ctx context.Context, sizes []int, wide, runs int, work, cairnBin string, out io.Writer) (*fanResult, error) {
	n := slices.Max(sizes)
	var specs []sandbox.HostSpec
	for i := range n {
		specs = append(specs, sandbox.HostSpec{Name: fmt.Sprintf("h%d", i), Groups: []string{"fan"}})
	}
	dir := filepath.Join(work, "fanout")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Starting the hosts is not what is measured; on 2 cores 100 sshd
	// take a while.
	upCtx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	start := time.Now()
	sb, err := sandbox.Up(upCtx, sandbox.Options{StateDir: filepath.Join(dir, "sb"), NoKube: true, Network: sandbox.NetworkLoopback,
		Hosts: specs, DieWithParent: true})
	if err != nil {
		return nil, fmt.Errorf("starting %d sshd hosts: %w", n, err)
	}
	defer sb.Down(context.Background())
	res := &fanResult{up: time.Since(start), sshd: n}
	fmt.Fprintf(out, "  %d sshd hosts on loopback up in %s\n", n, res.up.Round(time.Millisecond))
	inv := sb.Inventory()

	book := filepath.Join(dir, "fan.md")
	if err := os.WriteFile(book, []byte(fanBook), 0o644); err != nil {
		return nil, err
	}
	env := noAgent(os.Environ())
	// withEnv is env and more, in a slice of its own (env is shared by
	// every tool's commands).
	withEnv := func(more ...string) []string { return slices.Concat(env, more) }
	// cairnRun is `cairn run` of the block on hosts, with extra flags.
	cairnRun := func(flags ...string) func(ctx context.Context, hosts []string) *exec.Cmd {
		return func(ctx context.Context, hosts []string) *exec.Cmd {
			args := append([]string{"run", book, "--content", dir, "--block", "fan", "--yes",
				"--param", "HOSTS=" + strings.Join(hosts, " "), "--journal", filepath.Join(dir, "journal.db")}, flags...)
			cmd := exec.CommandContext(ctx, cairnBin, args...)
			cmd.Env = withEnv(sandbox.EnvStateDir + "=" + sb.Dir())
			return cmd
		}
	}
	// With the sandbox's files given, as a reader with an inventory of
	// their own runs it.
	ownFiles := func(sshConfig string) []string {
		return []string{"--sandbox", "no", "--ssh-config", sshConfig, "--known-hosts", inv.KnownHosts, "--identity", inv.IdentityFile}
	}
	tools := []fanTool{{name: "cairn run", cmd: cairnRun(ownFiles(inv.SSHConfig)...)}}
	// The same against the sandbox as a reader runs it (--sandbox yes):
	// its status first, which probes the hosts the run names.
	tools = append(tools, fanTool{name: "cairn --sandbox", cmd: cairnRun("--sandbox", "yes")})
	if p, err := exec.LookPath("parallel-ssh"); err == nil {
		tools = append(tools, fanTool{name: "parallel-ssh", cmd: func(ctx context.Context, hosts []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, p, "-p", strconv.Itoa(len(hosts)), "-t", "0", "-x", "-F "+inv.SSHConfig,
				"-H", strings.Join(hosts, " "), "sleep 1")
			cmd.Env = env
			return cmd
		}})
	} else {
		fmt.Fprintln(out, "  parallel-ssh: not installed (scripts/ci-deps.sh --bench installs pssh); not compared")
	}
	if p, err := exec.LookPath("ansible"); err == nil {
		// Ansible's own settings only: an empty configuration file, so
		// that no ansible.cfg of the reader's changes what is timed.
		ansibleTmp := filepath.Join(dir, "ansible")
		if err := os.MkdirAll(ansibleTmp, 0o755); err != nil {
			return nil, err
		}
		ansibleCfg := filepath.Join(ansibleTmp, "ansible.cfg")
		if err := os.WriteFile(ansibleCfg, nil, 0o644); err != nil {
			return nil, err
		}
		tools = append(tools, fanTool{name: "ansible -m raw", cmd: func(ctx context.Context, hosts []string) *exec.Cmd {
			// ssh_args replaces Ansible's default ControlMaster and
			// ControlPersist, so a run cannot reuse the last run's
			// connections; raw runs the command as it is, no Python
			// module copied to the host.
			cmd := exec.CommandContext(ctx, p, "all", "-i", strings.Join(hosts, ",")+",", "-m", "raw", "-a", "sleep 1",
				"-f", strconv.Itoa(len(hosts)))
			cmd.Env = withEnv("ANSIBLE_SSH_ARGS=-F "+inv.SSHConfig, "ANSIBLE_LOCAL_TEMP="+ansibleTmp,
				"ANSIBLE_HOME="+ansibleTmp, "ANSIBLE_NOCOLOR=1", "ANSIBLE_CONFIG="+ansibleCfg)
			return cmd
		}})
	} else {
		fmt.Fprintln(out, "  ansible: not installed (scripts/ci-deps.sh --bench installs it); not compared")
	}
	for _, t := range tools {
		res.tools = append(res.tools, t.name)
	}

	names := inv.Groups["fan"]
	for _, size := range sizes {
		row := fanRow{hosts: size, samples: map[string][]fanSample{}}
		hosts := names[:size]
		for r := range runs + 1 {
			for _, t := range tools {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s, err := fanOnce(ctx, t, hosts)
				if err != nil {
					return nil, fmt.Errorf("%d hosts: %w", size, err)
				}
				if r == 0 {
					continue // warm-up: page cache, the journal's creation
				}
				row.samples[t.name] = append(row.samples[t.name], s)
				fmt.Fprintf(out, "  %3d hosts run %d/%d %-16s %s (cpu %s, machine cpu %s, peak RSS %s)\n", size, r, runs, t.name, ms(s.wall), ms(s.cpu), ms(s.machine), mib(s.rss))
			}
		}
		res.rows = append(res.rows, row)
	}
	if wide > 0 {
		cfg, aliases, err := aliasConfig(inv, wide, filepath.Join(dir, "wide_ssh_config"))
		if err != nil {
			return nil, err
		}
		t := fanTool{name: "cairn run", cmd: cairnRun(ownFiles(cfg)...)}
		// One run, no warm-up: at 1,000 hosts the run is minutes of the
		// loopback sshd's own work (90 s here), and one says what it costs.
		row := fanRow{hosts: wide, samples: map[string][]fanSample{}, aliases: true}
		s, err := fanOnce(ctx, t, aliases)
		if err != nil {
			return nil, fmt.Errorf("%d host names: %w", wide, err)
		}
		row.samples[t.name] = append(row.samples[t.name], s)
		fmt.Fprintf(out, "  %d host names (%d sshd) %-12s %s (cpu %s, machine cpu %s, peak RSS %s)\n", wide, len(names), t.name, ms(s.wall), ms(s.cpu), ms(s.machine), mib(s.rss))
		res.rows = append(res.rows, row)
	}
	return res, nil
}

// aliasConfig writes an ssh_config naming n hosts w0, w1, ... spread over
// the inventory's hosts in turn, and returns its path and the names.
func aliasConfig(inv *sandbox.Inventory, n int, path string) (string, []string, error) {
	var b strings.Builder
	var names []string
	for i := range n {
		h := inv.Hosts[i%len(inv.Hosts)]
		name := fmt.Sprintf("w%d", i)
		names = append(names, name)
		fmt.Fprintf(&b, "Host %s\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n",
			name, h.Address, h.Port, inv.User, inv.IdentityFile, inv.KnownHosts)
	}
	return path, names, os.WriteFile(path, []byte(b.String()), 0o644)
}

func fanOnce(ctx context.Context, t fanTool, hosts []string) (fanSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := t.cmd(ctx, hosts)
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	busy0 := machineBusy()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fanSample{}, fmt.Errorf("%s on %d hosts: %w", t.name, len(hosts), err)
	}
	peak := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	s := fanSample{wall: time.Since(start), machine: machineBusy() - busy0, rss: peak()}
	if err != nil {
		return s, fmt.Errorf("%s on %d hosts: %w\n%s", t.name, len(hosts), err, tail(output.String(), 2000))
	}
	s.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return s, nil
}

// machineBusy is the CPU time all cores have spent not idle since boot
// (/proc/stat; USER_HZ is 100 on Linux).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}

func cpus(s []fanSample, f func(fanSample) time.Duration) []time.Duration {
	var d []time.Duration
	for _, x := range s {
		d = append(d, f(x))
	}
	return d
}

// noAgent is env without an ssh-agent: every tool logs in with the
// sandbox's key file alone.
func noAgent(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "SSH_AUTH_SOCK=") })
}

func walls(s []fanSample) []time.Duration {
	var d []time.Duration
	for _, x := range s {
		d = append(d, x.wall)
	}
	return d
}

// pairRatio is the median of a's run i over b's run i: runs that took
// turns share whatever load the machine had then.
func pairRatio(a, b []fanSample) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		r = append(r, float64(a[i].wall)/float64(b[i].wall))
	}
	if len(r) == 0 {
		return 0
	}
	slices.Sort(r)
	return r[len(r)/2]
}

// reportFanOut prints the table and returns the MISSED lines.
func reportFanOut(out io.Writer, f *fanResult) []string {
	if f == nil || len(f.rows) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\none `sleep 1` block on N sshd hosts (loopback, one sshd per host; wall median over runs; peak RSS of the tool's process;\n"+
		"÷ X: cairn run's time over X's, the median of run-by-run ratios; cpu: the tool's with its children / the machine's,\n"+
		"the hosts' sshd and shells included, which on loopback share these cores)\n")
	fmt.Fprintf(out, "%-6s", "hosts")
	for _, t := range f.tools {
		fmt.Fprintf(out, " %22s", t)
	}
	for _, t := range f.tools[1:] {
		fmt.Fprintf(out, " %22s", "÷ "+t)
	}
	fmt.Fprintln(out)
	var one time.Duration
	var missed []string
	if !slices.ContainsFunc(f.rows, func(r fanRow) bool { return r.hosts == 100 && !r.aliases }) {
		fmt.Fprintln(out, "(the fan-out targets are at 100 hosts, which this run did not measure)")
	}
	for _, row := range f.rows {
		label := strconv.Itoa(row.hosts)
		if row.aliases {
			label += "*"
		}
		fmt.Fprintf(out, "%-6s", label)
		for _, t := range f.tools {
			s := row.samples[t]
			if len(s) == 0 {
				fmt.Fprintf(out, " %22s", "—")
				continue
			}
			fmt.Fprintf(out, " %22s", fmt.Sprintf("%s (%s)", ms(median(walls(s))), mib(maxRSS(s))))
		}
		c := row.samples[f.tools[0]]
		for _, t := range f.tools[1:] {
			if len(row.samples[t]) == 0 {
				fmt.Fprintf(out, " %22s", "—")
				continue
			}
			fmt.Fprintf(out, " %21.2f×", pairRatio(c, row.samples[t]))
		}
		fmt.Fprintln(out)
		if row.aliases {
			fmt.Fprintf(out, "  * host names over %d sshd (aliases), cairn run alone\n", f.sshd)
		}
		fmt.Fprintf(out, "%-6s", "  cpu")
		for _, t := range f.tools {
			s := row.samples[t]
			if len(s) == 0 {
				fmt.Fprintf(out, " %22s", "—")
				continue
			}
			fmt.Fprintf(out, " %22s", fmt.Sprintf("%s / %s", ms(median(cpus(s, func(x fanSample) time.Duration { return x.cpu }))),
				ms(median(cpus(s, func(x fanSample) time.Duration { return x.machine })))))
		}
		fmt.Fprintln(out)
		if row.hosts == 1 {
			one = median(walls(c))
		}
		if row.hosts == 100 {
			if p, ok := row.samples["parallel-ssh"]; ok {
				if r := pairRatio(c, p); r > targetFanPssh {
					missed = append(missed, fmt.Sprintf("MISSED: cairn run on 100 hosts takes %.2f× parallel-ssh's time; target ≤ %.2f×", r, targetFanPssh))
				}
			}
			if one > 0 {
				r := float64(median(walls(c))) / float64(one)
				fmt.Fprintf(out, "cairn run: 100 hosts take %.2f× one host (target ≤ %.2f×)\n", r, targetFanOne)
				if r > targetFanOne {
					missed = append(missed, fmt.Sprintf("MISSED: cairn run on 100 hosts takes %.2f× its time on one host; target ≤ %.2f×", r, targetFanOne))
				}
			}
		}
	}
	return missed
}

func maxRSS(s []fanSample) int64 {
	var m int64
	for _, x := range s {
		m = max(m, x.rss)
	}
	return m
}
