package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/bench/gen"
	"github.com/cairn-dev/cairn/site"
)

// editTimeout bounds the wait for one rebuild.
const editTimeout = 10 * time.Second

type incResult struct {
	latency  []time.Duration // write → OnUpdate
	update   []time.Duration // Result.Duration: Builder.Update alone
	timeouts int
}

type update struct {
	at  time.Time
	res *site.Result
	err error
}

// incremental starts the dev server in this process on the content folder,
// then changes one runbook's body at a time and measures from the write to
// the server's OnUpdate. Each edit goes to another file and appends a
// paragraph, so navigation stays the same and one page is re-rendered.
func incremental(ctx context.Context, opts site.Options, paths []string, edits int, out io.Writer) (*incResult, error) {
	b, err := site.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ready := make(chan string, 1)
	updates := make(chan update, 16)
	srv := site.NewServer(b, site.ServerOptions{
		Addr:  "127.0.0.1:0",
		Ready: func(url string) { ready <- url },
		OnUpdate: func(res *site.Result, err error) {
			updates <- update{time.Now(), res, err}
		},
	})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		return nil, fmt.Errorf("serve: %w", err)
	case <-time.After(5 * time.Minute):
		return nil, fmt.Errorf("serve: not ready after 5 minutes")
	}

	r := &incResult{}
	for e := range edits {
		// Let stray events of the previous edit settle, then drop them.
		time.Sleep(150 * time.Millisecond)
	drain:
		for {
			select {
			case <-updates:
			default:
				break drain
			}
		}
		i := (e*37 + 11) % len(paths)
		src, err := os.ReadFile(paths[i])
		if err != nil {
			return nil, err
		}
		marker := fmt.Sprintf("bench-edit-%d-%d", e, time.Now().UnixNano())
		src = append(src, fmt.Sprintf("\nEdited for the benchmark: `%s`.\n", marker)...)
		start := time.Now()
		if err := os.WriteFile(paths[i], src, 0o644); err != nil {
			return nil, err
		}
		select {
		case u := <-updates:
			if u.err != nil {
				return nil, fmt.Errorf("rebuild after editing %s: %w", paths[i], u.err)
			}
			if len(u.res.Diagnostics) > 0 {
				return nil, fmt.Errorf("rebuild after editing %s: %v", paths[i], u.res.Diagnostics)
			}
			r.latency = append(r.latency, u.at.Sub(start))
			r.update = append(r.update, u.res.Duration)
			fmt.Fprintf(out, "  edit %2d/%d %s: %s (Update %s, %d page re-rendered)\n", e+1, edits,
				gen.Name(i), ms(u.at.Sub(start)), ms(u.res.Duration), u.res.Rendered)
		case <-time.After(editTimeout):
			r.timeouts++
			fmt.Fprintf(out, "  edit %2d/%d %s: no rebuild within %s\n", e+1, edits, gen.Name(i), editTimeout)
			continue
		}
		// Not timed: the served page has the edit.
		slug := strings.TrimSuffix(gen.Name(i), ".md")
		if err := pageContains(url+slug+"/", marker); err != nil {
			return nil, err
		}
	}
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil {
		return nil, err
	}
	return r, nil
}

func pageContains(url, marker string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), marker) {
		return fmt.Errorf("GET %s: status %d, edit %s not in the page", url, resp.StatusCode, marker)
	}
	return nil
}
