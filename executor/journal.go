package executor

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite: no cgo, built from the module proxy
)

// Status is how a run ended.
type Status string

// Run statuses.
const (
	StatusVerified  Status = "verified"  // ran and every expectation held
	StatusFailed    Status = "failed"    // ran, and an expectation did not hold
	StatusError     Status = "error"     // could not run (connection, API, setup)
	StatusCancelled Status = "cancelled" // stopped by the reader
	StatusSkipped   Status = "skipped"   // its condition was false
	StatusRunning   Status = "running"
	// A terminal session from the page (Target "terminal"): StatusByHand
	// when the reader marked its manual step done there, else
	// StatusTerminal. Output is the session's transcript.
	StatusByHand   Status = "by-hand"
	StatusTerminal Status = "terminal"
)

// Record is one completed run as the journal keeps it. Output is redacted
// and bounded; secret values never reach it.
type Record struct {
	ID        string            `json:"id"`
	Runbook   string            `json:"runbook"` // slug
	Path      string            `json:"path"`
	Block     string            `json:"block"`
	Step      string            `json:"step,omitempty"`
	Hash      string            `json:"hash"`
	Target    string            `json:"target"`
	Where     string            `json:"where,omitempty"` // kube context or host list
	Status    Status            `json:"status"`
	Reasons   []string          `json:"reasons,omitempty"`
	Hosts     []HostRecord      `json:"hosts"`
	Start     time.Time         `json:"start"`
	Duration  float64           `json:"duration"` // seconds
	Params    map[string]string `json:"params,omitempty"`
	Captures  map[string]string `json:"captures,omitempty"` // secret ones as Mask
	Output    string            `json:"output"`
	Truncated bool              `json:"truncated,omitempty"`
	Attempts  int               `json:"attempts,omitempty"`
	// Compacted: the journal dropped this old run's output (see Journal).
	Compacted bool `json:"compacted,omitempty"`
	// WriteBack is what became of writing the output back to the Markdown
	// ("" when not asked for; "written"; or the error).
	WriteBack string `json:"write_back,omitempty"`
	// Site is set when the run was made by an exported script (at an
	// air-gapped site, say) and came back with `cairn journal import`.
	Site *SiteRun `json:"site,omitempty"`
	// By is who worked in a terminal session (user@machine).
	By string `json:"by,omitempty"`
	// Session is where a session block (session=) left its shell on each
	// host: the directory and the exported variables (secret values
	// masked), what the session's next block starts from.
	Session *SessionRecord `json:"session,omitempty"`
}

// SessionRecord is a session block's shell state after it ran.
type SessionRecord struct {
	Name  string                `json:"name"`
	Hosts map[string]ShellState `json:"hosts"` // "" is this machine
}

// SiteRun is where a record made by an exported script came from. The
// script writes the first six fields; the import sets the rest (a results
// file cannot claim its own signature was checked).
type SiteRun struct {
	Run     string `json:"run"`              // the script run's id
	By      string `json:"by"`               // user@machine that ran it
	Script  string `json:"script"`           // sha256 of the script
	Bundle  string `json:"bundle,omitempty"` // sha256 of the bundle's MANIFEST, when run from one
	Source  string `json:"source"`           // sha256 of the runbook it was exported from
	Version string `json:"version"`          // the Cairn that exported it

	Imported  time.Time `json:"imported,omitzero"`
	File      string    `json:"file,omitempty"`      // the results file's name
	Signature string    `json:"signature,omitempty"` // SignatureChecked, SignatureUnchecked or SignatureNone
	Signer    string    `json:"signer,omitempty"`    // the principal whose key signed it, when checked
}

// SiteRun.Signature values.
const (
	SignatureChecked   = "checked"   // signed, and the signature checked against the allowed signers
	SignatureUnchecked = "unchecked" // signed, but no allowed signers were given to check it
	SignatureNone      = "none"      // not signed
)

// HostRecord is one host's part of a run.
type HostRecord struct {
	Host     string  `json:"host"`
	Exit     int     `json:"exit"`
	Error    string  `json:"error,omitempty"`
	Duration float64 `json:"duration"`
	Output   string  `json:"output,omitempty"` // per host, when several
}

// Retention policy of the journal (docs/executor-api.md, "The journal").
const (
	// KeepOutputRuns is how many of the newest runs keep their output;
	// older ones keep everything else (status, reasons, hosts, exit codes,
	// captures, timing).
	KeepOutputRuns = 1000
	// KeepRuns is how many of the newest runs are kept at all.
	KeepRuns = 50000
)

// A block's last verified run (per block hash) is kept whole, whatever its
// age: the page and the API show it.

