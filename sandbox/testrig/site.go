package testrig

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Signer makes an ed25519 key in dir with OpenSSH's ssh-keygen, named
// after principal, and an allowed signers file (ssh-keygen(1), ALLOWED
// SIGNERS) that lets principal sign with it. It returns both paths: what an
// exported script's --sign and cairn journal import's --allowed-signers
// take.
func Signer(t testing.TB, dir, principal string) (key, allowed string) {
	t.Helper()
	key, allowed = filepath.Join(dir, principal+".key"), filepath.Join(dir, principal+".allowed")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", principal, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(allowed, []byte(principal+" "+string(pub)), 0o644); err != nil {
		t.Fatal(err)
	}
	return key, allowed
}

// ToolPath links each tool into dir (made) from this machine's PATH, or
// from the path given as NAME=PATH: a PATH with those tools and nothing
// else, as on an air-gapped site that has no cairn.
func ToolPath(t testing.TB, dir string, tools ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools {
		name, target, given := strings.Cut(tool, "=")
		if !given {
			p, err := exec.LookPath(tool)
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			target = p
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
