// Package lark is the Lark (Feishu) provider, built on the official SDK
// (github.com/larksuite/oapi-sdk-go/v3): the long connection or webhooks
// in, im/v1 messages and replies out.
//
// The parts, a file each:
//   - lark.go: Options and New, which assemble the provider;
//   - normalize.go, directory.go, resources.go, forward.go: an event to
//     a schema.Message (names from the contact and chat APIs, resources
//     streamed into the dropzone, the tenant token, a merge_forward's
//     messages shown as an email forward is);
//   - inbound.go: the one path from an event to the mailbox, for every
//     transport, and the per-chat positions, kept by the chat engine
//     (adapters/chatsync: Tracker) as create_time in milliseconds;
//   - ws.go, webhook.go, replay.go: the transports (the SDK's long
//     connection, the HTTP callback on chatsync.Webhook with Lark's
//     verification and decryption, the catch-up from history after a
//     gap, run by chatsync.CatchUp), the catch-up reading each chat's
//     history (history.go) and its threads (threads.go);
//   - resolve.go, send.go, client.go: the rules for drafts, the Sender
//     (its steps posted by chatsync.Poster), and the SDK's REST client it
//     uses (on the adapter's own tenant token: the SDK's token cache is
//     process-wide and never renews a token Lark refused);
//   - checks.go: what `courier doctor` asks, and apiGet, the one
//     authenticated GET outside the SDK.
package lark

import (
	"regexp"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
	"github.com/monoco/courier/internal/confkit"
	"github.com/monoco/courier/schema"
)

// Options configure the provider: its Config, the limits, the dropzone,
// a logger and an HTTP client. The zero value is a disabled provider.
type Options = chatsync.Options[Config]

// ids are Lark's: chats (oc_), users (ou_ open_id, on_ union_id) and
// messages (om_).
var ids = regexp.MustCompile(`^(oc|ou|on|om)_[A-Za-z0-9_-]+$`)

// New returns the Lark provider. A provider that is not enabled only
// resolves drafts. New does no I/O.
func New(o Options) (*adapters.Provider, error) {
	p := &adapters.Provider{Name: schema.Lark, Resolver: Resolver{}}
	if !o.Config.Enabled {
		return p, nil
	}
	a, err := newAdapter(o.Config, o.Limits, o.Dropzone, o.HTTPClient, o.Logger)
	if err != nil {
		return nil, err
	}
	if err := a.inbound(p); err != nil {
		return nil, err
	}
	p.Health, p.Ignored = &a.health, &a.ignored
	p.Secrets = []confkit.Secret{o.Config.AppSecret, o.Config.VerificationToken, o.Config.EncryptKey}
	if o.Config.AppID != "" {
		p.Self = []string{o.Config.AppID}
	}
	p.Checks = a.checks()
	a.outbound(p)
	return p, nil
}
