package schema

// Overflow is a text field of a message that was longer than a message
// file keeps (courier.limits.max_text_bytes): the file holds its first
// Kept bytes, and the rest, in order, is in Artifacts, so that the field's
// whole text is the file's value followed by their contents. Nothing is
// lost; a file stays small enough for an agent to read.
//
// It is also a list a sender writes that was longer than a file keeps (an
// email's 1,000 addresses a field): Size and Kept then count items, and
// the artifacts hold the items left out, one a line, in order. Of
// provider_raw.references the file keeps the first id (the thread's root)
// and the last ones, and the artifacts hold the ids between.
type Overflow struct {
	// Field is content.text, content.html, content.markdown or body; or
	// the list: participants.to, participants.cc, participants.bcc (and
	// provider_raw's to and cc, cut alike), provider_raw.from,
	// provider_raw.reply_to, provider_raw.references or
	// metadata.extra.external_participants.
	Field string `yaml:"field" json:"field"`
	// Size is the whole text's length, in bytes (a list's: its items).
	Size int64 `yaml:"size" json:"size"`
	// Kept is how many of its first bytes the file holds (for the body,
	// before the line that says where the rest is; a list's: items).
	Kept int64 `yaml:"kept" json:"kept"`
	// Artifacts are the ids of the artifacts (among the message's) that
	// hold the rest, in order.
	Artifacts []string `yaml:"artifacts" json:"artifacts"`
}
