package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/pkg/sftp"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// sudoSFTPCommand starts OpenSSH's sftp-server under sudo -n, from the first
// of the usual places that has it.
const sudoSFTPCommand = `exec /bin/sh -c 'for p in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/lib/ssh/sftp-server /usr/libexec/sftp-server /usr/lib/sftp-server; do if [ -x "$p" ]; then exec sudo -n "$p"; fi; done; echo "no sftp-server program in /usr/lib/openssh, /usr/libexec/openssh, /usr/lib/ssh or /usr/libexec: install the OpenSSH SFTP server package" >&2; exit 127'`

// openSFTP starts an SFTP client on c: the sftp subsystem, or with sudo an
// sftp-server run through sudo -n.
func openSFTP(c *client, sudo bool) (*sftp.Client, error) {
	h := c.host
	if !sudo {
		sc, err := sftp.NewClient(c.Client)
		if err != nil {
			return nil, fmt.Errorf("%s: start SFTP: %w; does sshd allow the sftp subsystem?", h, err)
		}
		return sc, nil
	}
	s, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("%s: open a session: %w", h, err)
	}
	stdin, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", h, err)
	}
	stdout, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: %w", h, err)
	}
	stderr := &boundedBuffer{max: 4096}
	s.Stderr = stderr
	if err := s.Start(sudoSFTPCommand); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: start sftp-server under sudo: %w", h, err)
	}
	sc, err := sftp.NewClientPipe(stdout, stdin)
	if err != nil {
		s.Close()
		_ = s.Wait()
		msg := stderr.String()
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s: start sftp-server under sudo -n: %s (sudo=true needs passwordless sudo on the host)", h, msg)
	}
	return sc, nil
}

// source is where a copy reads files: this machine or a host.
type source interface {
	open(p string) (io.ReadCloser, fs.FileInfo, error)
	where(p string) string
}

type localSource struct{ home string }

func (s localSource) open(p string) (io.ReadCloser, fs.FileInfo, error) {
	f, err := os.Open(executor.ExpandHome(p, s.home))
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func (s localSource) where(p string) string { return p }

type remoteSource struct {
	name string
	sc   *sftp.Client
}

func (s remoteSource) open(p string) (io.ReadCloser, fs.FileInfo, error) {
	p, err := remotePath(s.sc, p)
	if err != nil {
		return nil, nil, err
	}
	f, err := s.sc.Open(p)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func (s remoteSource) where(p string) string { return s.name + ":" + p }

// remotePath expands a leading ~/ to the SFTP server's starting directory
// (the login user's home).
func remotePath(sc *sftp.Client, p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p, nil
	}
	wd, err := sc.Getwd()
	if err != nil {
		return "", err
	}
	return path.Join(wd, strings.TrimPrefix(p, "~")), nil
}

// copier copies a block's files from one source to each host.
type copier struct {
	r     *Runner
	job   *executor.Job
	out   executor.Sink
	src   source
	from  *Host // nil: this machine
	err   error // the source could not be opened: every host fails with it
	close func()
}

// newCopier opens the source: this machine, or an SFTP connection to
// job.From shared by every destination.
func (r *Runner) newCopier(ctx context.Context, job *executor.Job, res *resolver, out executor.Sink) *copier {
	cp := &copier{r: r, job: job, out: out, close: func() {}}
	if job.From == "" {
		cp.src = localSource{home: res.env.home}
		return cp
	}
	h, err := res.resolve(job.From)
	if err != nil {
		cp.err = fmt.Errorf("copy source: %w", err)
		return cp
	}
	cp.from = h
	c, err := r.dial(ctx, h, func(msg string) { out.Event(executor.Event{Kind: "info", Host: job.From, Message: msg}) })
	if err != nil {
		cp.err = fmt.Errorf("copy source: %w", err)
		return cp
	}
	unwatch := onDone(ctx, func() { c.Close() })
	sc, err := openSFTP(c, job.Block.Sudo)
	if err != nil {
		unwatch()
		c.Close()
		cp.err = fmt.Errorf("copy source: %w", err)
		return cp
	}
	cp.src = remoteSource{name: job.From, sc: sc}
	cp.close = func() {
		unwatch()
		sc.Close()
		c.Close()
	}
	return cp
}

// copyTo copies every file of the block to h.
func (cp *copier) copyTo(ctx context.Context, h *Host) executor.HostResult {
	hr := executor.HostResult{Exit: -1}
	if cp.err != nil {
		hr.Err = cp.err
		return hr
	}
	say := func(format string, a ...any) {
		cp.out.Output(h.Name, []byte(fmt.Sprintf(format, a...)+"\n"))
	}
	c, err := cp.r.dial(ctx, h, func(msg string) { cp.out.Event(executor.Event{Kind: "info", Host: h.Name, Message: msg}) })
	if err != nil {
		hr.Err = err
		return hr
	}
	defer c.Close()
	// SFTP calls take no context: closing the connection interrupts them.
	defer onDone(ctx, func() { c.Close() })()
	dst, err := openSFTP(c, cp.job.Block.Sudo)
	if err != nil {
		hr.Err = ctxOr(ctx, err)
		return hr
	}
	defer dst.Close()

	vals := maps.Clone(cp.job.Env)
	if vals == nil {
		vals = map[string]string{}
	}
	vals["CAIRN_HOST"], vals["CAIRN_RUN_ID"], vals["CAIRN_BLOCK"] = h.Name, cp.job.RunID, cp.job.Block.ID
	for _, f := range cp.job.Block.Copies {
		src := runbook.Substitute(f.Src, vals, false)
		dstPath := runbook.Substitute(f.Dst, vals, false)
		if cp.from != nil && cp.from.Addr == h.Addr && cp.from.User == h.User && src == dstPath {
			say("skipped %s: source and destination are the same file", cp.src.where(src))
			continue
		}
		to, n, mode, err := cp.copyFile(dst, src, dstPath)
		if err != nil {
			err = ctxOr(ctx, fmt.Errorf("%s: copy %s to %s: %w", h, cp.src.where(src), dstPath, err))
			say("copy failed: %v", err)
			hr.Err = err
			return hr
		}
		say("copied %s -> %s:%s (%d bytes, mode %04o)", cp.src.where(src), h.Name, to, n, mode)
	}
	hr.Exit = 0
	return hr
}

// ctxOr is ctx's error when ctx has ended (the failure was the connection
// being closed for it), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctxErr(ctx), err)
	}
	return err
}

