package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/runbook"
)

// ErrConflict means the runbook file changed on disk since it was loaded.
var ErrConflict = errors.New("runbook changed on disk since it was loaded")

// Write-back keeps the page readable: long output is cut.
const (
	writeBackMaxLines = 200
	writeBackMaxBytes = 32 << 10
)

// WriteBack records a verified run in the runbook's Markdown as an
// {output=ID} block right after the block (replacing an earlier one). Every
// other byte of the file is kept. The file is replaced atomically, and not
// at all when it changed on disk since rb was parsed (ErrConflict).
func WriteBack(rb *runbook.Runbook, rec *Record) ([]byte, error) {
	if rec.Status != StatusVerified {
		return nil, fmt.Errorf("write-back: run %s is %s, only verified runs are written back", rec.ID, rec.Status)
	}
	b := rb.BlockByID(rec.Block)
	if b == nil || b.Hash != rec.Hash {
		return nil, fmt.Errorf("%w: %s: block %q is not the one that ran", ErrConflict, rb.Path, rec.Block)
	}
	// A symlinked runbook is written through the link (the link stays a
	// link); a file we may not write is refused before anything is done.
	target, err := filepath.EvalSymlinks(rb.Path)
	if err != nil {
		return nil, fmt.Errorf("write-back: %w", err)
	}
	if fi, err := os.Stat(target); err == nil && fi.Mode().Perm()&0o222 == 0 {
		// Marked read-only on purpose (root could write it anyway).
		return nil, fmt.Errorf("write-back: %s is read-only (mode %v); make it writable or run without --write-back", rb.Path, fi.Mode().Perm())
	}
	if err := unix.Access(target, unix.W_OK); err != nil {
		return nil, fmt.Errorf("write-back: %s is read-only (%v); make it writable or run without --write-back", rb.Path, err)
	}
	if err := unix.Access(filepath.Dir(target), unix.W_OK); err != nil {
		return nil, fmt.Errorf("write-back: the folder of %s is read-only (%v): the file is replaced atomically through a temporary file beside it", target, err)
	}
	disk, err := os.ReadFile(target)
	if err != nil {
		return nil, fmt.Errorf("write-back: %w", err)
	}
	if sum := sha256.Sum256(disk); hex.EncodeToString(sum[:]) != rb.Hash {
		return nil, fmt.Errorf("%w: %s; reload it (the served page does so on its own) and run the block again", ErrConflict, rb.Path)
	}
	block := outputBlock(rec)
	src := rb.Source
	var out []byte
	if old := recordedFor(rb, b.ID); old != nil {
		out = append(append(append([]byte{}, src[:old.Span[0]]...), block...), src[old.Span[1]:]...)
	} else {
		at := b.Span[1]
		ins := "\n" + block
		if at > 0 && src[at-1] != '\n' {
			ins = "\n" + ins
		}
		out = append(append(append([]byte{}, src[:at]...), ins...), src[at:]...)
	}
	if err := atomicfile.Write(target, out, 0); err != nil {
		return nil, fmt.Errorf("write-back: %w", err)
	}
	return out, nil
}

// WriteBackRecorded writes a verified run back (WriteBack), records the
// outcome in rec.WriteBack and the journal (j may be nil), so that the
// page, the API and cairn run say when it failed, and returns the runbook
// read again from what was written. A journal error is returned only when
// the write-back itself went well.
func WriteBackRecorded(j *Journal, rb *runbook.Runbook, rec *Record) (*runbook.Runbook, error) {
	src, err := WriteBack(rb, rec)
	rec.WriteBack = "written"
	if err != nil {
		rec.WriteBack = err.Error()
	}
	if j != nil {
		if jerr := j.SetWriteBack(rec.ID, rec.WriteBack); jerr != nil && err == nil {
			err = fmt.Errorf("write-back: journal: %w", jerr)
		}
	}
	if src == nil {
		return nil, err
	}
	nrb, perr := runbook.Parse(rb.Path, src)
	if perr != nil {
		return nil, err // written; the watcher reports the problem on reload
	}
	return nrb, err
}

func recordedFor(rb *runbook.Runbook, id string) *runbook.Block {
	for _, x := range rb.Blocks {
		if x.Role == runbook.RoleOutput && x.OutputOf == id {
			return x
		}
	}
	return nil
}

// outputBlock renders the {output=...} fenced block for rec.
func outputBlock(rec *Record) string {
	body := cleanOutput(rec.Output)
	fence := "```"
	for strings.Contains(body, fence) {
		fence += "`"
	}
	exit := 0
	host := ""
	if len(rec.Hosts) > 0 {
		exit = rec.Hosts[0].Exit
		var hs []string
		for _, h := range rec.Hosts {
			if h.Host != "" {
				hs = append(hs, h.Host)
			}
		}
		host = strings.Join(hs, " ")
	}
	attrs := []string{"output=" + rec.Block, "status=" + string(rec.Status), "at=" + rec.Start.UTC().Format("2006-01-02T15:04:05Z")}
	switch {
	case rec.Target == string(runbook.TargetKube):
		attrs = append(attrs, "context="+quoteAttr(rec.Where))
	case rec.Target == string(runbook.TargetPod) || rec.Target == string(runbook.TargetNode):
		attrs = append(attrs, "context="+quoteAttr(rec.Where), "host="+quoteAttr(host))
	case host != "":
		attrs = append(attrs, "host="+quoteAttr(host))
	default:
		attrs = append(attrs, "host=local")
	}
	attrs = append(attrs, fmt.Sprintf("exit=%d", exit), fmt.Sprintf("duration=%.1fs", rec.Duration))
	return fmt.Sprintf("%stext {%s}\n%s%s\n", fence, strings.Join(attrs, " "), body, fence)
}

func quoteAttr(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ").Replace(s) + `"`
}

// cleanOutput keeps printable text, bounded, ending with a newline.
func cleanOutput(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r >= 0x20 && r != 0x7f {
			return r
		}
		return -1
	}, strings.ReplaceAll(s, "\r\n", "\n"))
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	cut := 0
	if len(lines) > writeBackMaxLines {
		cut = len(lines) - writeBackMaxLines
		lines = lines[cut:]
	}
	s = strings.Join(lines, "\n")
	if len(s) > writeBackMaxBytes {
		s = s[len(s)-writeBackMaxBytes:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		cut++
	}
	if cut > 0 {
		s = "… (earlier output cut)\n" + s
	}
	if s == "" {
		return ""
	}
	return s + "\n"
}
