package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
	"github.com/cairn-dev/cairn/runbook/nodepod"
)

// nodeCopy is an action=copy block on nodes: each SOURCE [DEST] line from
// this machine, or from the node of from=, to every node the block runs
// on, as root, through the node pods. A source node's files are read once
// into a folder of this machine's (staged) and sent from there to each
// node, so the source node holds one pod for the block, not one per
// destination.
type nodeCopy struct {
	r     *Runner
	job   *executor.Job
	out   executor.Sink
	from  string // the source node; "": this machine
	files []copyFile
	dir   string // staged files of a source node
}

// copyFile is one line of the block, its source read.
type copyFile struct {
	src, dst string // src filled in; dst as written (filled in per node)
	where    string // the source as a message names it
	path     string // what to open here: the source, or its staged copy
	mode     fs.FileMode
	size     int64
}

// newNodeCopy reads every source: it stats this machine's files, or makes
// a node pod on the source node and stages its files here. Any source
// that cannot be read fails the block before a node is touched.
func (r *Runner) newNodeCopy(ctx context.Context, job *executor.Job, out executor.Sink, ns, image, from string) (*nodeCopy, error) {
	nc := &nodeCopy{r: r, job: job, out: out, from: from}
	vals := maps.Clone(job.Env)
	if vals == nil {
		vals = map[string]string{}
	}
	vals["CAIRN_RUN_ID"], vals["CAIRN_BLOCK"] = job.RunID, job.Block.ID
	for _, c := range job.Block.Copies {
		nc.files = append(nc.files, copyFile{src: runbook.Substitute(c.Src, vals, false), dst: c.Dst})
	}
	if from == "" {
		home, _ := os.UserHomeDir()
		for i := range nc.files {
			f := &nc.files[i]
			f.where, f.path = f.src, executor.ExpandHome(f.src, home)
			fi, err := os.Stat(f.path)
			if err != nil {
				return nil, fmt.Errorf("%w: copy source %s: %v", executor.ErrPermanent, f.src, err)
			}
			if err := executor.CopySource(fi); err != nil {
				return nil, fmt.Errorf("%w: copy source %s: %v", executor.ErrPermanent, f.src, err)
			}
			f.mode, f.size = fi.Mode().Perm(), fi.Size()
		}
		return nc, nil
	}
	if err := r.nodesExist(ctx, []string{from}); err != nil {
		return nil, fmt.Errorf("copy source: %w", err)
	}
	dir, err := os.MkdirTemp("", "cairn-copy-")
	if err != nil {
		return nil, err
	}
	nc.dir = dir
	err = r.withNodePod(ctx, job, out, ns, from, image, func(pod string) error {
		for i := range nc.files {
			if err := nc.stage(ctx, ns, pod, i); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		nc.close()
		return nil, err
	}
	return nc, nil
}

// stage reads file i from the source node's pod into nc.dir.
func (nc *nodeCopy) stage(ctx context.Context, ns, pod string, i int) error {
	f := &nc.files[i]
	f.where = nc.from + ":" + f.src
	var stdout, stderr bytes.Buffer
	err := nc.r.stream2(ctx, ns, pod, nodepod.Container, nodeShell(nodepod.Stat, f.src), nil, &stdout, &limited{&stderr, 4096})
	if err != nil {
		return copyErr(ctx, "copy source "+f.where, err, stderr.String())
	}
	var mode uint64
	var size int64
	if fields := strings.Fields(stdout.String()); len(fields) == 2 {
		mode, err = strconv.ParseUint(fields[0], 8, 32)
		if err == nil {
			size, err = strconv.ParseInt(fields[1], 10, 64)
		}
	} else {
		err = fmt.Errorf("stat printed %q", stdout.String())
	}
	if err != nil {
		return fmt.Errorf("copy source %s: %w", f.where, err)
	}
	f.path = filepath.Join(nc.dir, strconv.Itoa(i))
	w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	stderr.Reset()
	err = nc.r.stream2(ctx, ns, pod, nodepod.Container, nodeShell(nodepod.Cat, f.src), nil, w, &limited{&stderr, 4096})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return copyErr(ctx, "copy source "+f.where, err, stderr.String())
	}
	if fi, err := os.Stat(f.path); err != nil || fi.Size() != size {
		got := int64(-1)
		if fi != nil {
			got = fi.Size()
		}
		return fmt.Errorf("copy source %s: read %d bytes of %d (the file changed, or the stream was cut short); run the block again", f.where, got, size)
	}
	f.mode, f.size = fs.FileMode(mode).Perm(), size
	return nil
}

// put sends every file to node through its pod.
func (nc *nodeCopy) put(ctx context.Context, ns, pod, node string) (int, error) {
	vals := maps.Clone(nc.job.Env)
	if vals == nil {
		vals = map[string]string{}
	}
	vals["CAIRN_HOST"], vals["CAIRN_RUN_ID"], vals["CAIRN_BLOCK"] = node, nc.job.RunID, nc.job.Block.ID
	say := func(format string, a ...any) { nc.out.Output(node, []byte(fmt.Sprintf(format, a...)+"\n")) }
	for _, f := range nc.files {
		dst := runbook.Substitute(f.dst, vals, false)
		if nc.from == node && f.src == dst {
			say("skipped %s: source and destination are the same file", f.where)
			continue
		}
		to, err := nc.putFile(ctx, ns, pod, f, dst)
		if err != nil {
			if ctx.Err() != nil {
				return -1, executor.CtxErr(ctx)
			}
			err = fmt.Errorf("%s: copy %s to %s: %w", node, f.where, dst, err)
			say("copy failed: %v", err)
			return -1, err
		}
		say("copied %s -> %s:%s (%d bytes, mode %04o)", f.where, node, to, f.size, f.mode)
	}
	return 0, nil
}

// putFile streams one file into nodepod.Put on the node and checks that
// all of it arrived.
func (nc *nodeCopy) putFile(ctx context.Context, ns, pod string, f copyFile, dst string) (string, error) {
	in, err := os.Open(f.path)
	if err != nil {
		return "", err
	}
	defer in.Close()
	tag := make([]byte, 6)
	_, _ = rand.Read(tag)
	var stdout, stderr bytes.Buffer
	cmd := nodeShell(nodepod.Put, dst, fmt.Sprintf("%04o", f.mode), path.Base(filepath.ToSlash(f.src)), hex.EncodeToString(tag))
	if err := nc.r.stream2(ctx, ns, pod, nodepod.Container, cmd, in, &limited{&stdout, 4096}, &limited{&stderr, 4096}); err != nil {
		return "", copyErr(ctx, "", err, stderr.String())
	}
	line := strings.TrimSpace(stdout.String())
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", fmt.Errorf("the node's shell printed %q", line)
	}
	to := line[:i]
	if n, _ := strconv.ParseInt(line[i+1:], 10, 64); n != f.size {
		return "", fmt.Errorf("%s received %s bytes of %d (the stream was cut short); the file there is unchanged; run the block again", to, line[i+1:], f.size)
	}
	return to, nil
}

func (nc *nodeCopy) close() {
	if nc.dir != "" {
		_ = os.RemoveAll(nc.dir)
	}
}

// nodeShell is argv for script in the node's namespaces, args as $1...
func nodeShell(script string, args ...string) []string {
	return append(append(append([]string{}, nodepod.Nsenter...), "/bin/sh", "-c", script, "cairn"), args...)
}

// copyErr is an exec's failure with what the shell said: a non-zero exit
// is the shell's message, anything else the stream's error.
func copyErr(ctx context.Context, what string, err error, stderr string) error {
	if ctx.Err() != nil {
		return executor.CtxErr(ctx)
	}
	msg := strings.TrimSpace(stderr)
	switch {
	case isExit(err) && msg != "":
		err = errors.New(msg)
	case msg != "":
		err = fmt.Errorf("%w (%s)", err, msg)
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// limited keeps the first max bytes written to it and drops the rest.
type limited struct {
	b   *bytes.Buffer
	max int
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
