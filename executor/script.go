package executor

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// What a remote script is made of, for every runner that starts bash on
// another machine by sending it the script on standard input (ssh hosts,
// pods, nodes): the values exported in a preamble, the script in braces,
// and a reaper that ends what the script left running.

// envName is what may be exported in a preamble.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckScriptEnv refuses values no preamble can carry: a name that is not
// a shell variable, a value with a NUL byte.
func CheckScriptEnv(job *Job) error {
	for k, v := range job.Env {
		if !envName.MatchString(k) {
			return fmt.Errorf("block %s: %q is not a shell variable name: %w", job.Block.ID, k, ErrBadParam)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("block %s: the value of %s contains a NUL byte, which no shell variable can hold: %w", job.Block.ID, k, ErrBadParam)
		}
	}
	return nil
}

// ScriptInput is what a remote bash reads on standard input: the job's
// values, CAIRN_RUN_ID, CAIRN_BLOCK, CAIRN_HOST and CAIRN_SESSION as
// single-quoted exports, then the script inside { … }, so that bash parses
// it whole before running it and no command in it can read the script's
// own text from standard input. Values are data: each is one quoted word.
func ScriptInput(job *Job, host, session string) string {
	var b strings.Builder
	names := make([]string, 0, len(job.Env))
	for k := range job.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	export := func(k, v string) { b.WriteString("export " + k + "=" + runbook.ShellQuote(v) + "\n") }
	for _, k := range names {
		export(k, job.Env[k])
	}
	senv := job.SessionEnv(host)
	for _, k := range slices.Sorted(maps.Keys(senv)) {
		export(k, senv[k])
	}
	export("CAIRN_RUN_ID", job.RunID)
	export("CAIRN_BLOCK", job.Block.ID)
	export("CAIRN_HOST", host)
	export("CAIRN_SESSION", session) // what the reaper finds the run's processes by
	b.WriteString("{\n")
	script := job.Script()
	b.WriteString(script)
	if !strings.HasSuffix(script, "\n") {
		b.WriteString("\n")
	}
	b.WriteString("}\n")
	return b.String()
}

var sessionRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ReapScript is a /bin/sh script that kills every process whose
// environment holds CAIRN_SESSION=session (hex: safe in the text), so a
// block's background processes end with the run. See ReapCommands.
func ReapScript(session string) string {
	return ReapCommands(session) + "; exit 0"
}

// ReapCommands are ReapScript's commands without its exit, for a shell
// that reaps and goes on (the wrappers' cairn_reap function): the shell
// running them ($$) is spared. GNU grep reads every environ file in one
// process (-z: entries end in NUL); a loop that forks per process took
// seconds on a loaded machine, longer than the grace before SIGKILL ended
// the reaper itself. Other greps get the loop. Whether -z works is read
// from that same grep: its own argv (/proc/self/cmdline, NUL-separated)
// has the entry as a whole record only when it splits at NULs. On a host
// that runs many blocks at once each process started counts (about 15 ms
// on a small VM): this is two greps, where a second shell, a probe and its
// pipeline and one grep made four.
func ReapCommands(session string) string {
	if !sessionRe.MatchString(session) {
		return ":"
	}
	entry := "'CAIRN_SESSION=" + session + "'"
	// Scanned at least twice, and again while a scan finds something (four
	// at most): a process in the middle of an exec (a block's last command
	// backgrounded under setsid, then bash ended) shows an empty environ
	// for that moment, and a scan made at once after bash ended missed it
	// under load (TestNormalExitLeavesNoProcesses, in CI).
	return `cairn_i=0; while [ $cairn_i -lt 4 ]; do cairn_i=$((cairn_i+1)); cairn_hit=; ` +
		`cairn_found=$(grep -lzxF -e ` + entry + ` /proc/self/cmdline /proc/[0-9]*/environ 2>/dev/null); ` +
		`case $cairn_found in /proc/self/cmdline*) for f in $cairn_found; do case $f in */environ) p=${f#/proc/}; p=${p%/environ}; [ "$p" = "$$" ] || { kill -9 "$p" 2>/dev/null; cairn_hit=1; };; esac; done;; ` +
		`*) for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$$" ] && continue; ` +
		`if tr '\000' '\n' <"$d/environ" 2>/dev/null | grep -qx ` + entry + `; then kill -9 "$p" 2>/dev/null; fi; done; break;; esac; ` +
		`[ $cairn_i -ge 2 ] && [ -z "$cairn_hit" ] && break; done`
}
