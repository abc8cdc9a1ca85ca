package mailview

import (
	"encoding/base64"
	"io"
	"unicode/utf8"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/fault"
)

// Attachment is a dropzone object's bytes, or their start.
type Attachment struct {
	ID        string
	Size      int64  // the object's whole size
	Encoding  string // text or base64
	Data      string
	Truncated bool // Data holds only the first max bytes
}

// ReadAttachment reads at most max bytes of the dropzone object id, as
// text (as "text": UTF-8, refused if the bytes are not) or base64 (as ""
// or "base64"). An object cut short in text is cut between characters.
func ReadAttachment(dz *dropzone.Store, id, as string, max int64) (*Attachment, error) {
	if _, err := dropzone.ParseID(id); err != nil {
		return nil, fault.Errorf(fault.Usage, "%q is not a dropzone id (sha256:<64 hex>)", id)
	}
	f, err := dz.Open(id)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fault.Wrap(fault.IO, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fault.Wrap(fault.IO, err)
	}
	out := &Attachment{ID: id, Size: fi.Size(), Truncated: int64(len(data)) < fi.Size()}
	switch as {
	case "text":
		if out.Truncated { // do not cut a character in two
			for i := 0; i < utf8.UTFMax && len(data) > 0 && !utf8.Valid(data); i++ {
				data = data[:len(data)-1]
			}
		}
		if !utf8.Valid(data) {
			return nil, fault.Errorf(fault.Invalid, "%s is not UTF-8 text: ask for it as base64", id)
		}
		out.Encoding, out.Data = "text", string(data)
	case "", "base64":
		out.Encoding, out.Data = "base64", base64.StdEncoding.EncodeToString(data)
	default:
		return nil, fault.Errorf(fault.Usage, "as %q is not one of text, base64", as)
	}
	return out, nil
}
