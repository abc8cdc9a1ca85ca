package mailbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/monoco/courier/schema"
)

// Raw dead letters: inbound events and mails a provider received but
// could not turn into a message. Each is kept in .deadletter/<provider>/
// beside what failed there for good (drafts, messages agents failed), as
//
//	{YYYYMMDDTHHMMSS}_raw_{16 hex}.json (or .eml)   the payload, secrets scrubbed
//	{YYYYMMDDTHHMMSS}_raw_{16 hex}.json.reason      what was wrong, when, from where
//
// the time being when it was set aside (UTC) and the hex the start of the
// payload's sha256: the same payload set aside again (a redelivery) is
// the one file. The names are not mailbox files ({time}_{id}.md), so
// reindex, list and read never take them for messages. Each is journalled
// as a dead event whose id is the payload's path below the mailbox folder
// (".deadletter/slack/20260101T000000_raw_0123456789abcdef.json"), so that
// hooks run for it. What a provider keeps is bounded (DeadLetterLimits):
// anyone who can reach a provider can send endless events that cannot be
// filed, and beyond the bound they are counted, not kept.

// DeadLetterLimits bound the raw dead letters kept per provider.
type DeadLetterLimits struct {
	MaxFiles int   // payloads kept at most (default 1000)
	MaxBytes int64 // their bytes at most (default 64 MiB)
}

// DefaultDeadLetterLimits are the bounds when the config sets none.
var DefaultDeadLetterLimits = DeadLetterLimits{MaxFiles: 1000, MaxBytes: 64 << 20}

// DeadLetterStats is what a provider's raw dead letters come to.
type DeadLetterStats struct {
	SetAside  uint64 `json:"set_aside"`  // kept since the service started
	Refused   uint64 `json:"refused"`    // not kept since: beyond the bounds
	Kept      int    `json:"kept"`       // payloads in .deadletter/<provider>/ now
	KeptBytes int64  `json:"kept_bytes"` // their bytes
}

// RawDeadLetter is one payload to set aside.
type RawDeadLetter struct {
	Provider schema.Provider
	Source   string // where it came from ("slack events api")
	Reason   string // what is wrong with it
	Payload  []byte // scrubbed of secrets already
	Ext      string // "json" (default) or "eml"
}

// DeadLetterInfo is a raw dead letter as kept: what a hook is told.
type DeadLetterInfo struct {
	ID       string          `json:"id"`       // its journal id: the path below the mailbox folder
	Provider schema.Provider `json:"provider"` // the folder it is in
	Path     string          `json:"path"`     // the payload, relative to the workspace
	Reason   string          `json:"reason"`
	Source   string          `json:"source"`
	At       time.Time       `json:"set_aside_at"`
	Size     int64           `json:"size"`
}

