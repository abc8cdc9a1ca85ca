// Package retention prunes what a workspace no longer needs: archived
// messages and delivered drafts older than a given age, their rows in the
// state database, and the dropzone objects no remaining file names
// (`courier prune`, and courier.retention.archive inside the service).
// Nothing in inbound/ (claimed or not), outbound/ or .deadletter/ is ever
// removed.
//
// The order makes a kill at any point safe, and a rerun finish the job:
//
//  1. The files to go are listed, and every other file of the mailbox
//     (the staging folder included) is read for the dropzone ids it
//     names. Objects no such file names, and unused for longer than the
//     age and than Grace, are the objects to go.
//  2. Their index rows go, in one transaction (a file without its row is
//     still found by the next run, or reindexed by the service).
//  3. The files go.
//  4. The objects go, each checked again under the dropzone's lock: one
//     the service used meanwhile (a new message with the same attachment,
//     a draft naming it) was marked in use and stays (package dropzone).
//
// An object is removed only once no remaining file names it, so nothing
// still referenced is ever lost; what a kill leaves behind is unreferenced
// and old, and the next run takes it.
package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// Grace is how long an object stays after its last use whatever the age
// asked: a message or draft names its objects only once they are stored,
// and a debounce group or a send in flight may take that long.
const Grace = time.Hour

// Options of a Prune.
type Options struct {
	// OlderThan is the age from which archived files go (required).
	OlderThan time.Duration
	// DryRun lists what would go and removes nothing.
	DryRun bool
	// Now is the clock (default time.Now).
	Now func() time.Time

	// step is called at each point where a kill must be survivable
	// (the tests kill the process there).
	step func(string)
}

// Report says what a Prune removed, or would remove.
type Report struct {
	DryRun      bool      `json:"dry_run"`
	Before      time.Time `json:"before"`       // files filed before this went
	Messages    int       `json:"messages"`     // archived inbound messages
	Drafts      int       `json:"drafts"`       // delivered drafts
	FileBytes   int64     `json:"file_bytes"`   // their bytes
	Objects     int       `json:"objects"`      // dropzone objects
	ObjectBytes int64     `json:"object_bytes"` // their bytes
	Files       []Item    `json:"files"`
	ObjectList  []Item    `json:"object_list"`
	Skipped     []string  `json:"skipped,omitempty"` // archived files left alone, and why
}

// Item is one file or object of a Report.
type Item struct {
	Name string `json:"name"` // a path relative to the workspace, or a dropzone id
	Size int64  `json:"size"`
}

// idRE finds the dropzone ids a file names (artifacts, raw sources); a
// body that happens to quote one keeps that object, which errs on the side
// of keeping.
var idRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

// Prune removes (or, dry, lists) what is older than opts.OlderThan.
func Prune(ctx context.Context, mb *mailbox.Mailbox, dz *dropzone.Store, opts Options) (*Report, error) {
	if opts.OlderThan <= 0 {
		return nil, fmt.Errorf("retention: the age must be positive (got %v)", opts.OlderThan)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	step := opts.step
	if step == nil {
		step = func(string) {}
	}
	now := opts.Now()
	rep := &Report{DryRun: opts.DryRun, Before: now.Add(-opts.OlderThan).UTC(), Files: []Item{}, ObjectList: []Item{}}
	unused := rep.Before
	if g := now.Add(-Grace); g.Before(unused) {
		unused = g
	}
	files, skipped, err := mb.ArchivedBefore(rep.Before)
	if err != nil {
		return nil, err
	}
	rep.Skipped = skipped
	going := make(map[string]bool, len(files))
	ids := make([]string, len(files))
	for i, f := range files {
		going[f.Rel] = true
		ids[i] = f.ID
	}
	objects, err := unreferenced(ctx, mb, dz, going, unused)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		for _, f := range files {
			rep.addFile(f)
		}
		for _, o := range objects {
			rep.addObject(o.Object)
		}
		return rep, nil
	}
	step("listed")
	if err := mb.ForgetArchived(ctx, ids); err != nil {
		return rep, err
	}
	step("unindexed")
	if _, err := mb.RemoveArchived(files, func(f mailbox.Archived) { rep.addFile(f); step("file") }); err != nil {
		return rep, err
	}
	step("files")
	oids := make([]string, len(objects))
	for i, o := range objects {
		oids[i] = o.ID
	}
	err = dz.Sweep(oids, unused, func(o dropzone.Object) { rep.addObject(o); step("object") })
	return rep, err
}

// unreferenced lists the objects of dz that no file of mb but those going
// names, unused since before.
func unreferenced(ctx context.Context, mb *mailbox.Mailbox, dz *dropzone.Store, going map[string]bool, before time.Time) ([]dropzone.StoredObject, error) {
	refs := map[string]bool{}
	err := mb.EachFile(ctx, true, func(f mailbox.MailboxFile, data []byte) error {
		if !going[f.Rel] {
			for _, id := range idRE.FindAll(data, -1) {
				refs[string(id)] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retention: read the mailbox: %w", err)
	}
	var out []dropzone.StoredObject
	err = dz.Objects(func(o dropzone.StoredObject) error {
		if !refs[o.ID] && o.ModTime.Before(before) {
			out = append(out, o)
		}
		return nil
	})
	return out, err
}

func (r *Report) addFile(f mailbox.Archived) {
	if f.Direction == schema.Inbound {
		r.Messages++
	} else {
		r.Drafts++
	}
	r.FileBytes += f.Size
	r.Files = append(r.Files, Item{Name: f.Rel, Size: f.Size})
}

func (r *Report) addObject(o dropzone.Object) {
	r.Objects++
	r.ObjectBytes += o.Size
	r.ObjectList = append(r.ObjectList, Item{Name: o.ID, Size: o.Size})
}

// Daily runs Prune with olderThan once a day until ctx ends, the first
// time after delay, logging what went.
func Daily(ctx context.Context, mb *mailbox.Mailbox, dz *dropzone.Store, olderThan, delay time.Duration, log *slog.Logger) {
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := Prune(ctx, mb, dz, Options{OlderThan: olderThan})
		switch {
		case errors.Is(err, context.Canceled):
			return
		case err != nil:
			log.Warn("retention: prune failed; the next run retries", "err", err)
		case rep.Messages+rep.Drafts+rep.Objects > 0:
			log.Info("retention: pruned the archive", "older_than", olderThan, "messages", rep.Messages, "drafts", rep.Drafts,
				"file_bytes", rep.FileBytes, "objects", rep.Objects, "object_bytes", rep.ObjectBytes)
		}
		for _, s := range rep.skippedOrNil() {
			log.Warn("retention: left an archived file alone", "why", s)
		}
		t.Reset(24 * time.Hour)
	}
}

func (r *Report) skippedOrNil() []string {
	if r == nil {
		return nil
	}
	return r.Skipped
}
