package dropzone

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// spoolPrefix names scratch files; they are unlinked as soon as they are
// created, so RecoverTemp never meets one.
const spoolPrefix = "spool-"

// Spool returns a new, empty scratch file for data too large to hold in
// memory while it is worked on (the decoded text of a large message, say).
// It is open for reading and writing, lives under the dropzone's .tmp/ (the
// same disk as the objects, not a tmpfs that would count as memory), and
// is already unlinked: its space is freed when it is closed, or when the
// process dies, so nothing is ever left behind. The caller closes it.
func (s *Store) Spool() (*os.File, error) {
	for range 10 {
		name := tmpDir + "/" + spoolPrefix + rand.Text()
		f, err := s.root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("dropzone: create spool: %w", err)
		}
		if err := s.root.Remove(name); err != nil {
			f.Close()
			return nil, fmt.Errorf("dropzone: unlink spool: %w", err)
		}
		return f, nil
	}
	return nil, errors.New("dropzone: create spool: no unused name")
}

// Spool returns a scratch file of the batch's store, as Store.Spool does.
// It is not part of the batch: Commit and Abort leave it alone.
func (b *Batch) Spool() (*os.File, error) { return b.s.Spool() }
