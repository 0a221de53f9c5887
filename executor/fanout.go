package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrSkipped is the Err of a host (pod, node) that was not started because
// another one of the block failed.
var ErrSkipped = errors.New("skipped: an earlier host failed")

// FanOut runs one block on each of names, par at a time, the way every
// fanning runner (ssh hosts, pods, nodes) does: in order with par 1; after
// a failure (an Err, or an exit status the block does not expect) no
// further name is started: the ones running finish and the rest are
// skipped (Exit -1, Err ErrSkipped). Every name gets one host-end event,
// host-start only when it was started. run fills Exit, Err and Objects;
// FanOut fills Host, Start and Duration. Results are in the order of names.
func FanOut(ctx context.Context, job *Job, names []string, par int, run func(ctx context.Context, name string) HostResult, out Sink) []HostResult {
	results := make([]HostResult, len(names))
	par = min(max(par, 1), len(names))
	var failed atomic.Bool
	next := make(chan int)
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for i := range next {
				results[i] = fanOne(ctx, job, names[i], run, out, &failed)
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	return results
}

func fanOne(ctx context.Context, job *Job, name string, run func(ctx context.Context, name string) HostResult, out Sink, failed *atomic.Bool) HostResult {
	hr := HostResult{Host: name, Exit: -1, Start: time.Now()}
	var skip error
	switch {
	case ctx.Err() != nil:
		skip = fmt.Errorf("not started: %w", CtxErr(ctx))
	case failed.Load():
		skip = ErrSkipped
	}
	if skip != nil {
		hr.Err = skip
		out.Event(Event{Kind: "host-end", Host: name, Exit: -1, Message: skip.Error()})
		return hr
	}
	out.Event(Event{Kind: "host-start", Host: name})
	got := run(ctx, name)
	hr.Exit, hr.Err, hr.Objects = got.Exit, got.Err, got.Objects
	hr.Duration = time.Since(hr.Start)
	if hr.Err != nil || !job.Block.Expect.AnyExit && hr.Exit != job.Block.Expect.Exit {
		failed.Store(true)
	}
	ev := Event{Kind: "host-end", Host: name, Exit: hr.Exit}
	if hr.Err != nil {
		ev.Message = hr.Err.Error()
	}
	out.Event(ev)
	return hr
}

// CtxErr is the error for a run that ctx ended: ErrTimeout for a deadline,
// else ctx's own error.
func CtxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ctx.Err()
}
