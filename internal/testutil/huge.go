package testutil

import (
	"strings"
	"time"

	"github.com/monoco/courier/schema"
)

// HugeMessage returns an email as Courier wrote them before
// courier.limits.max_text_bytes bounded the text of a file: content.text,
// content.html, content.markdown and the body each about n bytes (the
// issue's 123 MB mail of 30 HTML parts made a 363 MB file). Its HTML has a
// tab at a line start and a CR, so the emitter writes it as one
// double-quoted line full of escapes, the hardest form to read in bounded
// memory; the text and Markdown are literal blocks.
func HugeMessage(uid string, n int) *schema.Message {
	m := Message(schema.Email, uid, Time("2026-01-02T03:04:05Z"), "")
	line := "Line of text with ünïcödé 和中文 in it, long enough to be a line.\n"
	m.Content.Text = schema.NullString(strings.Repeat(line, n/len(line)))
	html := "<p>\t<b>bold</b> text\r\n</p>"
	m.Content.HTML = schema.NullString(strings.Repeat(html, n/len(html)))
	md := "A paragraph of **Markdown** with a [link](https://example.com/x).\n\n"
	m.Content.Markdown = schema.NullString(strings.Repeat(md, n/len(md)))
	m.Body = string(m.Content.Markdown)
	m.ReceivedAt = schema.NewTime(m.Timestamp.Add(time.Second))
	return m
}
