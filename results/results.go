// Package results reads what an exported script brings back from a site
// (its --results file, JSON lines of journal records) and checks it before
// it joins the journal: the OpenSSH signature (ssh-keygen -Y verify), that
// every block is still the block the script ran (its hash), and, given the
// bundle, that the script and bundle are the ones carried there.
//
// The data flows one way: runbook model → exported script → site → this
// package → journal. Nothing here writes; cmd/cairn appends what Check
// passed, in one transaction.
package results

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/cairn-dev/cairn/executor"
	"github.com/cairn-dev/cairn/runbook"
)

// Namespace is the ssh-keygen -Y signature namespace of results files: a
// signature made for anything else (a git commit, a file) does not check.
const Namespace = "cairn-results"

// File is a results file as read.
type File struct {
	Name    string
	Records []executor.Record
	Skipped []executor.Record // records of skipped blocks: compared, not journaled
}

// IsResults reports whether data (the start of a file) holds results of an
// exported script rather than a journal export: its first record has "site".
func IsResults(data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	var probe struct {
		Site *json.RawMessage `json:"site"`
	}
	return json.Unmarshal(line, &probe) == nil && probe.Site != nil
}

// Read parses a results file strictly: every line one record with the
// fields an exported script writes. Errors name the file and line.
func Read(name string, data []byte) (*File, error) {
	f := &File{Name: name}
	lines := bytes.Split(data, []byte("\n"))
	ids := map[string]int{}
	for i, text := range lines {
		line := i + 1
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		var r executor.Record
		if err := dec.Decode(&r); err != nil {
			if i == len(lines)-1 {
				// The script writes whole lines; one without its newline
				// is a copy cut short.
				return nil, fmt.Errorf("%s:%d: the last line is cut short (%v); copy the whole file", name, line, err)
			}
			return nil, fmt.Errorf("%s:%d: not a result record: %v", name, line, err)
		}
		where := fmt.Sprintf("%s:%d", name, line)
		switch {
		case r.Site == nil:
			return nil, fmt.Errorf("%s: no \"site\": not written by an exported script (a journal export? import it without results options)", where)
		case r.ID == "" || r.Runbook == "" || r.Block == "" || r.Hash == "":
			return nil, fmt.Errorf("%s: id, runbook, block and hash are required", where)
		case r.Start.IsZero():
			return nil, fmt.Errorf("%s: block %q: no start time", where, r.Block)
		}
		switch r.Status {
		case executor.StatusVerified, executor.StatusFailed, executor.StatusError, executor.StatusCancelled, executor.StatusSkipped:
		default:
			return nil, fmt.Errorf("%s: block %q: unknown status %q", where, r.Block, r.Status)
		}
		if prev, dup := ids[r.ID]; dup {
			return nil, fmt.Errorf("%s: id %q again (first at line %d)", where, r.ID, prev)
		}
		ids[r.ID] = line
		// What only the import may say.
		r.Site.Imported, r.Site.File, r.Site.Signature, r.Site.Signer = time.Time{}, "", "", ""
		r.Compacted, r.WriteBack = false, ""
		// The script writes no captures; a file that carries some would
		// feed values into later runs here (the journal's captures).
		r.Captures = nil
		if r.Status == executor.StatusSkipped {
			f.Skipped = append(f.Skipped, r)
			continue
		}
		f.Records = append(f.Records, r)
	}
	if len(f.Records)+len(f.Skipped) == 0 {
		return nil, fmt.Errorf("%s: no records (did the script run a block?)", name)
	}
	return f, nil
}

// changed is a block whose text is not what the script ran.
type changed struct {
	Runbook, Block string
	Where          string // file:line of the block now, or why it is gone
}

// CheckContent compares every record's block hash with the block in
// content (by runbook slug): results for a block that changed since the
// script was exported would vouch for text nobody ran.
func CheckContent(f *File, set *runbook.Set) error {
	by := map[string]*runbook.Runbook{}
	for _, rb := range set.Runbooks {
		by[rb.Slug] = rb
	}
	var changes []changed
	seen := map[string]bool{}
	for _, r := range f.Records {
		key := r.Runbook + "\x00" + r.Block
		if seen[key] {
			continue
		}
		seen[key] = true
		rb := by[r.Runbook]
		if rb == nil {
			changes = append(changes, changed{r.Runbook, r.Block, "no runbook " + r.Runbook + " in the content"})
			continue
		}
		b := rb.BlockByID(r.Block)
		switch {
		case b == nil:
			changes = append(changes, changed{r.Runbook, r.Block, rb.Path + ": no such block now"})
		case b.Hash != r.Hash:
			changes = append(changes, changed{r.Runbook, r.Block, fmt.Sprintf("%s:%d", rb.Path, b.Pos.Line)})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	var lines []string
	for _, c := range changes {
		lines = append(lines, fmt.Sprintf("%s: block %q (%s)", c.Runbook, c.Block, c.Where))
	}
	return fmt.Errorf("%s: results for %d blocks whose text is not what the script ran; nothing imported:\n  %s\n"+
		"import them with the content the script was exported from, or export and run it again",
		f.Name, len(changes), strings.Join(lines, "\n  "))
}

// Bundle is what CheckBundle needs of an offline bundle.
type Bundle struct {
	Name     string
	Manifest string            // sha256 of its MANIFEST
	Files    map[string]string // MANIFEST: path → sha256
}

// ReadBundle reads the MANIFEST of a bundle (.tar.gz as cairn export
// --bundle writes it, or the folder it was unpacked to).
func ReadBundle(name string) (*Bundle, error) {
	var data []byte
	if fi, err := os.Stat(name); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	} else if fi.IsDir() {
		if data, err = os.ReadFile(path.Join(name, "MANIFEST")); err != nil {
			return nil, fmt.Errorf("bundle %s: %w (not an unpacked bundle?)", name, err)
		}
	} else if data, err = manifestFromTar(name); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := &Bundle{Name: name, Manifest: hex.EncodeToString(sum[:]), Files: map[string]string{}}
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		h, p, ok := strings.Cut(line, "  ")
		if !ok || len(h) != 64 {
			return nil, fmt.Errorf("bundle %s: MANIFEST:%d: not \"SHA256  PATH\"", name, i+1)
		}
		b.Files[p] = h
	}
	return b, nil
}