// Journal is the run history: an SQLite database (WAL mode) that any number
// of Cairn processes — the daemon, cairn serve, cairn run — append to at
// once. SQLite's locking orders their writes; each Append is one
// transaction, fsync'd before it returns (synchronous=FULL), so a record is
// either wholly there or not at all, even after kill -9 or a power cut.
// Nothing is held in memory: start-up and memory do not depend on how much
// history there is. Old output is compacted as new runs arrive (see
// KeepOutputRuns, KeepRuns).
type Journal struct {
	db   *sql.DB
	path string

	mu     sync.Mutex
	closed bool
}

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	id      TEXT NOT NULL UNIQUE,
	runbook TEXT NOT NULL,
	block   TEXT NOT NULL,
	hash    TEXT NOT NULL,
	status  TEXT NOT NULL,
	meta    BLOB NOT NULL,  -- the record without output
	full    BLOB            -- the whole record; NULL once compacted
);
CREATE INDEX IF NOT EXISTS runs_by_runbook ON runs(runbook, seq);
CREATE INDEX IF NOT EXISTS runs_with_output ON runs(seq) WHERE full IS NOT NULL;
CREATE TABLE IF NOT EXISTS latest (
	runbook TEXT NOT NULL,
	block   TEXT NOT NULL,
	hash    TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (runbook, block, hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS latest_by_seq ON latest(seq);
CREATE TABLE IF NOT EXISTS last (
	runbook TEXT NOT NULL,
	block   TEXT NOT NULL,
	hash    TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (runbook, block, hash)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS last_by_seq ON last(seq);
CREATE TABLE IF NOT EXISTS captures (
	runbook TEXT NOT NULL,
	name    TEXT NOT NULL,
	value   TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	PRIMARY KEY (runbook, name)
) WITHOUT ROWID;
`

// OpenJournal opens (creating) the journal database at path. The file and
// its folder are private to the user (0600, 0700).
func OpenJournal(path string) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	if head, err := readHead(path); err == nil && len(head) > 0 && head[0] == '{' {
		return nil, fmt.Errorf("open journal %s: this is a JSON-lines journal from an older Cairn; move it away (cairn journal import %s reads it into the new journal)", path, path)
	}
	// Create it private before SQLite does (SQLite would use 0644).
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		f.Close()
	} else {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(30000)", "journal_mode(WAL)", "synchronous(FULL)", "secure_delete(ON)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate") // writers queue at BEGIN, never deadlock on upgrade
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	j := &Journal{db: db, path: path}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open journal %s: %w (if the file is damaged, move it away to start a new journal)", path, err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		_ = os.Chmod(path+suffix, 0o600)
	}
	return j, nil
}

func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 1)
	n, err := f.Read(b)
	return b[:n], err
}

// Append writes r durably, in one transaction with its index entries and
// the compaction it makes due.
func (j *Journal) Append(r Record) error {
	if j.isClosed() {
		return errors.New("journal is closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return j.tx(ctx, func(tx *sql.Tx) error { return appendTx(ctx, tx, r) })
}

// AppendAll writes the records that are not in the journal yet (by ID), all
// in one transaction: either every one of them is there afterwards or none.
// It returns how many were new.
func (j *Journal) AppendAll(ctx context.Context, recs []Record) (int, error) {
	if j.isClosed() {
		return 0, errors.New("journal is closed")
	}
	n := 0
	err := j.tx(ctx, func(tx *sql.Tx) error {
		n = 0
		for _, r := range recs {
			var exists int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, r.ID).Scan(&exists); err != nil {
				return err
			}
			if exists > 0 {
				continue
			}
			if err := appendTx(ctx, tx, r); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func appendTx(ctx context.Context, tx *sql.Tx, r Record) error {
	full, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	meta, err := json.Marshal(stripOutput(r))
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO runs (id, runbook, block, hash, status, meta, full) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.Runbook, r.Block, r.Hash, string(r.Status), meta, full)
	if err != nil {
		return err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	tables := []string{"last"}
	if r.Status == StatusVerified {
		tables = append(tables, "latest")
	}
	for _, table := range tables {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (runbook, block, hash, seq) VALUES (?, ?, ?, ?)
			ON CONFLICT (runbook, block, hash) DO UPDATE SET seq = excluded.seq`, r.Runbook, r.Block, r.Hash, seq); err != nil {
			return err
		}
	}
	for k, v := range r.Captures {
		if v == Mask {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO captures (runbook, name, value, seq) VALUES (?, ?, ?, ?)
			ON CONFLICT (runbook, name) DO UPDATE SET value = excluded.value, seq = excluded.seq`, r.Runbook, k, v, seq); err != nil {
			return err
		}
	}
	return compact(ctx, tx, seq)
}

// compact drops the output of runs that fell out of the newest
// KeepOutputRuns and deletes runs older than KeepRuns, except each block's
// last verified run. Each append moves the window by one, so the work per
// append is constant (the partial index finds the rows).
func compact(ctx context.Context, tx *sql.Tx, seq int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET full = NULL
		WHERE full IS NOT NULL AND seq <= ? AND seq NOT IN (SELECT seq FROM latest)`, seq-KeepOutputRuns); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM runs
		WHERE seq <= ? AND seq > ? - 64 AND seq NOT IN (SELECT seq FROM latest)`, seq-KeepRuns, seq-KeepRuns); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM last WHERE seq <= ? AND seq > ? - 64 AND seq NOT IN (SELECT seq FROM latest)`, seq-KeepRuns, seq-KeepRuns)
	return err
}