// rawNameRE matches a raw dead letter's payload; group 1 is its hash.
var rawNameRE = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}_raw_([0-9a-f]{16})\.(json|eml)$`)

// rescanEvery is how often a provider at its bounds looks at its folder
// again: an operator who removes dead letters makes room.
const rescanEvery = time.Minute

// DeadLetters keeps the raw dead letters of a mailbox within bounds, and
// counts them. Safe for concurrent use; one per service.
type DeadLetters struct {
	mb  *Mailbox
	lim DeadLetterLimits
	mu  sync.Mutex
	per map[schema.Provider]*rawFolder
}

// rawFolder is what DeadLetters knows of one provider's folder.
type rawFolder struct {
	scanned           time.Time
	files             int
	bytes             int64
	names             map[string]string // hash → payload name
	setAside, refused uint64
}

// NewDeadLetters keeps mb's raw dead letters within lim (a zero bound is
// its default).
func NewDeadLetters(mb *Mailbox, lim DeadLetterLimits) *DeadLetters {
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = DefaultDeadLetterLimits.MaxFiles
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultDeadLetterLimits.MaxBytes
	}
	return &DeadLetters{mb: mb, lim: lim, per: map[schema.Provider]*rawFolder{}}
}

// Limits returns the bounds in force.
func (d *DeadLetters) Limits() DeadLetterLimits { return d.lim }

// Put keeps r, atomically and durably (the reason, then the payload,
// each written to .tmp/, fsynced and renamed into place, the folder
// fsynced), and journals it as a dead event. It returns the payload's
// path relative to the workspace, and kept false when the provider's dead
// letters are at their bounds (r is then counted as refused, and nothing
// is written). A payload already kept is not written again.
func (d *DeadLetters) Put(ctx context.Context, r RawDeadLetter) (rel string, kept bool, err error) {
	if !r.Provider.Valid() {
		return "", false, fmt.Errorf("mailbox: dead letter of %q: not a provider", r.Provider)
	}
	ext := r.Ext
	if ext != "eml" {
		ext = "json"
	}
	sum := sha256.Sum256(r.Payload)
	hash := hex.EncodeToString(sum[:8])
	d.mu.Lock()
	defer d.mu.Unlock()
	f, err := d.folder(r.Provider, false)
	if err != nil {
		return "", false, err
	}
	if name, ok := f.names[hash]; ok {
		// A redelivery of what is kept: journalled already, unless a
		// crash came between the file and the journal.
		return d.mb.Rel(filepath.Join(d.mb.Dir(BoxDeadletter, r.Provider), name)), true, d.journalOnce(ctx, r.Provider, name)
	}
	size := int64(len(r.Payload))
	if !d.fits(f, size) {
		if f, err = d.folder(r.Provider, true); err != nil {
			return "", false, err
		}
		if !d.fits(f, size) {
			f.refused++
			return "", false, nil
		}
	}
	now := d.mb.now().UTC()
	name := now.Format(nameTime) + "_raw_" + hash + "." + ext
	dir := d.mb.Dir(BoxDeadletter, r.Provider)
	note := fmt.Sprintf("%s\nset aside by courier at %s from %s\n", oneLine(r.Reason), now.Format(time.RFC3339), oneLine(r.Source))
	files := []*fileWrite{
		{dir: dir, name: name + ".reason", data: []byte(note), replace: true},
		{dir: dir, name: name, data: r.Payload},
	}
	if err := d.mb.fs.writeFiles(files); err != nil {
		return "", false, err
	}
	f.names[hash] = name
	f.files++
	f.bytes += size
	f.setAside++
	return d.mb.Rel(filepath.Join(dir, name)), true, d.journalOnce(ctx, r.Provider, name)
}

// fits reports whether a payload of size bytes is within f's bounds.
func (d *DeadLetters) fits(f *rawFolder, size int64) bool {
	return f.files < d.lim.MaxFiles && f.bytes+size <= d.lim.MaxBytes
}

// journalOnce journals the dead event of a payload unless the journal
// holds it.
func (d *DeadLetters) journalOnce(ctx context.Context, p schema.Provider, name string) error {
	id := deadLetterID(p, name)
	if _, ok, err := d.mb.EventOf(ctx, id, EventDead); err != nil || ok {
		return err
	}
	err := withTx(ctx, d.mb.db, func(tx *sql.Tx) error { return d.mb.journal(ctx, tx, EventDead, id) })
	if err != nil {
		return fmt.Errorf("mailbox: journal the dead letter %s: %w", id, err)
	}
	d.mb.signal()
	return nil
}

// folder returns what is known of p's folder, reading it the first time
// and, when again is set, once a rescanEvery. d.mu is held.
func (d *DeadLetters) folder(p schema.Provider, again bool) (*rawFolder, error) {
	f := d.per[p]
	if f == nil {
		f = &rawFolder{}
		d.per[p] = f
	}
	if !f.scanned.IsZero() && (!again || d.mb.now().Sub(f.scanned) < rescanEvery) {
		return f, nil
	}
	ents, err := d.mb.fs.readDir(d.mb.Dir(BoxDeadletter, p))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("mailbox: dead letters of %s: %w", p, err)
	}
	f.scanned, f.files, f.bytes, f.names = d.mb.now(), 0, 0, map[string]string{}
	for _, e := range ents {
		m := rawNameRE.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		f.files++
		f.names[m[1]] = e.Name()
		if fi, err := e.Info(); err == nil {
			f.bytes += fi.Size()
		}
	}
	return f, nil
}

// Stats returns, per provider that has any, what its raw dead letters
// come to. A provider whose folder was never read is read now.
func (d *DeadLetters) Stats(providers ...schema.Provider) map[schema.Provider]DeadLetterStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[schema.Provider]DeadLetterStats{}
	for _, p := range providers {
		d.folder(p, false) // an unreadable folder counts what is known
	}
	for p, f := range d.per {
		out[p] = DeadLetterStats{SetAside: f.setAside, Refused: f.refused, Kept: f.files, KeptBytes: f.bytes}
	}
	return out
}

// deadLetterID is the journal id of a raw dead letter.
func deadLetterID(p schema.Provider, name string) string {
	return string(BoxDeadletter) + "/" + string(p) + "/" + name
}

// IsDeadLetterID reports whether a journal id names a raw dead letter
// rather than a message or a draft.
func IsDeadLetterID(id string) bool { return strings.HasPrefix(id, string(BoxDeadletter)+"/") }

// DeadLetter reads the raw dead letter a journal id names.
func (mb *Mailbox) DeadLetter(id string) (*DeadLetterInfo, error) {
	parts := strings.Split(id, "/")
	if len(parts) != 3 || parts[0] != string(BoxDeadletter) || !schema.Provider(parts[1]).Valid() || !rawNameRE.MatchString(parts[2]) {
		return nil, fmt.Errorf("mailbox: %q is not the id of a dead letter", id)
	}
	p := schema.Provider(parts[1])
	path := filepath.Join(mb.Dir(BoxDeadletter, p), parts[2])
	note, err := mb.fs.readFile(path + ".reason")
	if err != nil {
		return nil, err
	}
	info := &DeadLetterInfo{ID: id, Provider: p, Path: mb.Rel(path)}
	reason, rest, _ := strings.Cut(string(note), "\n")
	info.Reason = reason
	rest, _, _ = strings.Cut(rest, "\n")
	if at, src, ok := strings.Cut(strings.TrimPrefix(rest, "set aside by courier at "), " from "); ok {
		info.At, _ = time.Parse(time.RFC3339, at)
		info.Source = src
	}
	f, err := mb.fs.openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		info.Size = fi.Size()
	}
	return info, nil
}

// oneLine keeps a reason or a source on its line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}
