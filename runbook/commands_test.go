package runbook

import (
	"slices"
	"testing"
)

func TestReadsStdin(t *testing.T) {
	for body, want := range map[string]string{
		"read -r answer\necho $answer":               "read",
		"read -p 'go on? ' x":                        "read",
		"IFS=, read -r a b <<<\"$X\"":                "",
		"read -r x < /etc/hostname":                  "",
		"while read -r l; do echo $l; done < <(ls)":  "",
		"ls | while read -r l; do echo $l; done":     "",
		"echo 'read me'":                             "",
		"sudo vi /etc/kubernetes/manifests/kcm.yaml": "vi",
		"kubectl edit deploy/x":                      "kubectl edit",
		"kubectl get pods # then read the output":    "",
		"KUBE_EDITOR=nano kubectl -n x get cm":       "",
		"echo hi && less /var/log/syslog":            "less",
	} {
		if got := readsStdin(body); got != want {
			t.Errorf("%q: %q, want %q", body, got, want)
		}
	}
}

// TestMayReadStdinCoversEveryName: the quick filter lets through every name
// readsStdin looks for, also spelled with a $ inside, as commandWords reads it.
func TestMayReadStdinCoversEveryName(t *testing.T) {
	names := []string{"read", "kubectl edit x"}
	for n := range interactive {
		names = append(names, n, "/usr/bin/"+n, "sudo "+n)
	}
	for _, n := range names {
		for _, body := range []string{n, n[:1] + "$" + n[1:]} {
			if !mayReadStdin(body) {
				t.Errorf("%q is filtered out", body)
			}
		}
		if got := readsStdin(n[:1] + "$" + n[1:]); got == "" {
			t.Errorf("%q: readsStdin finds nothing", n[:1]+"$"+n[1:])
		}
	}
}

func TestStdinWordsAreTheNames(t *testing.T) {
	for n := range interactive {
		if !slices.Contains(stdinWords, n) {
			t.Errorf("%s is not in stdinWords", n)
		}
	}
	for _, body := range []string{"kubectl wait --for=condition=Ready pod/x", "echo already", "cat /proc/loadavg", "kubectl get editors"} {
		if mayReadStdin(body) {
			t.Errorf("%q passes the filter", body)
		}
	}
}