func manifestFromTar(name string) ([]byte, error) {
	fh, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", name, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("bundle %s: no MANIFEST in it", name)
		}
		if err != nil {
			return nil, fmt.Errorf("bundle %s: %w", name, err)
		}
		if _, rest, ok := strings.Cut(h.Name, "/"); ok && rest == "MANIFEST" {
			return io.ReadAll(io.LimitReader(tr, 64<<20))
		}
	}
}

// CheckBundle: every record must come from this bundle (its MANIFEST's
// hash) and from a script the MANIFEST lists with the same hash.
func CheckBundle(f *File, b *Bundle) error {
	scripts := map[string]bool{}
	for p, h := range b.Files {
		if strings.HasPrefix(p, "scripts/") {
			scripts[h] = true
		}
	}
	var bad []string
	for _, r := range f.Records {
		switch {
		case r.Site.Bundle == "":
			bad = append(bad, fmt.Sprintf("%s/%s: run from a script outside any bundle", r.Runbook, r.Block))
		case r.Site.Bundle != b.Manifest:
			bad = append(bad, fmt.Sprintf("%s/%s: from bundle %s…, not this one (%s…)", r.Runbook, r.Block, short(r.Site.Bundle), short(b.Manifest)))
		case !scripts[r.Site.Script]:
			bad = append(bad, fmt.Sprintf("%s/%s: its script (sha256 %s…) is not one the bundle carries: edited at the site?", r.Runbook, r.Block, short(r.Site.Script)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	if len(bad) > 10 {
		bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
	}
	return fmt.Errorf("%s: results for another bundle than %s; nothing imported:\n  %s", f.Name, b.Name, strings.Join(bad, "\n  "))
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Signature says how a results file's signature stands.
type Signature struct {
	State  string // executor.SignatureChecked, …Unchecked, …None
	Signer string // principal(s) from the allowed signers file, when checked
}

// ErrUnsigned: allowed signers were given, the file has no signature.
var ErrUnsigned = errors.New("not signed")

// Verify checks data (the results file's bytes) against sig (the .sig
// ssh-keygen -Y sign wrote; nil when there is none) with OpenSSH's own
// ssh-keygen and the allowed signers file (ssh-keygen(1), ALLOWED SIGNERS).
// With no allowed signers, a signature is reported unchecked.
func Verify(ctx context.Context, name string, data, sig []byte, allowedSigners string) (Signature, error) {
	switch {
	case sig == nil && allowedSigners == "":
		return Signature{State: executor.SignatureNone}, nil
	case sig == nil:
		return Signature{}, fmt.Errorf("%s: %w, but --allowed-signers asks for a signature (sign with the script's --sign KEY, or import without --allowed-signers)", name, ErrUnsigned)
	case allowedSigners == "":
		return Signature{State: executor.SignatureUnchecked}, nil
	}
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		return Signature{}, errors.New("checking a signature needs ssh-keygen (OpenSSH 8.1 or later) on PATH")
	}
	if _, err := os.Stat(allowedSigners); err != nil {
		return Signature{}, fmt.Errorf("--allowed-signers: %w", err)
	}
	dir, err := os.MkdirTemp("", "cairn-verify-")
	if err != nil {
		return Signature{}, err
	}
	defer os.RemoveAll(dir)
	sigFile := path.Join(dir, "results.sig")
	if err := os.WriteFile(sigFile, sig, 0o600); err != nil {
		return Signature{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run := func(stdin []byte, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, keygen, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return strings.TrimSpace(out.String()), err
	}
	who, err := run(nil, "-Y", "find-principals", "-s", sigFile, "-f", allowedSigners)
	if err != nil || who == "" {
		return Signature{}, fmt.Errorf("%s: signed by a key that %s does not list (ssh-keygen: %s); nothing imported", name, allowedSigners, oneLine(who))
	}
	principals := strings.Fields(who)
	var last string
	for _, p := range principals {
		out, err := run(data, "-Y", "verify", "-f", allowedSigners, "-I", p, "-n", Namespace, "-s", sigFile)
		if err == nil {
			return Signature{State: executor.SignatureChecked, Signer: p}, nil
		}
		last = out
	}
	return Signature{}, fmt.Errorf("%s: the signature does not match the file: it was changed after signing, or signed for another purpose (ssh-keygen: %s); nothing imported", name, oneLine(last))
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Stamp sets what the import says about every record.
func Stamp(f *File, sig Signature, now time.Time) {
	for i := range f.Records {
		s := f.Records[i].Site
		s.Imported = now.UTC()
		s.File = path.Base(f.Name)
		s.Signature = sig.State
		s.Signer = sig.Signer
	}
}
