package schema

// Overflow is a text field of a message that was longer than a message
// file keeps (courier.limits.max_text_bytes): the file holds its first
// Kept bytes, and the rest, in order, is in Artifacts, so that the field's
// whole text is the file's value followed by their contents. Nothing is
// lost; a file stays small enough for an agent to read.
type Overflow struct {
	// Field is content.text, content.html, content.markdown or body.
	Field string `yaml:"field" json:"field"`
	// Size is the whole text's length, in bytes.
	Size int64 `yaml:"size" json:"size"`
	// Kept is how many of its first bytes the file holds (for the body,
	// before the line that says where the rest is).
	Kept int64 `yaml:"kept" json:"kept"`
	// Artifacts are the ids of the artifacts (among the message's) that
	// hold the rest, in order.
	Artifacts []string `yaml:"artifacts" json:"artifacts"`
}
