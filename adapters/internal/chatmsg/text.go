package chatmsg

import (
	"fmt"
	"strings"
	"unicode/utf8"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

// DefaultMaxText is the text a file keeps when courier.limits leaves
// max_text_bytes unset (as email's DefaultMaxText).
const DefaultMaxText = 4 << 20

// The artifacts that keep the rest of a message's text and Markdown.
const (
	TextRest     = "text-rest.txt"
	MarkdownRest = "markdown-rest.md"
)

// Fit keeps a message's text and Markdown within limit bytes
// (DefaultMaxText when 0 or less) as the email adapter bounds them: the
// Markdown is written twice (content.markdown and the body), the text
// once, and each keeps its share. The rest of each, cut on a character
// boundary (after a line end when one is near), is stored in batch as a
// text artifact of msg, named in metadata.extra.overflow; with no batch,
// extra["text_cut"] says what was cut. It returns what is kept and the
// artifacts it added. provider starts the error of a failed store.
func Fit(msg *schema.Message, batch *dropzone.Batch, extra map[string]any, provider string, limit int64, text, md string) (string, string, []schema.Artifact, error) {
	if limit <= 0 {
		limit = DefaultMaxText
	}
	kt, km := int64(len(text)), int64(len(md))
	if kt+2*km > limit {
		c := limit / 3
		switch {
		case kt < c:
			km = (limit - kt) / 2
		case km < c:
			kt = limit - 2*km
		default:
			kt, km = c, c
		}
	}
	o := overflow{msg: msg, batch: batch, extra: extra, provider: provider}
	var err error
	if text, err = o.cut("content.text", text, kt); err != nil {
		return "", "", nil, err
	}
	if md, err = o.cut("content.markdown", md, km); err != nil {
		return "", "", nil, err
	}
	return text, md, o.rests, nil
}

// overflow stores the rests of one message's fields.
type overflow struct {
	msg      *schema.Message
	batch    *dropzone.Batch
	extra    map[string]any
	provider string
	rests    []schema.Artifact
}

// cut keeps the first keep bytes of field s and stores the rest.
func (o *overflow) cut(field, s string, keep int64) (string, error) {
	if int64(len(s)) <= keep {
		return s, nil
	}
	k := int(keep)
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	if i := strings.LastIndexByte(s[max(0, k-4096):k], '\n'); i >= 0 {
		k = max(0, k-4096) + i + 1
	}
	if o.batch == nil {
		o.extra["text_cut"] = fmt.Sprintf("%s cut at %d of %d bytes: no dropzone to keep the rest", field, k, len(s))
		return s[:k], nil
	}
	name := map[string]string{"content.text": TextRest, "content.markdown": MarkdownRest}[field]
	obj, err := o.batch.Put(strings.NewReader(s[k:]))
	if err != nil {
		return "", adapters.Temporary(fmt.Errorf("%s: store the rest of %s: %w", o.provider, field, err))
	}
	art := schema.Artifact{ID: obj.ID, Name: name, Type: schema.ArtifactDocument, MimeType: "text/plain; charset=utf-8", Size: obj.Size, Path: obj.Path}
	o.msg.Artifacts = append(o.msg.Artifacts, art)
	x := &o.msg.Metadata.Extra
	x.Overflow = append(x.Overflow, schema.Overflow{Field: field, Size: int64(len(s)), Kept: int64(k), Artifacts: []string{obj.ID}})
	o.rests = append(o.rests, art)
	return s[:k], nil
}

// DraftWords returns the words of a draft that is not a card: plain text
// (plain true: a text draft, or an HTML draft's text alternative), else
// Markdown (a Markdown draft, or an HTML draft converted). A chat
// provider converts the one to its markup and sends the other as typed.
func DraftWords(d *schema.Draft) (words string, plain bool, err error) {
	switch d.EffectiveType() {
	case schema.DraftText:
		return d.Text(), true, nil
	case schema.DraftHTML:
		if d.Content.Text != "" {
			return string(d.Content.Text), true, nil
		}
		md, err := htmltomarkdown.ConvertString(string(d.Content.HTML))
		if err != nil {
			return "", false, fmt.Errorf("content.html: %w", err)
		}
		return md, false, nil
	}
	return d.Markdown(), false, nil
}
