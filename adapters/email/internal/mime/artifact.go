package mime

import (
	"strings"

	"github.com/monoco/courier/dropzone"
)

// Artifact is a part that Read stored in the dropzone batch rather than
// took as body text: an attachment, an inline image, an attached message,
// a text part too long to hold. Its name is decoded by FileName once the
// message's charset hint is known.
type Artifact struct {
	// Object is the part's decoded content in the batch.
	Object dropzone.Object
	// Media is the part's media type, lowercased; a type that is not
	// understood is application/octet-stream (text/plain for "text...").
	Media string
	// Inline is set when the disposition says inline, or, without one,
	// inside multipart/related or when the part has a Content-ID.
	Inline bool
	// ContentID is the Content-ID without its angle brackets; "" when
	// there is none or it holds other than printable ASCII.
	ContentID string

	name    param
	hasName bool
	message bool   // a message/rfc822 part: named after its subject
	lf      bool   // text whose line breaks are the transfer's: stored with LF
	subject []byte // the raw Subject of an attached message
}

// FileName returns the artifact's file name: the Content-Disposition
// filename, else the Content-Type name, decoded by d (RFC 2231 with its
// charset, encoded words, raw 8-bit bytes); for an attached message
// without one, its Subject + ".eml"; failing both, "attachment" plus an
// extension from its type. The name is always passed through
// dropzone.SanitizeName ("../../x" becomes "x"). What had to be repaired
// is noted in d's notes.
func (a *Artifact) FileName(d *Decoder) string {
	var name string
	switch {
	case a.hasName:
		name = d.param(a.name, "attachment name")
	case a.message && len(a.subject) > 0:
		// The subject is a title, not a path: keep its slashes visible.
		name = strings.NewReplacer("/", "-", `\`, "-").Replace(d.Text(a.subject, "attached message Subject"))
		if name != "" {
			name += ".eml"
		}
	}
	name = CleanText(name, "attachment name", d.notes)
	if strings.TrimSpace(name) == "" {
		name = "attachment" + extensionOf(a.Media)
	}
	return dropzone.SanitizeName(name)
}

// extensions gives the name of an attachment that has none an extension
// from its type. A fixed table: the standard library's
// mime.ExtensionsByType reads the system's tables, which differ between
// machines.
var extensions = map[string]string{
	"text/plain": ".txt", "text/html": ".html", "text/calendar": ".ics", "text/csv": ".csv",
	"text/markdown": ".md", "text/xml": ".xml", "text/rfc822-headers": ".txt", "text/enriched": ".txt",
	"message/rfc822": ".eml", "message/global": ".eml", "message/delivery-status": ".txt",
	"message/disposition-notification": ".txt", "message/feedback-report": ".txt",
	"image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/pjpeg": ".jpg", "image/gif": ".gif",
	"image/webp": ".webp", "image/bmp": ".bmp", "image/svg+xml": ".svg", "image/tiff": ".tif", "image/heic": ".heic",
	"audio/mpeg": ".mp3", "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/ogg": ".ogg", "audio/mp4": ".m4a",
	"video/mp4": ".mp4", "video/quicktime": ".mov", "video/webm": ".webm",
	"application/pdf": ".pdf", "application/zip": ".zip", "application/gzip": ".gz", "application/x-gzip": ".gz",
	"application/x-tar": ".tar", "application/json": ".json", "application/xml": ".xml",
	"application/msword": ".doc", "application/vnd.ms-excel": ".xls", "application/vnd.ms-powerpoint": ".ppt",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   ".docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         ".xlsx",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
	"application/pgp-signature": ".asc", "application/pgp-encrypted": ".asc", "application/pgp-keys": ".asc",
	"application/pkcs7-signature": ".p7s", "application/x-pkcs7-signature": ".p7s", "application/ics": ".ics",
	"application/octet-stream": ".bin",
}

func extensionOf(media string) string { return extensions[media] }
