package runbook

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// splitFrontMatter returns the YAML between the leading --- lines, the body
// after them, and the body's byte offset. ok is false when the file does not
// start with a front matter block; closed is false when it is never ended.
func splitFrontMatter(src []byte) (fm []byte, bodyOff int, ok, closed bool) {
	src0 := src
	src = bytes.TrimPrefix(src, []byte("\ufeff"))
	bom := len(src0) - len(src)
	first, rest, found := bytes.Cut(src, []byte("\n"))
	if !found || strings.TrimRight(string(first), " \t\r") != "---" {
		return nil, 0, false, false
	}
	off := bom + len(first) + 1
	start := off
	for len(rest) > 0 {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		l := strings.TrimRight(string(line), " \t\r")
		if l == "---" || l == "..." {
			end := off + len(line) + 1
			if end > len(src0) {
				end = len(src0)
			}
			return src0[start:off], end, true, true
		}
		off += len(line) + 1
		rest = next
	}
	return src0[start:], len(src0), true, false
}

var (
	paramNameRe = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	idRe        = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	slugRe      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
)

var frontMatterKeys = []string{"title", "slug", "summary", "lang", "tags", "duration", "weight",
	"prerequisites", "params", "kube", "requires", "write_back", "default_target", "session"}

var paramKeys = []string{"name", "title", "description", "type", "group", "default", "pattern",
	"values", "secret", "required", "sandbox"}

