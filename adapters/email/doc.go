// Package email is Courier's email adapter. This file documents how a raw
// RFC 5322 message becomes a protocol message ([Normalize]); the IMAP
// source, the SMTP receiver and the SMTP sender build on it. The reading
// of the message (sections MIME, Charsets and Bad input below) is done by
// the lenient MIME reader of internal/mime; Normalize maps what it reads.
//
// # Mapping (DESIGN §2–§4)
//
//   - id: threading.EmailID of the Message-ID. Without a usable one,
//     "email_" followed by threading.SyntheticUID of the raw From, Date and
//     Subject values and the raw body (line ends hashed as LF, so CRLF and
//     LF copies of a message agree), with metadata.extra.synthetic_id set.
//     The body is hashed as it streams, never held. The pipeline may give
//     the message another id (threading.DerivedID) when a different mail
//     holds this one, or a copy without a Message-ID came outside the
//     dedupe window: see adapters.Content and docs/email.md, "Email identity".
//   - metadata.extra.digest: "sha256:" and the SHA-256 of the header fields
//     but the trace fields (Received, Return-Path, ...: digest.go), each as
//     "Key: value" unfolded, then the body, line ends as LF; hashed as the
//     message streams.
//   - session: type thread, id = thread_key = threading.EmailThread(...).Key
//     (the synthetic uid is the root when there are no ids at all), name =
//     the decoded Subject. reply_to and thread_root come from the same
//     Thread.
//   - participants: From (the first address), To, Cc, Bcc; mentions empty.
//     id is the address lowercased, name the display name or else the
//     address, email the address only when schema.ValidEmail accepts it
//     (IDN domains and odd local parts keep id and platform_id only),
//     platform_id the address as written. A From without an address falls
//     back on the Sender header; failing that, a From with a name and no
//     address uses the name as id, and a message with no From at all gets
//     {id: "unknown", name: "(no sender)"}. Each is noted in parse_error.
//     Recipients without an address (group names) are left out.
//   - timestamp: the Date header in UTC, parsed leniently; when missing or
//     not understood (or before 1970), the time received, noted.
//     received_at: NormalizeOptions.ReceivedAt (now when zero).
//   - type: text without artifacts; mixed with a body and artifacts; with
//     artifacts only, image, audio or video for a single artifact of that
//     kind, else file.
//   - content.text: the text/plain body decoded to UTF-8; content.html: the
//     text/html body as received, decoded to UTF-8; content.markdown, when
//     there is HTML: the body in order, each HTML part converted by
//     html-to-markdown (CommonMark) with the cid: links of inline images
//     replaced by ".monoco/dropzone/<artifact path>", text parts as they are.
//     Line ends are LF. A form the message does not have is null: in
//     particular content.text of an HTML-only message is null, not made up
//     from the HTML (the Markdown is there, and is the body). The body
//     under the front matter is the Markdown, else the text, ending in a
//     newline.
//   - The text a file keeps is bounded (NormalizeOptions.Bounds, from
//     courier.limits.max_text_bytes, 4 MiB by default): the text and the
//     HTML share it with the Markdown and the body made from them, a short
//     field keeping all of its text and the long ones the same share. What
//     the text or the HTML does not keep goes on, to the byte, in text
//     artifacts (text-rest.txt, html-rest.html; markdown-rest.md for a
//     Markdown longer than its share), split at the artifact limit;
//     metadata.extra.overflow lists them by field with the sizes,
//     parse_error says so, and the body ends with a line naming them. The
//     Markdown is made from the HTML kept, so a 120 MB HTML mail costs the
//     conversion of 1.3 MB, not of 120. Bounds also let only so many
//     messages normalise at once (normalize_concurrency): what one takes
//     in memory is bounded by the text kept, whatever its size, so the
//     process's is too.
//   - The lists a sender writes are bounded too (MaxListItems, 1,000 an
//     address field): the participants and provider_raw's addresses of
//     From, Reply-To, To, Cc and Bcc, external_participants, and the ids
//     of References (the first, the root, and the last 999). The rest of a
//     longer list goes on, one item a line, in a text artifact
//     (cc-rest.txt and the like) recorded in metadata.extra.overflow with
//     size and kept counting items, and parse_error says so: a megabyte of
//     Cc, 57,000 addresses, made a 9.7 MB file before. Threading, sender
//     verification and personal_eligible read the whole header.
//   - metadata.provider_raw: message_id, in_reply_to, references (each id
//     "<...>" as written), subject (decoded), date (raw), from, to, cc,
//     reply_to ("Name <addr>" strings, decoded; a list with no address keeps
//     its text, as "undisclosed-recipients:;"), and when present list_id,
//     auto_submitted, precedence, x_mailer and the top-level content_type.
//   - metadata.extra: account, folder, uid, uidvalidity,
//     external_participants and personal_eligible (threading.Participants
//     of From, Reply-To, To, Cc, Bcc less NormalizeOptions.Own; eligible
//     only when the sender is verified, below), raw (the message as
//     received, in the dropzone), synthetic_id, parse_error, notes (a
//     Message-ID or Date the mail lacks, as local submissions do, and
//     what stands in for it: not a parse error), auth.
//
// # Who sent it (metadata.extra.auth)
//
// Anyone can write a From. auth records what backs it, each value marked
// by where it comes from (schema.Auth):
//
//   - dkim, dkim_signatures: Courier's own verification of the
//     DKIM-Signature fields (go-msgauth), reading the raw message again from
//     the dropzone, its header held in memory up to 1 MiB and its body
//     streamed through the hashes; at most 5 signatures. Keys come from DNS
//     (VerifierOptions.LookupTXT, 5 s a lookup, cached 10 minutes, failures
//     1 minute, 1,024 names at most). A key that does not exist is
//     permerror; a lookup without an answer is temperror, honestly: the
//     message is written all the same.
//   - spf, dmarc, trusted_dkim and authserv_id: from Authentication-Results
//     fields whose authserv-id is configured (authserv_ids), only those from
//     the topmost one down to the next Received field: every MTA prepends
//     its Received field (RFC 5321 §4.4) and its results, so what lies below
//     came with the message and may be forged, even naming our host when
//     the MTA does not delete such fields as RFC 8601 §5 asks.
//     untrusted_authserv_ids lists the others' ids, never their results.
//   - verified, verified_by: the From domain (one From address only) is
//     aligned with a passing signature Courier checked, or with a trusted
//     DMARC, SPF (smtp.mailfrom) or DKIM (header.d) pass. Alignment is
//     relaxed (RFC 7489): the same organisational domain by the Public
//     Suffix List, private suffixes included (example.co.uk and
//     other.co.uk are not aligned, nor two github.io users).
//   - envelope (receiver): MAIL FROM, RCPT TO (64 listed), client_ip and
//     helo, as the client said them. return_path, delivered_to: those
//     header fields, as the delivering MTA wrote them (IMAP mail has no
//     envelope of ours).
//
// An unverified sender is not personal_eligible, and its event is marked
// adapters.Event.UnverifiedSender, so that it inherits a correlation id
// only from a message it took part in; trust_unverified turns both off.
// The From is all "took part" can read, and a forger writes it, so an
// unverified sender inherits nothing at all unless its envelope sender
// (MAIL FROM at the receiver, Return-Path over IMAP) is aligned with the
// From domain as above; an unknown or null (<>) envelope sender is not
// (Event.SenderNotAligned). auth.correlation then says why the message
// did not inherit.
//
// # MIME
//
// multipart/alternative gives the text of its last part that has text and
// the HTML of its last part that has HTML (RFC 2046: the last is the best);
// multipart/mixed and the others give every inline text part, in order (a
// list footer added as a second text/plain part is kept); multipart/related
// gives its root (the "start" part, else the first) and stores the other
// parts as inline artifacts with their content_id; multipart/digest parts
// default to message/rfc822. A message/rfc822 part is stored whole as one
// artifact, named after its Subject + ".eml" when it has no file name; unless
// its disposition is attachment it is also shown as a mail reader shows a
// forward: a block ("---------- Forwarded message ----------", then its
// From, Date, Subject, To, Cc) and its body join the text (and the HTML,
// when it has HTML), its own attachments join the artifacts; 8 levels deep
// at most.
//
// The body under the front matter keeps every part in order: HTML parts
// as Markdown, text parts as they are (a list footer beside the HTML is
// not lost). content.text and content.html hold only what the message has
// in that form.
// A text/plain or text/html part is body text unless it is an attachment
// (Content-Disposition: attachment, or a file name); everything else is an
// artifact, streamed into the dropzone. A text/* artifact sent as 7bit, 8bit
// or quoted-printable is stored with LF line breaks (those were the
// transfer's CRLF), as the body text is; one sent as base64 keeps the
// sender's bytes. A text part without a charset
// takes one named on an enclosing multipart, as some mailers put it there.
// An artifact with a Content-ID keeps it as content_id; it is inline when
// its disposition says so, or, without one, inside multipart/related or
// when it has a Content-ID.
//
// Artifact names come from the Content-Disposition filename, else the
// Content-Type name, decoded (RFC 2231 with its charset, encoded words,
// raw 8-bit bytes) and passed through dropzone.SanitizeName ("../../x"
// becomes "x"); a part without one is "attachment" plus an extension from
// its type. type is schema.ArtifactTypeOf.
//
// # Charsets
//
// Every header's encoded words are decoded (leniently: inside words, with
// spaces, bad base64, and with the bytes of adjacent words joined before
// decoding so that a character split between two words survives). GB2312
// and GBK labels decode as GB18030, ISO-8859-1 as Windows-1252, KS C 5601
// as EUC-KR (the supersets that senders really use); these mappings are
// also registered in go-message's charset package. Raw 8-bit header bytes
// are UTF-8 when valid (RFC 6532), else decoded with the charset of the
// message's first labelled text part, else guessed: ISO-2022-JP escapes,
// then GB18030, Shift_JIS or Big5 when the bytes look like that charset,
// else Windows-1252 (guesses are noted). A part in an unknown charset keeps
// its text (as UTF-8 when valid, else as Windows-1252), noted; a part
// labelled in a one-byte charset whose bytes are valid UTF-8 is read as
// UTF-8, noted. Everything written is valid UTF-8; NUL bytes are removed,
// noted.
//
// # Bad input
//
// Normalize never fails on what a message holds. The header reader skips
// an mbox "From " line; reads a field whose name has spaces or 8-bit bytes
// when more fields follow it; takes a line without a colon among fields for
// broken folding (joined to a field that ends in ';' or ',', or when it
// looks like a parameter) or junk (skipped, as mime4j does); and otherwise
// starts the body at the first line that is not a field, so a message
// without the blank line, or without a header, keeps its text. A header
// over 1 MiB loses its further fields. The multipart reader is
// line based: a delimiter must be "--boundary" followed by "--" or white
// space, so a nested boundary that extends the outer one is not taken for
// it; a missing final boundary ends the last part; a multipart without a
// boundary parameter uses the first "--" line of its body; one without any
// delimiter is read as text. Base64 skips what is not base64 and decodes the
// rest; quoted-printable keeps a stray "=". A text part of any size is
// decoded 4 MiB at a time, cut at line ends, and past the text held in
// memory waits in a spool file (unlinked: it cannot outlive the process);
// a part over NormalizeOptions.MaxArtifact is skipped;
// beyond 1000 parts or 32 levels of nesting the rest is skipped or stored
// whole. Each of these is noted in metadata.extra.parse_error.
package email
