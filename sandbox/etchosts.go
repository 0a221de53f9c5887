package sandbox

import (
	"fmt"
	"os"
	"strings"
)

// systemHosts is this machine's hosts file, where the sandbox (as root) adds
// LBName, as Docker Desktop adds kubernetes.docker.internal: the one name must
// reach the load balancer from this machine as from every host.
var systemHosts = "/etc/hosts"

// hostsMarker tags the line a sandbox adds, so that its Down removes exactly
// that line and no other sandbox's.
func hostsMarker(dir string) string { return "# cairn sandbox " + dir }

// addHostsLine appends "ip name marker" to the hosts file at path unless a
// line with marker is already there. The file is rewritten in place, not
// renamed over: /etc/hosts is often a bind mount.
func addHostsLine(path, ip, name, marker string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	for _, l := range strings.Split(s, "\n") {
		if strings.HasSuffix(l, marker) {
			return nil
		}
	}
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	s += fmt.Sprintf("%s %s %s\n", ip, name, marker)
	return os.WriteFile(path, []byte(s), 0o644)
}

// removeHostsLine removes the lines that end with marker.
func removeHostsLine(path, marker string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	var out strings.Builder
	removed := false
	for _, l := range lines {
		if strings.HasSuffix(strings.TrimRight(l, "\n"), marker) {
			removed = true
			continue
		}
		out.WriteString(l)
	}
	if !removed {
		return nil
	}
	return os.WriteFile(path, []byte(out.String()), 0o644)
}