// copyFile streams one file to dst: into a temporary file beside the
// destination, with the source's permission bits, then renamed into place.
// It returns the destination path written, the byte count and the mode.
func (cp *copier) copyFile(dst *sftp.Client, src, to string) (string, int64, fs.FileMode, error) {
	rf, fi, err := cp.src.open(src)
	if err != nil {
		return "", 0, 0, fmt.Errorf("open source: %w", err)
	}
	defer rf.Close()
	if err := executor.CopySource(fi); err != nil {
		return "", 0, 0, err
	}
	if to, err = remotePath(dst, to); err != nil {
		return "", 0, 0, err
	}
	base := path.Base(filepath.ToSlash(src))
	if strings.HasSuffix(to, "/") {
		to = path.Join(to, base)
	} else if st, err := dst.Stat(to); err == nil && st.IsDir() {
		to = path.Join(to, base)
	}
	dir := path.Dir(to)
	if err := dst.MkdirAll(dir); err != nil {
		return "", 0, 0, fmt.Errorf("create directory %s: %w", dir, err)
	}
	tmp := path.Join(dir, "."+path.Base(to)+".cairn-"+randomSuffix())
	wf, err := dst.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return "", 0, 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	mode := fi.Mode().Perm()
	n, err := io.Copy(wf, rf)
	if err == nil {
		err = wf.Chmod(mode)
	}
	if cerr := wf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(dst, tmp, to)
	}
	if err != nil {
		_ = dst.Remove(tmp)
		return "", 0, 0, err
	}
	return to, n, mode, nil
}

// rename moves tmp over to: atomically where the server has OpenSSH's
// posix-rename extension, else by removing to first.
func rename(sc *sftp.Client, tmp, to string) error {
	if _, ok := sc.HasExtension("posix-rename@openssh.com"); ok {
		return sc.PosixRename(tmp, to)
	}
	if err := sc.Remove(to); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return sc.Rename(tmp, to)
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
