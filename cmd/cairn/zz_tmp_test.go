package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/sandbox"
	"github.com/cairn-dev/cairn/sandbox/testrig"
)

func TestTmpBundleAll(t *testing.T) {
	bin := "/root/.cache/cairn/sandbox/v1.37.2-etcd3.6.16/bin"
	archives := map[string]string{}
	var refs []string
	for _, im := range sandbox.AllImages() {
		archives[im.Ref] = filepath.Join(sandbox.ImagesDir(bin), im.Archive())
		refs = append(refs, im.Ref)
	}
	start := time.Now()
	reg := testrig.Registry(t, "/tmp/s25/registry2", archives)
	t.Logf("registry seeded in %s", time.Since(start))
	os.WriteFile("/tmp/s25/list.txt", []byte(strings.Join(refs, "\n")+"\n"), 0o644)
	start = time.Now()
	code, _, stderr := run(t, "export", "--bundle", "/tmp/s25/full2.tgz", "--content", "../../content", "--images", "/tmp/s25/list.txt",
		"--from", "registry.k8s.io="+reg+"/registry.k8s.io", "--from", "cairn.internal="+reg+"/cairn.internal", "--from", "quay.io="+reg+"/quay.io",
		"--omit", "busybox:1.37", "--omit", "docker.io/library/nginx", "--chart", "cilium/cilium="+sandbox.CiliumChart(bin))
	t.Logf("bundle in %s\n%s", time.Since(start), stderr)
	if code != 0 {
		t.Fatal(code)
	}
}
