package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"regexp"
	"strings"
	"sync"

	"github.com/monoco/courier/schema"
)

// What a provider receives but does not file as a message is one of two
// things, and neither goes unrecorded:
//
//   - an event it files on purpose as nothing (an event type it does not
//     ingest, a channel notice, another bot's post with ignore_bots): it
//     counts it in its Provider.Ignored, by a reason that is a constant of
//     its code, and /health and /metrics show the counts;
//   - an event or mail it should have filed but cannot make a message of
//     (a message event that names no channel, an edit that names no
//     message, a body that is not JSON): its normaliser returns an
//     Undeliverable error, and its Source hands the payload as received to
//     SetAside, which keeps it in .deadletter/<provider>/ with the reason,
//     counts it and fires the dead hook event (the service's Sink does;
//     see DeadLetterSink).

// DeadLetter is an inbound event or mail that cannot become a message.
type DeadLetter struct {
	Provider schema.Provider
	// Source says where it came from: the transport, and the account or
	// folder when there are several ("slack events api", "imap work/INBOX").
	Source string
	// Reason says what is wrong with it, in one line.
	Reason string
	// Payload is what the provider sent, as received. The Sink scrubs
	// secrets from it before it is kept (ScrubPayload).
	Payload []byte
	// Ext is the kept file's extension: "json" (the default) or "eml".
	Ext string
}

// DeadLetterSink is a Sink that keeps dead letters: the service's is.
// Sources reach it through SetAside, so that a Sink of a test or a tool
// that does not keep them still works.
type DeadLetterSink interface {
	Sink
	// SetAside keeps d; an error means it is not kept, and the Source
	// does not acknowledge the event (a retry may succeed). A dead letter
	// refused because the provider's dead letters are at their bound is
	// counted and logged, and SetAside returns nil.
	SetAside(ctx context.Context, d DeadLetter) error
}

// SetAside hands d to sink when it keeps dead letters. Otherwise it logs
// that nothing is written, as the provider did before there were dead
// letters.
func SetAside(ctx context.Context, sink Sink, log *slog.Logger, d DeadLetter) error {
	if dl, ok := sink.(DeadLetterSink); ok {
		return dl.SetAside(ctx, d)
	}
	if log != nil {
		log.Warn(string(d.Provider)+": event cannot be filed; nothing written (this sink keeps no dead letters)", "source", d.Source, "reason", d.Reason)
	}
	return nil
}

// undeliverable is the error of a normaliser that cannot make a message
// of what it was given, and never will.
type undeliverable struct{ reason string }

func (e *undeliverable) Error() string { return e.reason }

// Undeliverable is what a normaliser returns for an event it should file
// but cannot turn into a message: reason (one line, naming what is
// missing or wrong) becomes the dead letter's.
func Undeliverable(reason string) error { return &undeliverable{reason: reason} }

// UndeliverableReason returns the reason of an Undeliverable error.
func UndeliverableReason(err error) (string, bool) {
	var u *undeliverable
	if errors.As(err, &u) {
		return u.reason, true
	}
	return "", false
}

// Ignored counts the inbound events a provider does not file on purpose,
// by reason. Reasons are constants of the provider's code (never anything
// an event says), so the counts stay a handful. Safe for concurrent use;
// a nil *Ignored counts nothing.
type Ignored struct {
	mu sync.Mutex
	m  map[string]uint64
}

// Add counts one event ignored for reason.
func (c *Ignored) Add(reason string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]uint64{}
	}
	c.m[reason]++
}

// Counts returns a copy of the counts.
func (c *Ignored) Counts() map[string]uint64 {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// tokenRE matches what looks like a Slack token (xoxb-, xoxp-, xoxe.xoxp-,
// xapp-, ...), wherever it is.
var tokenRE = regexp.MustCompile(`\bx(?:ox[a-z](?:\.xox[a-z])?|app)-[0-9A-Za-z][0-9A-Za-z-]*`)

// scrubbed replaces a secret in a payload.
const scrubbed = "[scrubbed]"

// ScrubPayload readies a payload to be kept as a dead letter: a JSON
// payload loses every key that holds a secret (as ScrubRaw: token,
// secret, *_token, *_secret, encrypt_key, password) and is written again,
// indented; in any payload, what looks like a Slack token is replaced.
// Numbers keep their digits.
func ScrubPayload(payload []byte) []byte {
	if json.Valid(payload) {
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			v = ScrubRaw(v, func(x any) any {
				if s, ok := x.(string); ok {
					return tokenRE.ReplaceAllString(s, scrubbed)
				}
				return x
			})
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if enc.Encode(v) == nil {
				return b.Bytes()
			}
		}
	}
	return tokenRE.ReplaceAll(payload, []byte(scrubbed))
}

// secretKey reports whether a JSON key names a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	switch k {
	case "token", "secret", "encrypt_key", "password":
		return true
	}
	return strings.HasSuffix(k, "_token") || strings.HasSuffix(k, "_secret")
}
