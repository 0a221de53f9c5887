package executor

import (
	"bytes"
	"encoding/base64"
	"maps"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/runbook/shellsession"
)

// Shell sessions (session=NAME): the blocks of one session on one host
// share the working directory and exported variables. A block of a session
// runs inside shellsession.Wrapper, which restores the state the session's last
// block on that host left (CAIRN_SH_STATE) and, however the block ends,
// prints the new state as one marked line (shellsession.Mark, the run's
// CAIRN_SH_NONCE, base64). The engine takes that line out of the output
// and keeps the state for the next block; exported scripts do the same
// with the same wrapper.

// ShellState is what a session left on one host.
type ShellState struct {
	Dir  string            `json:"dir"`
	Vars map[string]string `json:"vars,omitempty"`
}

// encode is the state as CAIRN_SH_STATE carries it.
func (s ShellState) encode() string {
	var b bytes.Buffer
	b.WriteString(s.Dir)
	b.WriteByte(0)
	for _, k := range slices.Sorted(maps.Keys(s.Vars)) {
		b.WriteString(k + "=" + s.Vars[k])
		b.WriteByte(0)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// decodeShellState reads a marker line's state.
func decodeShellState(s string) (ShellState, bool) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(raw) == 0 {
		return ShellState{}, false
	}
	parts := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	st := ShellState{Dir: parts[0], Vars: map[string]string{}}
	for _, kv := range parts[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok && envName.MatchString(k) {
			st.Vars[k] = v
		}
	}
	return st, true
}

// ShellJob is a job's session: its name, the run's nonce, and the state
// each host starts from.
type ShellJob struct {
	Name   string
	Nonce  string
	States map[string]ShellState // by host ("" is this machine)
}

// Script is the script a runner runs for the job: the block's, inside the
// session wrapper when the block is in a session.
func (j *Job) Script() string {
	if j.Shell == nil {
		return j.Block.Content
	}
	return shellsession.Wrapper + j.Block.Content
}

// SessionEnv is what a runner adds to the environment of the job's script
// on host: the nonce and the state the host's session is in.
func (j *Job) SessionEnv(host string) map[string]string {
	if j.Shell == nil {
		return nil
	}
	env := map[string]string{"CAIRN_SH_NONCE": j.Shell.Nonce}
	if st, ok := j.Shell.States[host]; ok {
		env["CAIRN_SH_STATE"] = st.encode()
	}
	return env
}

// sessionFilter takes the marker line out of one host's output and hands
// its state to keep. Text without the record separator passes at once; a
// line that may be the marker is held until it ends.
type sessionFilter struct {
	nonce string
	held  []byte
	keep  func(ShellState)
}

const maxHeld = 1 << 20

func (f *sessionFilter) Write(p []byte, emit func([]byte)) {
	f.held = append(f.held, p...)
	for {
		i := bytes.IndexByte(f.held, 0x1e)
		if i < 0 {
			if len(f.held) > 0 {
				emit(f.held)
				f.held = nil
			}
			return
		}
		if i > 0 {
			emit(f.held[:i])
			f.held = f.held[i:]
		}
		nl := bytes.IndexByte(f.held, '\n')
		if nl < 0 {
			if len(f.held) > maxHeld { // no marker is this long
				emit(f.held)
				f.held = nil
			}
			return
		}
		line := string(f.held[:nl])
		want := shellsession.Mark + f.nonce + " "
		if f.nonce != "" && strings.HasPrefix(line, want) {
			if st, ok := decodeShellState(line[len(want):]); ok && f.keep != nil {
				f.keep(st)
			}
		} else {
			emit(f.held[:nl+1])
		}
		f.held = f.held[nl+1:]
	}
}

// Flush emits what is held (a marker never ends without a newline).
func (f *sessionFilter) Flush(emit func([]byte)) {
	if len(f.held) > 0 {
		emit(f.held)
		f.held = nil
	}
}