func (j *Journal) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

func stripOutput(r Record) Record {
	r.Output = ""
	hosts := make([]HostRecord, len(r.Hosts))
	for i, h := range r.Hosts {
		h.Output = ""
		hosts[i] = h
	}
	r.Hosts = hosts
	r.Compacted = true
	return r
}

func (j *Journal) isClosed() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closed
}

func (j *Journal) query(query string, args ...any) ([]Record, error) {
	if j.isClosed() {
		return nil, errors.New("journal is closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := j.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.path, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("journal %s: %w", j.path, err)
		}
		var r Record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("journal %s: unreadable record: %w", j.path, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Records returns up to limit of the newest runs of a runbook (all
// runbooks when slug is ""), newest first.
func (j *Journal) Records(slug string, limit int) ([]Record, error) {
	if slug == "" {
		return j.query(`SELECT coalesce(full, meta) FROM runs ORDER BY seq DESC LIMIT ?`, limit)
	}
	return j.query(`SELECT coalesce(full, meta) FROM runs WHERE runbook = ? ORDER BY seq DESC LIMIT ?`, slug, limit)
}

// Latest returns each block's most recent verified run of a runbook whose
// hash still matches, keyed by block id.
func (j *Journal) Latest(slug string, hashes map[string]string) (map[string]Record, error) {
	return j.blockRuns("latest", slug, hashes)
}

// Last returns each block's most recent run of a runbook, whatever its
// status, whose hash still matches (the page shows a failure after a
// reload, too).
func (j *Journal) Last(slug string, hashes map[string]string) (map[string]Record, error) {
	return j.blockRuns("last", slug, hashes)
}

// blockRuns reads the runs a per-block table (latest or last) points at.
func (j *Journal) blockRuns(table, slug string, hashes map[string]string) (map[string]Record, error) {
	recs, err := j.query(`SELECT coalesce(r.full, r.meta) FROM `+table+` l JOIN runs r ON r.seq = l.seq WHERE l.runbook = ? ORDER BY l.seq`, slug)
	out := map[string]Record{}
	for _, r := range recs {
		if hashes[r.Block] == r.Hash {
			out[r.Block] = r
		}
	}
	return out, err
}

// Captures returns the newest non-secret value of each capture of a
// runbook (cairn run uses them to resume).
func (j *Journal) Captures(slug string) (map[string]string, error) {
	if j.isClosed() {
		return nil, errors.New("journal is closed")
	}
	rows, err := j.db.Query(`SELECT name, value FROM captures WHERE runbook = ?`, slug)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", j.path, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// SetWriteBack records what became of a run's write-back.
func (j *Journal) SetWriteBack(id, outcome string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return j.tx(ctx, func(tx *sql.Tx) error {
		for _, col := range []string{"meta", "full"} {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET `+col+` = json_set(`+col+`, '$.write_back', ?) WHERE id = ? AND `+col+` IS NOT NULL`, outcome, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// Export writes every run, oldest first, as JSON lines (one Record per
// line) for auditors and other tools.
func (j *Journal) Export(ctx context.Context, w io.Writer) (int, error) {
	rows, err := j.db.QueryContext(ctx, `SELECT coalesce(full, meta) FROM runs ORDER BY seq`)
	if err != nil {
		return 0, fmt.Errorf("journal %s: %w", j.path, err)
	}
	defer rows.Close()
	bw := bufio.NewWriter(w)
	n := 0
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return n, err
		}
		bw.Write(data)
		bw.WriteByte('\n')
		n++
	}
	if err := rows.Err(); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// Import appends the records of a JSON-lines journal (an older Cairn's, or
// an Export), skipping runs already present and a torn last line.
func (j *Journal) Import(ctx context.Context, r io.Reader) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	n := 0
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return n, fmt.Errorf("line %d: %v", line, err)
		}
		added, err := j.AppendAll(ctx, []Record{rec})
		n += added
		if err != nil {
			return n, err
		}
	}
	return n, sc.Err()
}

// Check runs SQLite's integrity check.
func (j *Journal) Check(ctx context.Context) error {
	var res string
	if err := j.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return err
	}
	if res != "ok" {
		return fmt.Errorf("journal %s: %s", j.path, res)
	}
	return nil
}

// Close closes the database.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	return j.db.Close()
}

// Path is the journal's file.
func (j *Journal) Path() string { return j.path }
