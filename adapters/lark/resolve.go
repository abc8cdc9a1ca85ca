package lark

import (
	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/schema"
)

// Resolver is Lark's rules for drafts. (Being extended with the Sender:
// reply_in_thread, receive_id_type, uuid.)
type Resolver struct{}

var _ adapters.Resolver = Resolver{}

// Recognizes reports whether r is a Lark chat, user or message id.
func (Resolver) Recognizes(r string) bool { return ids.MatchString(r) }

// Resolve answers in the same chat and fixes the idempotency key.
func (Resolver) Resolve(d *schema.Draft, parent *adapters.Parent, opts adapters.ResolveOptions, src *schema.Source) error {
	return adapters.ChatResolver{IDs: ids}.Resolve(d, parent, opts, src)
}
