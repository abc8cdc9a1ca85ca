// Package adapters holds the contracts between Courier's core and its
// provider adapters, and nothing else: the interfaces are here so that the
// core (ingest, outbound, the service) and the providers (adapters/email,
// adapters/lark, adapters/slack) depend on this leaf package and never on
// each other.
//
// # A provider
//
// A provider is one package with one constructor that returns a *Provider:
// what it offers, each part optional but the Resolver, and its section of
// the config (courier.adapters.<name>), which it owns: its Config type,
// defaults and checks. One explicit table, internal/providers/all, lists
// each provider's name, the constructor of its Config and its own (no
// registry filled by init()).
//
// Inbound, a Source normalises what its provider delivers into Events and
// hands them to a Sink. The Sink's contract: Deliver returns nil only once
// every event it was given is durable (written, staged for debounce, or
// recognised as a duplicate) and the events' checkpoints are saved, in that
// order; a Source therefore moves its own position (IMAP UID, stream
// offset) only through Event.Checkpoint and never ahead of the files. A
// provider that receives over HTTP offers a Webhook instead (or as well):
// the service mounts its handler at /webhook/<provider> and gives it the
// Sink.
//
// Senders. The pipeline takes a message's sender to be who the message
// says unless its Event is marked UnverifiedSender. A chat platform
// authenticates its users, so Lark and Slack events leave it unset; a
// provider whose senders can be forged sets it for every message whose
// sender it could not verify (email: Courier's own DKIM check and the
// trusted hosts' Authentication-Results, recorded in metadata.extra.auth).
// An unverified sender inherits a correlation id only from a message it
// took part in.
//
// Outbound, a Sender delivers one Attempt at a queued Draft. Its error says
// whether to try again: wrap it with Temporary (optionally with a
// Retry-After) or Permanent. An error that is neither is treated as
// temporary, as maddy's exterrors.IsTemporaryOrUnspec does, because giving
// up on a message for an unclassified error loses it for good. A send that
// reached some recipients returns a PartialError; the next Attempt carries
// them in Accepted. Just before the step that hands a message over for
// good, a Sender calls Attempt.EnterCommit: the engine's Gate lets one send
// at a time past it, which bounds the duplicates a crash can cause to one.
//
// The optional abilities are named interfaces, checked by type assertion:
// a Source may be a Starter (connect and check credentials before the
// service counts as started), a Stopper, an ErrorReporter (record the errors
// of its Run loop) and a Fetcher (one pass, for `courier fetch`); any part
// may be a HealthReporter; the Sink may be a DeadLetterSink, which Sources
// reach through SetAside (deadletter.go).
//
// Failures stay in their provider's lane. A Source whose provider refuses
// the credentials or their scopes returns, from Start or Run, an error
// marked Refused: the service then runs without it (its Start does not
// fail the service's), shows the reason on /health and starts it again
// minutes later (courier.restart.refused), however long the refusal lasts.
// A Source never stops for good, nor waits for a restart of the service: a
// server out of reach is retried as it always was, by the Source itself
// or by the service's restart of a failed Run.
//
// # Adding a provider
//
// The package adapters/adapterstest is a whole provider in a screenful: a
// Source, a Sender, a Webhook and a Resolver for a chat that lives in
// memory; cmd/courier's TestSeamTemplateProvider runs it inside the real
// service. To add a real one, say adapters/discord, one writes:
//
//  1. adapters/discord/discord.go: Options (the config section, the
//     confkit.Limits, a *dropzone.Store, a *slog.Logger) and New(Options)
//     (*adapters.Provider, error), doing no I/O. A provider that is not
//     enabled returns only its Resolver. A chat provider's Options are
//     chatsync.Options[Config], as Slack's and Lark's.
//
//  2. The Resolver: Recognizes (which recipient strings are its ids) and
//     Resolve (recipients from the message answered, often SameSession;
//     the IdempotencyKey; the InboundID when it is known before sending).
//
//  3. A Source (and/or a Webhook) that builds schema.Message values, with
//     ids of the form <provider>_<id> (the threading package has the
//     helpers), and hands them to the Sink with a Checkpoint; a Sender
//     that returns a Receipt with the provider's message id, the Channel
//     when ids are per channel, and the InboundID of what it posted.
//     Health, Checks and Secrets as it has them. A chat provider builds
//     these on adapters/chatsync, the chat providers' engine: per-chat
//     checkpoints that survive gaps and crashes, the joining of
//     redeliveries, the webhook skeleton, the catch-up loop and the
//     step-by-step post loop; what is left to it is its API calls and
//     its normaliser (its package doc says how; adapters/slack and
//     adapters/lark run on it). adapters/internal/chatmsg has what chat
//     normalisers and Senders share: the text a file keeps within
//     courier.limits (Fit), a bounded download (LimitReader), a draft's
//     words (DraftWords).
//
//  4. adapters/discord/config.go: its section, courier.adapters.discord,
//     as its own Config (package internal/confkit is what it is made of):
//     the fields with their YAML keys, Defaults, Check (each error through
//     the confkit.Checker at its key relative to the section, which
//     internal/config turns into the whole dotted key and its line), and
//     ConfigOf(confkit.Sections) *Config, the typed accessor the row and
//     tests use. A credential is a confkit.Secret field and a string
//     field beside it with the key's _file form: internal/config finds it
//     (Config.Secrets), expands ${NAME} in it, reads its file and leaves
//     it empty for the commands that run without secrets. internal/config
//     is not edited: it reads the section through the table. The example
//     config, deploy/courier.example.yaml, shows the keys (deploy's
//     TestExampleConfig checks it names every key of every section).
//
//  5. One row in internal/providers/all's Table, shown below.
//
// The row:
//
//	{Name: schema.Discord, Config: func() confkit.Section { return new(discord.Config) },
//		New: func(cfg *config.Config, env providers.Env) (*adapters.Provider, error) {
//			return discord.New(discord.Options{Config: *discord.ConfigOf(cfg), Limits: cfg.Courier.Limits,
//				Dropzone: env.Dropzone, Logger: env.Log})
//		}},
//
// mailbox, ingest, outbound and the service know providers only by name;
// they need no change. The protocol's providers (schema.Providers) have
// their names already; a provider Courier runs is also listed in
// schema.Implemented, so that `courier init` makes its folders.
package adapters
