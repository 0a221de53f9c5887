package site_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cairn-dev/cairn/site"
)

// BenchmarkUpdateKubeadm is the rebuild behind an edit under cairn serve: the
// biggest bundled runbook, re-parsed and re-rendered after a one-word change
// of its prose. It is most of the time from the write to the open page.
func BenchmarkUpdateKubeadm(b *testing.B) {
	dir := b.TempDir()
	src, err := os.ReadFile(filepath.Join("..", "content", "kubeadm-ha.md"))
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(dir, "kubeadm-ha.md")
	if err := os.WriteFile(p, src, 0o644); err != nil {
		b.Fatal(err)
	}
	bd, err := site.New(site.Options{Content: dir})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := bd.Build(ctx); err != nil {
		b.Fatal(err)
	}
	edits := [][]byte{append(append([]byte{}, src...), "\nOne more line.\n"...), src}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := os.WriteFile(p, edits[i%2], 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := bd.Update(ctx, []string{p}); err != nil {
			b.Fatal(err)
		}
	}
}
