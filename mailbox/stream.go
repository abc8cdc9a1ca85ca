package mailbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/monoco/courier/schema"
)

// Reading files of any size. A file Courier writes now holds at most
// courier.limits.max_text_bytes of text (16 MiB at most), but a file
// written before that bound may hold hundreds of megabytes. Every reader
// here takes a bounded amount of any file: one up to WholeFile bytes is
// read whole, as it always was; a larger one is streamed, its front matter
// read by schema.ReadHead (long values cut, saying so) and its body, where
// it is needed, a piece at a time.

// WholeFile is the size up to which a mailbox file is read whole to be
// decoded. Files Courier writes are smaller; a larger one is an old file,
// read as a stream.
const WholeFile = schema.MaxReadText

// previewBody is how much of a large file's body reindex reads: enough
// for the index's preview of its first line.
const previewBody = 64 << 10

// indexHead is the text budget of the head of a large file read by
// reindex: the index holds none of its content, so its long values are
// read no further than the 64 KiB every value keeps.
const indexHead = 1

// OpenFile opens the file of an id, wherever it is, for reading as a
// stream: confined as ReadFile is (a regular file reached without a link),
// without ReadFile's bound on its size, which a caller that streams does
// not need. The caller closes the file.
func (mb *Mailbox) OpenFile(ctx context.Context, id string) (*os.File, *Entry, error) {
	e, err := mb.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	f, err := mb.fs.openFile(mb.Abs(e.Path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, e, fmt.Errorf("mailbox: the index names %s but the file is gone (run `courier reindex`): %w", e.Path, &NotFoundError{ID: id})
	}
	return f, e, err
}

// readBounded returns what to decode of the file f, of the given name, in
// bounded memory: all of it, up to WholeFile bytes; beyond, its head (by
// schema.ReadHead, its values within headBudget bytes) followed by at most
// bodyMax bytes of its body, cut at a character boundary and ending in a
// line that says how much more the file holds.
func readBounded(f *os.File, name string, headBudget, bodyMax int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("mailbox: %s: %w", name, err)
	}
	if fi.Size() <= WholeFile {
		return readAllBounded(f, name)
	}
	head, body, err := readLarge(f, name, headBudget, bodyMax)
	if err != nil {
		return nil, err
	}
	return append(head, body...), nil
}

// openBounded opens the file of an id and reads what to decode of it (see
// readBounded).
func (mb *Mailbox) openBounded(ctx context.Context, id string, bodyMax int) ([]byte, *Entry, error) {
	f, e, err := mb.OpenFile(ctx, id)
	if err != nil {
		return nil, e, err
	}
	defer f.Close()
	b, err := readBounded(f, e.Path, schema.MaxReadText, bodyMax)
	return b, e, err
}

// readLarge reads the head of a large file and up to bodyMax bytes of its
// body, noting in the body what was left.
func readLarge(f *os.File, name string, headBudget, bodyMax int) (head, body []byte, err error) {
	br := bufio.NewReaderSize(f, 64<<10)
	head, _, err = schema.ReadHead(br, headBudget)
	if err != nil {
		return nil, nil, fmt.Errorf("mailbox: %s: %w", name, err)
	}
	body, err = readUpTo(make([]byte, 0, 4096), br, bodyMax+1)
	if err != nil {
		return nil, nil, fmt.Errorf("mailbox: read %s: %w", name, err)
	}
	if len(body) > bodyMax {
		body = body[:runeStart(body, bodyMax)]
		n, err := io.Copy(io.Discard, br)
		if err != nil {
			return nil, nil, fmt.Errorf("mailbox: read %s: %w", name, err)
		}
		left := n + int64(bodyMax+1) - int64(len(body))
		body = append(body, "\n\n[… "+strconv.FormatInt(left, 10)+" bytes more in the file, not read]\n"...)
	}
	return head, body, nil
}

// runeStart backs k off to the start of the character it falls in.
func runeStart(b []byte, k int) int {
	for k > 0 && k < len(b) && !utf8.RuneStart(b[k]) {
		k--
	}
	return k
}
