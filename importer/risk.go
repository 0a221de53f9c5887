package importer

import (
	"regexp"
	"strings"

	"github.com/cairn-dev/cairn/runbook"
)

// Imported blocks are safe by default: a README's shell blocks were written
// to be read, and some of them delete, uninstall or change a cluster. A
// block that changes things is imported with confirm=, so the page, cairn
// run and the exported script ask before it runs; the report says why.

// risk says why a block must be confirmed before it runs, or "".
func risk(content, heading string, inDetails bool) string {
	if why := changingCommand(content); why != "" {
		return why
	}
	if inDetails {
		return "it is inside <details>, usually an optional or clean-up step"
	}
	if cleanupHeading.MatchString(heading) {
		return "it is under the heading " + `"` + heading + `"`
	}
	return ""
}

var cleanupHeading = regexp.MustCompile(`(?i)uninstall|clean[ -]?up|tear[ -]?down|teardown|remov|delet|destroy|reset|purge|rollback|삭제|제거|정리|초기화`)

// kubectlWrites are the kubectl (and oc) verbs that change a cluster.
var kubectlWrites = map[string]bool{
	"apply": true, "create": true, "delete": true, "patch": true, "replace": true, "scale": true, "edit": true,
	"label": true, "annotate": true, "taint": true, "drain": true, "cordon": true, "uncordon": true, "set": true,
	"expose": true, "run": true, "autoscale": true, "rollout": true, "cp": true, "certificate": true, "debug": true,
	"exec": true,
}

// helmWrites are the helm verbs that change a cluster.
var helmWrites = map[string]bool{"install": true, "upgrade": true, "uninstall": true, "delete": true, "rollback": true, "del": true, "un": true}

// commandWrites are commands that change a machine whatever their
// arguments.
var commandWrites = map[string]bool{
	"rm": true, "rmdir": true, "shred": true, "dd": true, "wipefs": true, "fdisk": true, "parted": true, "sfdisk": true,
	"truncate": true, "unlink": true, "reboot": true, "shutdown": true, "poweroff": true, "halt": true, "kill": true,
	"killall": true, "pkill": true, "iptables": true, "ip6tables": true, "nft": true, "mkfs": true, "userdel": true,
	"groupdel": true, "crontab": true, "mv": true,
}

// subcommandWrites are words that, as a subcommand of any tool, change
// things (terraform destroy, cilium uninstall, gcloud ... delete, apt
// remove, kubeadm reset, systemctl stop).
var subcommandWrites = map[string]bool{
	"delete": true, "remove": true, "rm": true, "uninstall": true, "purge": true, "destroy": true, "reset": true,
	"apply": true, "drain": true, "prune": true, "stop": true, "disable": true, "mask": true, "restart": true,
	"autoremove": true, "wipe": true, "erase": true, "rollback": true, "reboot": true, "poweroff": true,
}

// valueFlags are kubectl and helm flags whose value is the next word.
var valueFlags = map[string]bool{
	"-n": true, "--namespace": true, "--context": true, "--kubeconfig": true, "--cluster": true, "--user": true,
	"-s": true, "--server": true, "--kube-context": true, "--as": true,
}

// changingCommand names the first command of a shell body that changes
// things ("kubectl delete", "rm"), or "".
func changingCommand(body string) string {
	for _, w := range runbook.ShellCommands(body) {
		name := w[0]
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		args := w[1:]
		switch {
		case commandWrites[name] || strings.HasPrefix(name, "mkfs."):
			return "it runs " + name
		case strings.Contains(name, "uninstall") || strings.Contains(name, "cleanup"):
			return "it runs " + name
		case name == "tee" || name == "sed" && len(args) > 0 && strings.HasPrefix(args[0], "-i"):
			for _, a := range args {
				if (strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~")) && !strings.HasPrefix(a, "/dev/") && !strings.HasPrefix(a, "/tmp/") {
					return "it writes " + a
				}
			}
		case (name == "sh" || name == "bash" || name == "zsh") && (len(args) == 0 || args[0] == "-s" || args[0] == "-"):
			return "it pipes a script into " + name
		case name == "kubectl" || name == "oc" || name == "k":
			if v := firstVerb(args); kubectlWrites[v] {
				return "it runs " + name + " " + v
			}
		case name == "kubeadm":
			if v := firstVerb(args); v == "init" || v == "join" || v == "reset" || v == "upgrade" {
				return "it runs kubeadm " + v
			}
		case name == "helm":
			if v := firstVerb(args); helmWrites[v] {
				return "it runs helm " + v
			}
		default:
			// Any tool's subcommand: the first few words that are not
			// flags (gcloud container clusters delete).
			n := 0
			for _, a := range args {
				if strings.HasPrefix(a, "-") {
					continue
				}
				if subcommandWrites[a] {
					return "it runs " + name + " " + a
				}
				if n++; n == 3 {
					break
				}
			}
		}
		// Output written over a system or home file (not /tmp, /dev).
		for i, a := range w {
			if (a == ">" || a == ">|") && i+1 < len(w) {
				f := w[i+1]
				if (strings.HasPrefix(f, "/") || strings.HasPrefix(f, "~")) && !strings.HasPrefix(f, "/dev/") && !strings.HasPrefix(f, "/tmp/") {
					return "it writes " + f
				}
			}
		}
	}
	return ""
}

// firstVerb is the first word of args that is not a flag or a flag's
// value.
func firstVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			if valueFlags[a] {
				i++
			}
			continue
		}
		return a
	}
	return ""
}

// blockContext is what surrounds the block starting at offset: the nearest
// heading above it and whether it sits inside an HTML <details> element
// (counted outside code fences).
func blockContext(src []byte, offset int) (heading string, inDetails bool) {
	depth := 0
	fence := ""
	for _, line := range strings.Split(string(src[:offset]), "\n") {
		t := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := strings.TrimSpace(fenceOf(line)); len(f) >= 3 && strings.Trim(f, f[:1]) == "" {
			fence = f
			continue
		}
		if strings.HasPrefix(t, "#") {
			h := strings.TrimLeft(t, "#")
			if h == "" || h[0] == ' ' || h[0] == '\t' {
				heading = strings.TrimSpace(h)
				if i := strings.LastIndexByte(heading, '{'); i >= 0 && strings.HasSuffix(heading, "}") {
					heading = strings.TrimSpace(heading[:i])
				}
			}
		}
		lower := strings.ToLower(t)
		depth += strings.Count(lower, "<details") - strings.Count(lower, "</details>")
		if depth < 0 {
			depth = 0
		}
	}
	return heading, depth > 0
}
