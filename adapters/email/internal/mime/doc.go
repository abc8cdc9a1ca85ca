// Package mime is the email adapter's MIME reader: a lenient reader of raw
// RFC 5322 / MIME messages that never refuses one. [Read] splits a message
// into its header, its body text (decoded to UTF-8, in order, with the
// forms of multipart/alternative chosen and messages forwarded inline
// shown as a mail reader shows them) and its other parts, which it streams
// into a dropzone batch as [Artifact]s. A [Decoder] then decodes the header
// text, addresses and file names with the charset of the message's text,
// and a [Renderer] turns the body into text, HTML and Markdown. Mapping the
// result to a protocol message is the email package's Normalize, not this
// package's.
//
// # Why not go-message
//
// Mail as it is found is often broken: boundaries missing, repeated or
// extended by a nested part's, multiparts that end early, header fields
// folded without their indent or named with 8-bit bytes, encoded words
// split mid-character, run together or in charsets nobody registered, raw
// 8-bit header bytes in an unnamed charset, base64 with junk in it.
// go-message's reader (github.com/emersion/go-message) is strict about
// these, as it may be: on the shared test corpus (COURIER_CORPUS) it
// refuses 43 of the 165 messages. 20 fail outright at the message header
// (no blank line after the header, or no header at all; junk lines and
// lines folded without their indent; field names with spaces; an mbox
// "From " line) and 23 in a part (boundaries missing, empty, overlong or
// clashing with a nested one; multiparts and base64 that end early or
// hold junk; raw 8-bit bytes in parameters; unknown charsets and transfer
// encodings). TestCorpusGoMessage logs the count and the reasons. A
// refused message would be a message lost to the agent, so this reader
// reads everything it can and says what it repaired. On the messages
// go-message does read, the two agree on the subject, the text and the
// parts, except where this reader decodes what go-message leaves as it is
// (encoded words inside a quoted file name, a raw 8-bit byte inside an
// encoded word) or follows the RFCs where go-message does not: the
// differences are listed, with their reasons, in goMessageDeviations.
//
// # Guarantees
//
//   - Read fails only on I/O errors: reading the message, or writing to
//     and reading back from the batch. Whatever the bytes hold, it returns
//     a Message; what it could not parse is skipped or repaired and said
//     in the Message's [Notes] (each note once, 4000 bytes at most).
//   - Memory stays flat whatever the message's size: parts that are not
//     body text stream into the batch; body text is decoded [MaxText] at
//     a time and held up to Options.MaxHeld, the rest waiting in a spool
//     file that the Renderer streams back; a large HTML part is converted
//     to Markdown a piece at a time, and only as much of it as asked; a
//     header keeps at most [MaxHeaderBytes]; buffers are pooled and
//     released part by part.
//   - The work is bounded: past [MaxParts] parts the rest are skipped,
//     multiparts nested deeper than [MaxDepth] are stored whole, messages
//     forwarded inside one another are shown down to [MaxForwards] levels
//     and kept whole below; header decoding grows linearly with the
//     header's size, whatever its shape.
//   - Decoded text is UTF-8 with LF line ends: every charset label is
//     looked up leniently (GB2312 read as GB18030, ISO-8859-1 as
//     Windows-1252, and so on; go-message's charset table gets the same
//     mappings), unlabelled 8-bit bytes are decoded with the message's
//     charset or guessed, and bytes no charset explains are replaced.
//     [CleanText] is the last step: valid UTF-8 without NUL bytes.
//   - File names are sanitised by dropzone.SanitizeName: a name from a
//     message never escapes the dropzone.
//
// The rules it follows for each kind of damage are in the email package's
// documentation (sections MIME, Charsets and Bad input), which describes
// the adapter's behaviour as a whole.
package mime
