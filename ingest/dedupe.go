package ingest

import (
	"context"

	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// dedupeKeys are the keys a message is known by: its id, the event's
// dedupe keys and its provider event id.
func dedupeKeys(m *schema.Message, evKeys []string) []string {
	keys := append([]string{m.ID}, evKeys...)
	if e := m.Metadata.Extra.EventID; e != "" {
		keys = append(keys, mailbox.EventKey(m.Provider, e))
	}
	return keys
}

func (p *Pipeline) isSelf(m *schema.Message) bool {
	for _, id := range p.opts.Self[m.Provider] {
		if id != "" && (m.Participants.From.ID == id || m.Participants.From.PlatformID == id) {
			return true
		}
	}
	return false
}

// seen reports whether any key is in the mailbox, the staging area or this
// batch.
func (p *Pipeline) seen(ctx context.Context, keys []string, local map[string]*schema.Message) (bool, error) {
	for _, k := range keys {
		if local[k] != nil || p.staged[k] {
			return true, nil
		}
		ok, err := p.mb.Seen(ctx, k)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}
