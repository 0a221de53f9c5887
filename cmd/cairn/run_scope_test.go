package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/sandbox"
)

func TestSandboxScope(t *testing.T) {
	const src = "---\ntitle: t\nparams:\n  - name: A\n    type: hosts\n  - name: B\n    type: hosts\n---\n\n# T\n\n## S {#s}\n\n" +
		"```bash {#on-a target=ssh hosts=A}\ntrue\n```\n\n" +
		"```bash {#on-b target=ssh hosts=B}\ntrue\n```\n\n" +
		"```bash {#here target=local}\ntrue\n```\n\n" +
		"```bash {#in-pods target=pod selector=app=x namespace=default}\ntrue\n```\n"
	rb, err := runbook.Parse("t.md", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	blocks := func(ids ...string) []*runbook.Block {
		var bs []*runbook.Block
		for _, id := range ids {
			i := slices.IndexFunc(rb.Blocks, func(b *runbook.Block) bool { return b.ID == id })
			if i < 0 {
				t.Fatalf("no block %s", id)
			}
			bs = append(bs, rb.Blocks[i])
		}
		return bs
	}
	for _, tc := range []struct {
		name   string
		blocks []*runbook.Block
		given  map[string]string
		want   *sandbox.Scope
	}{
		{"local only: nothing", blocks("here"), nil, &sandbox.Scope{Hosts: []string{}}},
		{"pods: the cluster", blocks("here", "in-pods"), nil, &sandbox.Scope{Cluster: true, Hosts: []string{}}},
		{"hosts given: those", blocks("on-a"), map[string]string{"A": "h0, root@H1:2222 h2"}, &sandbox.Scope{Hosts: []string{"h0", "h1", "h2"}}},
		{"both given", blocks("on-a", "on-b"), map[string]string{"A": "h0", "B": "h7"}, &sandbox.Scope{Hosts: []string{"h0", "h7"}}},
		{"one not given: every host", blocks("on-a", "on-b", "in-pods"), map[string]string{"A": "h0"}, &sandbox.Scope{Cluster: true}},
		{"not given first: every host", blocks("on-b", "on-a"), map[string]string{"A": "h0"}, &sandbox.Scope{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sandboxScope(tc.blocks, tc.given); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