// parseFrontMatter fills r.Meta, r.Slug and r.Params. line0 is the file line
// of the YAML's first line.
func (p *parseState) parseFrontMatter(fm []byte, line0 int) {
	var doc yaml.Node
	if err := yaml.Unmarshal(fm, &doc); err != nil {
		p.errf(Pos{Line: line0 + yamlErrLine(err) - 1}, "front matter: %s", yamlErrMsg(err))
		return
	}
	if len(doc.Content) == 0 {
		p.errf(Pos{Line: line0}, "front matter is empty; it needs at least a title")
		return
	}
	root := doc.Content[0]
	at := func(n *yaml.Node) Pos { return Pos{Line: line0 + n.Line - 1, Col: n.Column} }
	if root.Kind != yaml.MappingNode {
		p.errf(at(root), "front matter must be a mapping of keys to values")
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if seen[k.Value] {
			p.errf(at(k), "front matter: duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		decode := func(dst any, what string) bool {
			if err := v.Decode(dst); err != nil {
				p.errf(at(v), "front matter: %s: must be %s", k.Value, what)
				return false
			}
			return true
		}
		m := &p.rb.Meta
		switch k.Value {
		case "title":
			decode(&m.Title, "a string")
		case "slug":
			if decode(&p.rb.Slug, "a string") && !slugRe.MatchString(p.rb.Slug) {
				p.errf(at(v), "front matter: slug %q must match [a-z0-9][a-z0-9-]*", p.rb.Slug)
			}
		case "summary":
			decode(&m.Summary, "a string")
		case "lang":
			if decode(&m.Lang, "a string") && m.Lang != "ko" && m.Lang != "en" {
				p.errf(at(v), "front matter: lang %q is not supported; use ko or en", m.Lang)
			}
		case "tags":
			decode(&m.Tags, "a list of strings")
		case "duration":
			var s string
			if decode(&s, "a duration such as 45m") {
				d, err := time.ParseDuration(s)
				if err != nil || d < 0 {
					p.errf(at(v), "front matter: duration %q: use a Go duration such as 45m or 1h30m", s)
				}
				m.Duration = d
			}
		case "weight":
			decode(&m.Weight, "an integer")
		case "prerequisites":
			decode(&m.Prerequisites, "a list of strings")
		case "write_back":
			decode(&m.WriteBack, "true or false")
		case "default_target":
			var t string
			if decode(&t, "local or kube") {
				if t != string(TargetLocal) && t != string(TargetKube) {
					p.errf(at(v), "front matter: default_target %q: use local or kube (ssh blocks need hosts=, so they say target=ssh themselves)", t)
				} else {
					m.DefaultTarget = Target(t)
				}
			}
		case "session":
			var name string
			if decode(&name, "a session name") {
				if !sessionNameRe.MatchString(name) {
					p.errf(at(v), "front matter: session %q: use lower-case letters, digits and dashes (up to 32)", name)
				} else {
					m.Session = name
				}
			}
		case "requires":
			var req Requires
			if v.Kind != yaml.MappingNode {
				p.errf(at(v), "front matter: requires: must be a mapping with images, charts, binaries, hosts, resources")
				break
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				rk, rv := v.Content[j], v.Content[j+1]
				var dst *[]string
				switch rk.Value {
				case "images":
					dst = &req.Images
				case "charts":
					dst = &req.Charts
				case "binaries":
					dst = &req.Binaries
				case "resources":
					dst = &req.Resources
				case "hosts":
					if rv.Kind != yaml.MappingNode {
						p.errf(at(rv), "front matter: requires.hosts: must map a host parameter to binaries, e.g. {CONTROL_PLANE_HOSTS: [kubeadm]}")
						continue
					}
					for k := 0; k+1 < len(rv.Content); k += 2 {
						hr := HostRequire{Param: rv.Content[k].Value, Pos: at(rv.Content[k])}
						if err := rv.Content[k+1].Decode(&hr.Binaries); err != nil {
							p.errf(at(rv.Content[k+1]), "front matter: requires.hosts.%s: must be a list of binaries", hr.Param)
							continue
						}
						for _, b := range hr.Binaries {
							if !requiredName.MatchString(b) {
								p.errf(at(rv.Content[k+1]), "front matter: requires.hosts.%s: %q is not a command name", hr.Param, b)
							}
						}
						req.Hosts = append(req.Hosts, hr)
					}
					continue
				default:
					p.errf(at(rk), "front matter: requires: unknown key %q (known: images, charts, binaries, hosts, resources)", rk.Value)
					continue
				}
				if err := rv.Decode(dst); err != nil {
					p.errf(at(rv), "front matter: requires.%s: must be a list of strings", rk.Value)
					continue
				}
				if rk.Value == "binaries" || rk.Value == "resources" {
					for _, b := range *dst {
						if !requiredName.MatchString(b) {
							p.errf(at(rv), "front matter: requires.%s: %q is not a command or resource name", rk.Value, b)
						}
					}
				}
			}
			m.Requires = req
		case "kube":
			if v.Kind != yaml.MappingNode {
				p.errf(at(v), "front matter: kube: must be a mapping such as {contexts: [my-cluster]}")
				break
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				kk := v.Content[j]
				if kk.Value != "contexts" {
					p.errf(at(kk), "front matter: kube: unknown key %q (known: contexts)", kk.Value)
					continue
				}
				if err := v.Content[j+1].Decode(&m.KubeContexts); err != nil {
					p.errf(at(v.Content[j+1]), "front matter: kube.contexts: must be a list of context names")
				}
			}
		case "params":
			p.parseParams(v, at)
		default:
			// Another tool's key (runme, weight of a theme, reviewers …):
			// kept for themes, like Hugo's .Params, and reported.
			var val any
			if err := v.Decode(&val); err == nil {
				if m.Extra == nil {
					m.Extra = map[string]any{}
				}
				m.Extra[k.Value] = val
			}
			hint := ""
			if n := nearest(k.Value, frontMatterKeys); n != "" {
				hint = fmt.Sprintf("; did you mean %q?", n)
			}
			p.warnf(at(k), "front matter: unknown key %q is kept for themes and otherwise ignored%s", k.Value, hint)
		}
	}
	if p.rb.Meta.Title == "" {
		// Another tool's front matter (a Runme notebook's runme: and
		// shell:): titled like a file without one.
		p.warnf(Pos{Line: line0 - 1}, "front matter has no title: the title comes from the first # heading or the file name; add title: to set it")
		p.titleFromHeading = true
	}
}

func (p *parseState) parseParams(v *yaml.Node, at func(*yaml.Node) Pos) {
	if v.Kind != yaml.SequenceNode {
		p.errf(at(v), "front matter: params: must be a list of parameters (- name: ...)")
		return
	}
	for _, item := range v.Content {
		if item.Kind != yaml.MappingNode {
			p.errf(at(item), "front matter: params: each parameter must be a mapping with at least a name")
			continue
		}
		prm := &Param{Pos: at(item), Type: TypeString}
		required, requiredSet := false, false
		var patternNode, defaultNode, sandboxNode *yaml.Node
		for j := 0; j+1 < len(item.Content); j += 2 {
			k, val := item.Content[j], item.Content[j+1]
			str := func(dst *string) {
				if val.Kind != yaml.ScalarNode {
					p.errf(at(val), "param %s: %s: must be a single value", prm.Name, k.Value)
					return
				}
				*dst = val.Value
			}
			switch k.Value {
			case "name":
				str(&prm.Name)
			case "title":
				str(&prm.Title)
			case "description":
				str(&prm.Description)
			case "group":
				str(&prm.Group)
			case "type":
				var t string
				str(&t)
				prm.Type = ParamType(t)
			case "default":
				defaultNode = val
				prm.HasDefault = true
				if val.Kind == yaml.SequenceNode {
					// A host list may be written as a YAML list.
					var items []string
					if err := val.Decode(&items); err != nil {
						p.errf(at(val), "param %s: default: must be a value or a list of values", prm.Name)
					}
					prm.Default = strings.Join(items, " ")
				} else {
					str(&prm.Default)
				}
			case "pattern":
				patternNode = val
			case "values":
				if err := val.Decode(&prm.Values); err != nil {
					p.errf(at(val), "param %s: values: must be a list of strings", prm.Name)
				}
			case "secret":
				if err := val.Decode(&prm.Secret); err != nil {
					p.errf(at(val), "param %s: secret: must be true or false", prm.Name)
				}
			case "sandbox":
				sandboxNode = val
				str(&prm.Sandbox)
			case "required":
				requiredSet = true
				if err := val.Decode(&required); err != nil {
					p.errf(at(val), "param %s: required: must be true or false", prm.Name)
				}
			default:
				hint := ""
				if n := nearest(k.Value, paramKeys); n != "" {
					hint = fmt.Sprintf("; did you mean %q?", n)
				}
				who := "param " + prm.Name
				if prm.Name == "" {
					who = "params"
				}
				p.errf(at(k), "%s: unknown key %q%s", who, k.Value, hint)
			}
		}
		switch {
		case prm.Name == "":
			p.errf(prm.Pos, "params: a parameter has no name")
			continue
		case !paramNameRe.MatchString(prm.Name):
			p.errf(prm.Pos, "param %q: name must match [A-Z][A-Z0-9_]* (it becomes an environment variable)", prm.Name)
		case p.rb.ParamByName(prm.Name) != nil:
			p.errf(prm.Pos, "param %s: declared twice (first at line %d)", prm.Name, p.rb.ParamByName(prm.Name).Pos.Line)
			continue
		case reservedEnv[prm.Name]:
			p.errf(prm.Pos, "param %s: the name is a well-known environment variable; choose another", prm.Name)
		}
		switch prm.Type {
		case TypeString, TypeInt, TypeBool, TypeEnum, TypeHost, TypeHosts, TypeCIDR, TypeDuration:
		default:
			p.errf(prm.Pos, "param %s: unknown type %q (known: string, int, bool, enum, host, hosts, cidr, duration)", prm.Name, prm.Type)
			prm.Type = TypeString
		}
		if prm.Type == TypeEnum && len(prm.Values) == 0 {
			p.errf(prm.Pos, "param %s: an enum needs values: [a, b, ...]", prm.Name)
		}
		if prm.Type != TypeEnum && len(prm.Values) > 0 {
			p.errf(prm.Pos, "param %s: values is only for type enum", prm.Name)
		}
		if prm.Group != "" && prm.Type != TypeHost && prm.Type != TypeHosts {
			p.errf(prm.Pos, "param %s: group is only for host and hosts parameters", prm.Name)
		}
		if patternNode != nil {
			re, err := regexp.Compile(patternNode.Value)
			if err != nil {
				p.errf(at(patternNode), "param %s: pattern: %s", prm.Name, reErr(err))
			}
			prm.Pattern = re
		}
		if sandboxNode != nil && !contains(SandboxFacts, prm.Sandbox) {
			hint := ""
			if n := nearest(prm.Sandbox, SandboxFacts); n != "" {
				hint = fmt.Sprintf("did you mean %q? ", n)
			}
			p.errf(at(sandboxNode), "param %s: sandbox: unknown sandbox fact %q (%sknown: %s)", prm.Name, prm.Sandbox, hint, strings.Join(SandboxFacts, ", "))
		}
		if prm.Sandbox != "" && prm.Secret {
			p.errf(at(sandboxNode), "param %s: a secret parameter cannot take its value from the sandbox", prm.Name)
		}
		prm.Required = !prm.HasDefault
		if requiredSet {
			prm.Required = required
		}
		if prm.Secret && prm.HasDefault {
			p.errf(at(defaultNode), "param %s: a secret parameter cannot have a default (it would be stored in the runbook)", prm.Name)
		}
		if prm.HasDefault && !(prm.Default == "" && !prm.Required) {
			if err := prm.Validate(prm.Default); err != nil {
				p.errf(at(defaultNode), "param %s: default %q: %v", prm.Name, prm.Default, err)
			}
		}
		p.rb.Params = append(p.rb.Params, prm)
	}
}

// Validate checks a value against the parameter's type and pattern.
func (p *Param) Validate(v string) error {
	check := func(s string) error {
		if p.Pattern != nil && !p.Pattern.MatchString(s) {
			return fmt.Errorf("does not match pattern %s", p.Pattern)
		}
		return nil
	}
	switch p.Type {
	case TypeInt:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("not an integer")
		}
	case TypeBool:
		if v != "true" && v != "false" {
			return fmt.Errorf("must be true or false")
		}
	case TypeEnum:
		if !contains(p.Values, v) {
			return fmt.Errorf("must be one of %s", strings.Join(p.Values, ", "))
		}
	case TypeHost:
		if err := validHost(v); err != nil {
			return err
		}
	case TypeHosts:
		hs := SplitHosts(v)
		if len(hs) == 0 {
			return fmt.Errorf("needs at least one host")
		}
		for _, h := range hs {
			if err := validHost(h); err != nil {
				return fmt.Errorf("%q: %v", h, err)
			}
			if err := check(h); err != nil {
				return fmt.Errorf("%q: %v", h, err)
			}
		}
		return nil
	case TypeCIDR:
		if _, err := netip.ParsePrefix(v); err != nil {
			return fmt.Errorf("not a CIDR prefix such as 10.0.0.0/16")
		}
	case TypeDuration:
		if _, err := time.ParseDuration(v); err != nil {
			return fmt.Errorf("not a duration such as 90s or 5m")
		}
	}
	return check(v)
}

// requiredName is a command or API resource name in requires: it reaches
// shell commands as data, but is checked anyway so a typo is caught early.
var requiredName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

var yamlLineRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

func yamlErrLine(err error) int {
	m := yamlLineRe.FindStringSubmatch(err.Error())
	if m == nil || m[1] == "" {
		return 1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func yamlErrMsg(err error) string {
	return "invalid YAML: " + yamlLineRe.ReplaceAllString(err.Error(), "")
}

func reErr(err error) string {
	s := err.Error()
	return strings.TrimPrefix(s, "error parsing regexp: ")
}
