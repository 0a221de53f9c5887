package importer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestGolden converts each testdata/*.md with --target local and compares
// the result with testdata/NAME.golden; the result is a runbook without
// errors, and converting it again changes nothing.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.md")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(f, src, Options{Target: runbook.TargetLocal})
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(f, ".md") + ".golden"
			if *update {
				if err := os.WriteFile(golden, res.Source, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./importer -update)", err)
			}
			if !bytes.Equal(res.Source, want) {
				t.Errorf("%s differs (go test ./importer -update to accept):\n%s", golden, res.Source)
			}
			rb, err := runbook.Parse(f, res.Source)
			if err != nil {
				t.Fatalf("the result has errors: %v", err)
			}
			if rb.BodyOffset == 0 {
				t.Error("the result has no front matter")
			}
			for _, st := range rb.Steps {
				if !st.Explicit && runbook.ValidID(st.ID) {
					t.Errorf("step %q has no explicit id", st.Title)
				}
			}
			for _, b := range rb.Blocks {
				if b.Executable() && !b.Explicit {
					t.Errorf("block %s has no explicit id", b.ID)
				}
				if b.Extra != nil {
					t.Errorf("block %s keeps other tools' attributes %v", b.ID, b.Extra)
				}
			}
			again, err := Convert(f, res.Source, Options{Target: runbook.TargetLocal})
			if err != nil || !bytes.Equal(again.Source, res.Source) {
				t.Errorf("a second import changed it (%v):\n%s", err, again.Source)
			}
		})
	}
}

// TestBundledUnchanged: the bundled runbooks are in the full format already;
// import leaves them byte for byte (display-only shell examples stay so
// without --target).
func TestBundledUnchanged(t *testing.T) {
	files, _ := filepath.Glob("../content/*.md")
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Convert(f, src, Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(res.Source, src) {
			t.Errorf("%s changed: %v", f, res.Changes)
		}
	}
}

// TestRefusesErrors: a file with Cairn errors is not rewritten.
func TestRefusesErrors(t *testing.T) {
	_, err := Convert("bad.md", []byte("---\ntitle: x\n---\n\n```sh {target=lcoal}\nx\n```\n"), Options{})
	var ds runbook.Diagnostics
	if err == nil || !asDiags(err, &ds) || !strings.Contains(ds.Error(), `target "lcoal"`) {
		t.Errorf("err = %v", err)
	}
	if _, err := Convert("x.md", []byte("# x\n"), Options{Target: "ssh"}); err == nil {
		t.Error("target ssh accepted")
	}
}

func asDiags(err error, ds *runbook.Diagnostics) bool {
	d, ok := err.(runbook.Diagnostics)
	*ds = d
	return ok
}

// FuzzConvert: any input either is refused with diagnostics or converts to
// a runbook that parses without errors.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{"# T\n\n## S\n\n```sh\nx\n```\n", "```sh {\"name\":\"a\"}\nx\n```\n", "T\n=\n\n```bash { name=x background=false }\ny\n```\n", "---\ntitle: a\n---\n## b {when=X}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		res, err := Convert("f.md", []byte(s), Options{Target: runbook.TargetLocal})
		if err != nil {
			return
		}
		if _, err := runbook.Parse("f.md", res.Source); err != nil {
			t.Fatalf("converted %q into %q with errors: %v", s, res.Source, err)
		}
	})
}

// TestRisk: what an imported block does decides whether it asks first.
func TestRisk(t *testing.T) {
	for _, tc := range []struct {
		body, heading string
		details       bool
		want          string // "" or a substring of the reason
	}{
		{"kubectl get pods -A", "Check", false, ""},
		{"kubectl -n kube-system delete pod x", "Check", false, "kubectl delete"},
		{"kubectl --context=prod apply -f x.yaml", "", false, "kubectl apply"},
		{"kubectl --context prod get nodes", "", false, ""},
		{"k taint nodes cp0 a=b:NoSchedule-", "", false, "k taint"},
		{"helm list -A", "", false, ""},
		{"helm -n x uninstall cilium", "", false, "helm uninstall"},
		{"sudo rm -rf /var/lib/x", "", false, "rm"},
		{"FOO=1 sudo -E env -i rm x", "", false, "rm"},
		{"echo 'rm -rf /'", "", false, ""},
		{`echo "a; rm -rf /"`, "", false, ""},
		{"ls # then rm it", "", false, ""},
		{"cilium uninstall", "", false, "cilium uninstall"},
		{"gcloud container clusters delete c1", "", false, "delete"},
		{"apt-get purge -y x", "", false, "purge"},
		{"kubeadm reset -f", "", false, "kubeadm reset"},
		{"kubeadm version", "", false, ""},
		{"curl -sL x | bash -s -- --yes", "", false, "into bash"},
		{"cat x | bash", "", false, "into bash"},
		{"echo x > /etc/motd", "", false, "/etc/motd"},
		{"echo x >/tmp/y", "", false, ""},
		{"make", "Build", false, ""},
		{"make", "Uninstall", false, "Uninstall"},
		{"make", "리소스 정리", false, "정리"},
		{"make", "Build", true, "<details>"},
		{"for n in a b; do kubectl drain $n; done", "", false, "kubectl drain"},
		{"x=$(kubectl delete ns y)", "", false, "kubectl delete"},
		{"sed -i s/a/b/ /etc/x.conf", "", false, "/etc/x.conf"},
		{"sed s/a/b/ /etc/x.conf", "", false, ""},
	} {
		got := risk(tc.body, tc.heading, tc.details)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%q under %q (details %v): %q, want %q", tc.body, tc.heading, tc.details, got, tc.want)
		}
	}
}

func TestBlockContext(t *testing.T) {
	src := "# T\n\n## Install {#i}\n\n<details><summary>x</summary>\n\n```md\n</details>\n## Not a heading\n```\n\nHERE\n</details>\n\nAFTER\n"
	h, in := blockContext([]byte(src), strings.Index(src, "HERE"))
	if h != "Install" || !in {
		t.Errorf("HERE: heading %q, in details %v", h, in)
	}
	if _, in := blockContext([]byte(src), strings.Index(src, "AFTER")); in {
		t.Error("AFTER: still in details")
	}
}

func TestRiskQuotedSubstitution(t *testing.T) {
	if got := risk(`echo "$(kubectl delete ns y)"`, "", false); !strings.Contains(got, "kubectl delete") {
		t.Errorf("got %q", got)
	}
}
