package email

import (
	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/schema"
)

// MaxListItems is how many items a message file keeps of each list a
// sender writes: the addresses of each address field (From, Reply-To,
// To, Cc, Bcc: participants and provider_raw), external_participants and
// the ids of References. A header may hold a megabyte of addresses, some
// 57,000 of them, which made a 10 MB file and cost every reader of it a
// quarter of a gigabyte to parse. The rest of a longer list goes on, one
// item a line, in a text artifact, as text over max_text_bytes does
// (metadata.extra.overflow, where size and kept count items); nothing is
// lost. Threading and sender checks read the whole header, not the file.
const MaxListItems = 1000

// listRest is a list cut at MaxListItems: what the file does not keep,
// for listRests to store.
type listRest struct {
	field       string // participants.cc, provider_raw.references, ...
	total, kept int
	rest        []string // the items left out, one a line in the artifact
}

// cutAddresses returns the first MaxListItems addresses of list, and
// notes the rest for listRests, as "Name <addr>".
func (b *builder) cutAddresses(field string, list []mime.Address) []mime.Address {
	if len(list) <= MaxListItems {
		return list
	}
	rest := make([]string, 0, len(list)-MaxListItems)
	for _, a := range list[MaxListItems:] {
		rest = append(rest, mime.OneLine(a.String()))
	}
	b.rests = append(b.rests, listRest{field: field, total: len(list), kept: MaxListItems, rest: rest})
	return list[:MaxListItems:MaxListItems]
}

// cutStrings is cutAddresses for a list of strings. Of References, the
// file keeps the first id (the root of the thread) and the last ones (the
// parent and its closest ancestors, which a reply's References carries on,
// as RFC 5322 §3.6.4 lets a long chain be shortened); the artifact holds
// the ids between, in order.
func (b *builder) cutStrings(field string, list []string, keepFirst bool) []string {
	if len(list) <= MaxListItems {
		return list
	}
	kept, rest := list[:MaxListItems:MaxListItems], list[MaxListItems:]
	if keepFirst {
		cut := len(list) - (MaxListItems - 1)
		kept = append([]string{list[0]}, list[cut:]...)
		rest = list[1:cut]
	}
	b.rests = append(b.rests, listRest{field: field, total: len(list), kept: MaxListItems, rest: rest})
	return kept
}

// listRests stores the rest of each list cut, one item a line, through
// the overflow path of the text fields (overflow: text artifacts of at
// most maxArtifact bytes, metadata.extra.overflow), and says so in
// parse_error.
func (b *builder) listRests(batch *dropzone.Batch, maxArtifact int64) error {
	for _, r := range b.rests {
		f := newTextField(r.field, 0, batch.Spool)
		for _, item := range r.rest {
			if _, err := f.WriteString(item + "\n"); err != nil {
				f.close()
				return err
			}
		}
		arts, err := b.storeRest(f, 0, schema.Overflow{Field: r.field, Size: int64(r.total), Kept: int64(r.kept)}, batch, maxArtifact)
		f.close()
		if err != nil {
			return err
		}
		b.n.Addf("%s: %d items, over the %d a message file keeps of a list: it keeps %d, the other %d are in %s",
			r.field, r.total, MaxListItems, r.kept, len(r.rest), names(arts))
	}
	b.rests = nil
	return nil
}
