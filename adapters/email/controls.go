package email

import (
	"strings"

	"github.com/monoco/courier/schema"
)

// stripControls removes control characters (but tab and newline) and
// bidirectional overrides from every text field of the message that an
// agent reads or a terminal shows (schema.StripControls says which and
// why): the subject, the session's id and thread key, participants'
// names, content.text, content.html, content.markdown, the body and
// provider_raw. A mail can carry them in
// any encoding (an encoded-word, quoted-printable, base64), so this runs
// once on the decoded fields, at the end of build, rather than in each
// decoder. The raw message in the dropzone keeps them byte for byte, and
// the notes say how many were removed.
func (b *builder) stripControls() {
	m := b.m
	n := 0
	str := func(s *string) {
		var k int
		*s, k = schema.StripControls(*s)
		n += k
	}
	null := func(s *schema.NullString) {
		v := string(*s)
		str(&v)
		*s = schema.NullString(v)
	}
	str(&m.Session.Name)
	// The thread key is made from the first References id, which a sender
	// writes: it is shown and handed to hooks as text too. Every mail of
	// the thread strips it alike, so they still share it.
	str(&m.Session.ID)
	null(&m.Session.ThreadKey)
	party := func(p *schema.Participant) {
		str(&p.Name)
		// Trimmed as participant() trims it; the ID is made from the name
		// when there is no address.
		p.Name = strings.TrimSpace(p.Name)
		str(&p.ID)
		str(&p.PlatformID)
		// A name that was nothing but controls: as for no name at all.
		if p.ID == "" {
			p.ID = "unknown"
		}
		if p.Name == "" {
			p.Name = p.ID
		}
	}
	party(&m.Participants.From)
	for _, ps := range [][]schema.Participant{m.Participants.To, m.Participants.Cc, m.Participants.Bcc} {
		for i := range ps {
			party(&ps[i])
		}
	}
	for i := range m.Metadata.Extra.ExternalParticipants {
		str(&m.Metadata.Extra.ExternalParticipants[i])
	}
	null(&m.Content.Text)
	null(&m.Content.HTML)
	null(&m.Content.Markdown)
	str(&m.Body)
	for k, v := range m.Metadata.ProviderRaw {
		switch v := v.(type) {
		case string:
			str(&v)
			m.Metadata.ProviderRaw[k] = v
		case []string:
			for i := range v {
				str(&v[i])
			}
		}
	}
	if n > 0 {
		b.n.Addf("%d control or bidirectional-override characters removed from the text (the raw message keeps them)", n)
	}
}
