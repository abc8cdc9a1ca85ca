package email

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/email/internal/mime"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// DefaultDedupeWindow is how far apart two identical mails without a
// Message-ID may be received and still be one message (a client's retry):
// courier.adapters.email.receiver.dedupe_window.
const DefaultDedupeWindow = 10 * time.Minute

// traceFields are the header fields an MTA adds on each hop, or a filter
// on each delivery: a mail delivered twice differs in them, so its digest
// leaves them out (canonical keys).
var traceFields = map[string]bool{
	"Received": true, "X-Received": true, "Return-Path": true, "Delivered-To": true,
	"X-Original-To": true, "Envelope-To": true, "X-Envelope-To": true, "X-Envelope-From": true,
	"Received-Spf": true, "Authentication-Results": true, "X-Virus-Scanned": true,
}

// tracePrefixes are the families of trace fields: ARC sets (each
// intermediary adds one, timestamped) and spam filters' verdicts.
var tracePrefixes = []string{"Arc-", "X-Spam-"}

func isTrace(key string) bool {
	if traceFields[key] {
		return true
	}
	for _, p := range tracePrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// newDigest starts the digest of a message (metadata.extra.digest): the
// SHA-256 of its header fields but the trace fields, each as "Key: value"
// (the canonical key, the value unfolded) and a LF, then a LF, then the
// body with its line ends as LF; the body is written to it as it streams.
func newDigest(h mime.Header) *bodyHash {
	d := &bodyHash{h: sha256.New()}
	for k, v := range h.Fields() {
		if isTrace(k) {
			continue
		}
		io.WriteString(d.h, k)
		d.h.Write([]byte(": "))
		d.h.Write(v)
		d.h.Write([]byte{'\n'})
	}
	d.h.Write([]byte{'\n'})
	return d
}

// digest returns "sha256:" and the hex digest, once the body is written.
func (b *bodyHash) digest() string {
	b.flush()
	return "sha256:" + hex.EncodeToString(b.h.Sum(nil))
}

// event is the adapters.Event of a normalised mail, from the receiver or
// IMAP: its Message-ID and its digest are its identity (adapters.Content),
// a mail without a Message-ID is one message only within window of an
// identical one, and its sender is unverified unless v verified it.
func event(m *schema.Message, v *Verifier, window time.Duration) adapters.Event {
	ev := adapters.Event{Message: m, JoinKnownThread: true, UnverifiedSender: v.UnverifiedSender(m)}
	if ev.UnverifiedSender {
		ev.SenderNotAligned = senderNotAligned(m.Metadata.Extra.Auth)
	}
	base := m.ID
	rule := &adapters.Content{Derive: func(salt string) string { return threading.DerivedID(base, salt) }}
	if m.Metadata.Extra.SyntheticID {
		rule.Window = window
		if rule.Window <= 0 {
			rule.Window = DefaultDedupeWindow
		}
	}
	ev.Content = rule
	return ev
}
