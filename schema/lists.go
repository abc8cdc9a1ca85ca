package schema

import (
	"bytes"
	"strconv"
)

// MaxReadItems is how many items a reader of a mailbox file (`courier
// read`, reindex, the parent of a reply) takes of one list of its front
// matter. Courier writes at most 1,000 of a list a sender makes (the
// email adapter's MaxListItems), but a file written before that bound
// may hold 57,000 Cc participants, and decoding a YAML list costs some
// 3 KB an item: 274 MB to read one such 10 MB file. See CapLists.
const MaxReadItems = 2000

// CapLists returns data, a mailbox file (or its front matter), with each
// block sequence of its front matter cut after max items (MaxReadItems
// when 0), a comment in place of the rest saying how many items were not
// read; and how many lists it cut. data is returned as it is, without a
// copy, when no list is longer. The lines of block scalars (a Markdown
// list in content.markdown) are not items; the body is left alone.
func CapLists(data []byte, max int) ([]byte, int) {
	if max <= 0 {
		max = MaxReadItems
	}
	c := listCapper{max: max, skipIndent: -1, blockParent: -1}
	pos := 0
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += pos + 1
		}
		line := data[pos:end]
		if pos == 0 {
			if string(bytes.TrimRight(bytes.TrimPrefix(line, []byte("\ufeff")), " \t\r\n")) != delimiter {
				return data, 0 // no front matter
			}
		} else if done := c.line(data, pos, line); done {
			break
		}
		pos = end
	}
	if c.out == nil {
		return data, 0
	}
	c.endSkip()
	return append(c.out, data[pos:]...), c.cut
}

// listCapper is the state of CapLists.
type listCapper struct {
	max int
	out []byte // nil until a line is dropped
	cut int

	seqs        []seqState // the open block sequences, innermost last
	blockParent int        // the column of a block scalar's key; -1 when none
	skipIndent  int        // the indentation of the items dropped; -1 when none
	skipped     int
}

type seqState struct{ indent, items int }

// line handles the line at pos of data: kept (copied to out once
// anything was dropped) or dropped. done reports the closing delimiter.
func (c *listCapper) line(data []byte, pos int, line []byte) (done bool) {
	indent, blank := indentOf(line, true)
	if c.blockParent >= 0 {
		if blank || indent > c.blockParent {
			c.keep(line)
			return false
		}
		c.blockParent = -1
	}
	item := indent < len(line) && line[indent] == '-' && (indent+1 == len(line) || line[indent+1] == ' ' || line[indent+1] == '\n' || line[indent+1] == '\r')
	if c.skipIndent >= 0 {
		switch {
		case blank || indent > c.skipIndent:
			return false
		case indent == c.skipIndent && item:
			c.skipped++
			return false
		}
		c.endSkip()
	}
	if indent == 0 {
		if t := string(bytes.TrimRight(line, " \t\r\n")); t == delimiter || t == "..." {
			return true
		}
	}
	if !blank {
		for len(c.seqs) > 0 {
			top := c.seqs[len(c.seqs)-1]
			if top.indent < indent || (top.indent == indent && item) {
				break
			}
			c.seqs = c.seqs[:len(c.seqs)-1]
		}
	}
	if item {
		if n := len(c.seqs); n > 0 && c.seqs[n-1].indent == indent {
			c.seqs[n-1].items++
		} else {
			c.seqs = append(c.seqs, seqState{indent: indent, items: 1})
		}
		if c.seqs[len(c.seqs)-1].items > c.max {
			if c.out == nil {
				c.out = append(make([]byte, 0, pos+4096), data[:pos]...)
			}
			c.skipIndent, c.skipped = indent, 1
			return false
		}
	}
	// A block scalar's lines are indented past its key's (or its item's
	// dash's) column.
	if _, _, kind := valueStart(line, indent); kind == '|' || kind == '>' {
		c.blockParent = indent
	}
	c.keep(line)
	return false
}

func (c *listCapper) keep(line []byte) {
	if c.out != nil {
		c.out = append(c.out, line...)
	}
}

// endSkip ends the items being dropped with a comment saying how many.
func (c *listCapper) endSkip() {
	if c.skipIndent < 0 {
		return
	}
	c.out = append(c.out, bytes.Repeat([]byte(" "), c.skipIndent)...)
	c.out = append(c.out, "# [… "+strconv.Itoa(c.skipped)+" more items in the file, not read]\n"...)
	c.cut++
	c.skipIndent = -1
}
