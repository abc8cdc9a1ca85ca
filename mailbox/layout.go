package mailbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monoco/courier/schema"
)

// Box is a folder of the mailbox a file can be in.
type Box string

// The boxes.
const (
	BoxInbound    Box = "inbound"
	BoxOutbound   Box = "outbound"
	BoxArchive    Box = "archive"
	BoxDeadletter Box = ".deadletter"
)

// Boxes lists every box, in the order Reindex walks them.
var Boxes = []Box{BoxInbound, BoxOutbound, BoxArchive, BoxDeadletter}

// Layout names the paths of a workspace.
type Layout struct {
	Root string // the workspace: the folder that holds .monoco/
}

// Monoco returns <root>/.monoco.
func (l Layout) Monoco() string { return filepath.Join(l.Root, ".monoco") }

// Mailbox returns <root>/.monoco/mailbox.
func (l Layout) Mailbox() string { return filepath.Join(l.Monoco(), "mailbox") }

// Dropzone returns <root>/.monoco/dropzone.
func (l Layout) Dropzone() string { return filepath.Join(l.Monoco(), "dropzone") }

// Config returns the default config path, <root>/.monoco/config/courier.yaml.
func (l Layout) Config() string { return filepath.Join(l.Monoco(), "config", "courier.yaml") }

// Tmp returns the staging folder.
func (l Layout) Tmp() string { return filepath.Join(l.Mailbox(), ".tmp") }

// State returns the folder of the state database.
func (l Layout) State() string { return filepath.Join(l.Mailbox(), ".state") }

// DB returns the path of the state database.
func (l Layout) DB() string { return filepath.Join(l.State(), "courier.db") }

// Dir returns the folder of a box for a provider.
func (l Layout) Dir(b Box, p schema.Provider) string {
	return filepath.Join(l.Mailbox(), string(b), string(p))
}

// Rel returns path relative to the workspace root, slash-separated, as the
// index stores it.
func (l Layout) Rel(path string) string {
	r, err := filepath.Rel(l.Root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(r)
}

// Abs returns the absolute path of a path relative to the workspace root.
func (l Layout) Abs(rel string) string { return filepath.Join(l.Root, filepath.FromSlash(rel)) }

// ErrNotInitialized is returned when the workspace has no mailbox.
var ErrNotInitialized = errors.New("mailbox: no mailbox here (run `courier init`)")

// Init creates the layout of DESIGN §1 under root. It is idempotent and
// leaves existing files alone. Folders are made 0750 (see dirPerm); below
// the mailbox folder they are made through the root, so a link in their
// place is an error rather than a folder made wherever it points.
func Init(root string) error {
	l := Layout{Root: root}
	for _, d := range []string{l.Mailbox(), l.Dropzone(), filepath.Dir(l.Config())} {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return fmt.Errorf("mailbox: init: %w", err)
		}
	}
	r, err := openRoot(l.Mailbox(), l.Rel)
	if err != nil {
		return fmt.Errorf("mailbox: init: %w", err)
	}
	defer r.close()
	dirs := []string{l.Tmp(), l.State()}
	for _, b := range Boxes {
		for _, p := range schema.Implemented {
			dirs = append(dirs, l.Dir(b, p))
		}
	}
	for _, d := range dirs {
		if err := r.mkdirAll(d); err != nil {
			return fmt.Errorf("mailbox: init: %w", err)
		}
	}
	for _, d := range []string{l.Mailbox(), filepath.Join(l.Mailbox(), string(BoxDeadletter))} {
		if err := r.syncDir(d); err != nil {
			return fmt.Errorf("mailbox: init: %w", err)
		}
	}
	if err := syncPath(l.Monoco()); err != nil {
		return fmt.Errorf("mailbox: init: %w", err)
	}
	return nil
}

// syncPath fsyncs the folder at path (outside the mailbox folder).
func syncPath(path string) error {
	fd, err := os.Open(path)
	if err != nil {
		return err
	}
	err = fd.Sync()
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	return err
}

// Initialized reports whether root holds a mailbox.
func Initialized(root string) bool {
	fi, err := os.Stat(Layout{Root: root}.Mailbox())
	return err == nil && fi.IsDir()
}

const nameTime = "20060102T150405"

// FileName returns the file name of a message or draft: its time in UTC and
// its id, {YYYYMMDDTHHMMSS}_{id}.md.
func FileName(t time.Time, id string) string {
	return t.UTC().Format(nameTime) + "_" + id + ".md"
}

// ParseFileName takes a file name apart; ok is false for names that are not
// mailbox files (temporary files, editor backups).
func ParseFileName(name string) (t time.Time, id string, ok bool) {
	base, found := strings.CutSuffix(name, ".md")
	if !found || len(base) < len(nameTime)+2 || base[len(nameTime)] != '_' {
		return time.Time{}, "", false
	}
	t, err := time.Parse(nameTime, base[:len(nameTime)])
	if err != nil {
		return time.Time{}, "", false
	}
	id = base[len(nameTime)+1:]
	if !schema.ValidID(id) {
		return time.Time{}, "", false
	}
	return t, id, true
}
