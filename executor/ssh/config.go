package ssh

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairn-dev/cairn/executor"
)

// clientConfig is the useful subset of an OpenSSH client configuration
// (ssh_config(5)): the options of every Host section in file order, with the
// section's patterns, so lookup can apply OpenSSH's "first value wins" rule.
type clientConfig struct {
	opts []cfgOpt
}

// cfgOpt is one option line and the condition it sits under.
type cfgOpt struct {
	cond *cfgCond // nil: before any Host line, applies to every host
	key  string   // lower case
	args []string
	file string
	line int
}

// cfgCond is a Host line's patterns, or a Match line (only "Match all" is
// understood; any other Match matches nothing, so its options are ignored
// rather than misapplied).
type cfgCond struct {
	patterns []string // Host patterns; "!" negates
	matchAll bool
	never    bool
}

func (c *cfgCond) matches(alias string) bool {
	switch {
	case c == nil || c.matchAll:
		return true
	case c.never:
		return false
	}
	alias = strings.ToLower(alias)
	ok := false
	for _, p := range c.patterns {
		neg := strings.HasPrefix(p, "!")
		if wildcard(strings.ToLower(strings.TrimPrefix(p, "!")), alias) {
			if neg {
				return false
			}
			ok = true
		}
	}
	return ok
}

// wildcard matches s against an ssh_config pattern: * is any run of
// characters, ? is one character, everything else is literal.
func wildcard(pat, s string) bool {
	for len(pat) > 0 {
		switch pat[0] {
		case '*':
			for len(pat) > 0 && pat[0] == '*' {
				pat = pat[1:]
			}
			if pat == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if wildcard(pat, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
		default:
			if s == "" || s[0] != pat[0] {
				return false
			}
		}
		pat, s = pat[1:], s[1:]
	}
	return s == ""
}

// maxIncludeDepth bounds Include recursion as OpenSSH does.
const maxIncludeDepth = 16

// readConfigFile parses an OpenSSH client configuration file. home is used
// for ~ and relative Include paths.
func readConfigFile(path, home string) (*clientConfig, error) {
	cfg := &clientConfig{}
	if err := cfg.readFile(path, home, nil, 0); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *clientConfig) readFile(path, home string, cond *cfgCond, depth int) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read ssh config: %w", err)
	}
	defer f.Close()
	return cfg.read(f, path, home, cond, depth)
}

// read parses r (named name) into cfg, starting under cond (the enclosing
// file's condition, for an included file).
func (cfg *clientConfig) read(r io.Reader, name, home string, cond *cfgCond, depth int) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		key, args, err := splitConfigLine(sc.Text())
		if err != nil {
			return fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if key == "" {
			continue
		}
		switch key {
		case "host":
			if len(args) == 0 {
				return fmt.Errorf("%s:%d: Host needs at least one pattern", name, line)
			}
			cond = &cfgCond{patterns: args}
		case "match":
			if len(args) == 1 && strings.EqualFold(args[0], "all") {
				cond = &cfgCond{matchAll: true}
			} else {
				cond = &cfgCond{never: true}
			}
		case "include":
			if depth >= maxIncludeDepth {
				return fmt.Errorf("%s:%d: Include nested more than %d deep", name, line, maxIncludeDepth)
			}
			for _, pat := range args {
				pat = executor.ExpandHome(pat, home)
				if !filepath.IsAbs(pat) {
					pat = filepath.Join(home, ".ssh", pat)
				}
				files, err := filepath.Glob(pat)
				if err != nil {
					return fmt.Errorf("%s:%d: Include %q: %v", name, line, pat, err)
				}
				for _, fn := range files {
					if err := cfg.readFile(fn, home, cond, depth+1); err != nil {
						return err
					}
				}
			}
		default:
			cfg.opts = append(cfg.opts, cfgOpt{cond: cond, key: key, args: args, file: name, line: line})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read ssh config %s: %w", name, err)
	}
	return nil
}

// splitConfigLine splits one ssh_config line into its lower-case keyword and
// arguments: "Key value ...", "Key=value" or "Key = value"; arguments may be
// double- or single-quoted; an unquoted word starting with # starts a
// comment.
func splitConfigLine(s string) (string, []string, error) {
	var words []string
	i := 0
	for {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r') {
			i++
		}
		if i >= len(s) || s[i] == '#' {
			break
		}
		var w strings.Builder
		for i < len(s) && s[i] != ' ' && s[i] != '\t' && s[i] != '\r' {
			if q := s[i]; q == '"' || q == '\'' {
				end := strings.IndexByte(s[i+1:], q)
				if end < 0 {
					return "", nil, fmt.Errorf("unterminated quote")
				}
				w.WriteString(s[i+1 : i+1+end])
				i += end + 2
				continue
			}
			w.WriteByte(s[i])
			i++
		}
		words = append(words, w.String())
	}
	if len(words) == 0 {
		return "", nil, nil
	}
	key := words[0]
	args := words[1:]
	// Key=value, Key= value, Key =value, Key = value.
	if k, v, ok := strings.Cut(key, "="); ok {
		key = k
		if v != "" {
			args = append([]string{v}, args...)
		}
	} else if len(args) > 0 && strings.HasPrefix(args[0], "=") {
		if v := strings.TrimPrefix(args[0], "="); v != "" {
			args[0] = v
		} else {
			args = args[1:]
		}
	}
	if key == "" {
		return "", nil, fmt.Errorf("missing keyword before =")
	}
	return strings.ToLower(key), args, nil
}

// hostOptions are the options that apply to one host alias.
type hostOptions struct {
	first map[string]cfgOpt // first matching line of each single-valued key
	ids   []cfgOpt          // every matching IdentityFile line, in order
}

func (o hostOptions) get(key string) (string, bool) {
	op, ok := o.first[key]
	if !ok || len(op.args) == 0 {
		return "", false
	}
	return op.args[0], true
}

// lookup collects the options for alias: for each keyword the first
// matching value wins (as in OpenSSH), except IdentityFile, which
// accumulates.
func (cfg *clientConfig) lookup(alias string) hostOptions {
	o := hostOptions{first: map[string]cfgOpt{}}
	if cfg == nil {
		return o
	}
	for _, op := range cfg.opts {
		if !op.cond.matches(alias) {
			continue
		}
		if op.key == "identityfile" {
			o.ids = append(o.ids, op)
			continue
		}
		if _, seen := o.first[op.key]; !seen {
			o.first[op.key] = op
		}
	}
	return o
}

// expandTokens expands ~ and the % tokens ssh_config allows in file names:
// %d home, %h remote host name, %p port, %r remote user, %u local user,
// %% a percent sign. Unknown tokens are an error.
func expandTokens(s string, t tokens) (string, error) {
	s = executor.ExpandHome(s, t.home)
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", fmt.Errorf("%q ends with a lone %%", s)
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			b.WriteString(t.home)
		case 'h':
			b.WriteString(t.host)
		case 'p':
			b.WriteString(t.port)
		case 'r':
			b.WriteString(t.user)
		case 'u':
			b.WriteString(t.localUser)
		default:
			return "", fmt.Errorf("%q: token %%%c is not supported (use %%d %%h %%p %%r %%u %%%%)", s, s[i])
		}
	}
	return b.String(), nil
}

type tokens struct {
	home, host, port, user, localUser string
}
