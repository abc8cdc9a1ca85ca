package mailbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/monoco/courier/schema"
)

// Staging holds debounce groups in .tmp/debounce/<group>/, one file per
// message, written durably, so that a message acknowledged to its source
// survives a crash before its group is flushed.

// stagedFile is the staging format: the message file and its dedupe keys.
type stagedFile struct {
	Keys    []string `json:"keys,omitempty"`
	Message string   `json:"message"`
}

func (mb *Mailbox) stageDir(group string) string {
	return filepath.Join(mb.Tmp(), "debounce", group)
}

// Stage durably adds messages to a debounce group. seq orders them within
// the group (the caller's arrival counter).
func (mb *Mailbox) Stage(group string, seq uint64, msgs []Inbound) error {
	if group == "" || strings.ContainsAny(group, `/\.`) {
		return fmt.Errorf("mailbox: stage: bad group name %q", group)
	}
	dir := mb.stageDir(group)
	files := make([]*fileWrite, len(msgs))
	for i, in := range msgs {
		data, err := schema.Encode(in.Message)
		if err != nil {
			return err
		}
		b, err := json.Marshal(stagedFile{Keys: in.Keys, Message: string(data)})
		if err != nil {
			return err
		}
		files[i] = &fileWrite{dir: dir, name: fmt.Sprintf("%020d_%s.json", seq+uint64(i), in.Message.ID), data: b}
	}
	return mb.fs.writeFiles(files)
}

// StagedGroups returns every staged group with its messages in order.
// Files that do not decode are skipped and reported in bad (they are kept
// for a person to look at).
func (mb *Mailbox) StagedGroups() (groups map[string][]Inbound, bad []string, err error) {
	base := filepath.Join(mb.Tmp(), "debounce")
	dirs, err := mb.fs.readDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	groups = map[string][]Inbound{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ents, err := mb.fs.readDir(filepath.Join(base, d.Name()))
		if err != nil {
			return nil, nil, err
		}
		for _, e := range ents {
			if !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			p := filepath.Join(base, d.Name(), e.Name())
			in, err := mb.readStaged(p)
			if err != nil {
				bad = append(bad, mb.Rel(p)+": "+err.Error())
				continue
			}
			groups[d.Name()] = append(groups[d.Name()], in)
		}
	}
	return groups, bad, nil
}

func (mb *Mailbox) readStaged(p string) (Inbound, error) {
	b, err := mb.fs.readFile(p)
	if err != nil {
		return Inbound{}, err
	}
	var sf stagedFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return Inbound{}, err
	}
	m, err := schema.Decode([]byte(sf.Message))
	if err != nil {
		return Inbound{}, err
	}
	return Inbound{Message: m, Keys: sf.Keys}, nil
}

// Unstage removes a flushed group. Only call it once the merged message is
// durable in the mailbox.
func (mb *Mailbox) Unstage(group string) error {
	dir := mb.stageDir(group)
	d, err := mb.fs.openDir(dir, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("mailbox: unstage: %w", err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".json") {
			if err := unix.Unlinkat(int(d.Fd()), n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("mailbox: unstage: %w", err)
			}
		}
	}
	parent, err := mb.fs.openDir(filepath.Dir(dir), false)
	if err != nil {
		return err
	}
	defer parent.Close()
	if err := unix.Unlinkat(int(parent.Fd()), filepath.Base(dir), unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("mailbox: unstage: %w", err)
	}
	if err := parent.Sync(); err != nil {
		return fmt.Errorf("mailbox: unstage: fsync: %w", err)
	}
	return nil
}
