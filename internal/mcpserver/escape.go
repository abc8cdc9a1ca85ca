package mcpserver

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// A listing's result is sent as ASCII, every rune past it escaped
// (\uXXXX): the same JSON, which the TypeScript SDK's client reads
// faster. It decodes each frame from UTF-8 before parsing it, and a
// frame with one rune past ASCII (the ellipsis of each preview) decodes
// to a string of two bytes a character, about three times slower: for
// 30,000 entries that took about 0.1 s, half the CPU of the command line's
// whole listing, where the escaped runes cost its JSON.parse less than
// half of that.

// appendString appends s as a JSON string: escaped as encoding/json
// escapes it but for HTML's <, > and & (which jsonrpc2 leaves too), and
// for every rune past ASCII, escaped (appendRune).
func appendString(out, s []byte) []byte {
	return append(appendEscaped(append(out, '"'), s), '"')
}

// appendEscaped appends s escaped as in a JSON string (appendString),
// without its quotes.
func appendEscaped(out, s []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(s[i:])
			out = appendRune(out, r)
			i += n
			start = i
			continue
		}
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		default:
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	return append(out, s[start:]...)
}

// appendASCII appends doc, JSON, with every rune past ASCII escaped
// (appendRune): the same JSON, as such a rune can only be in a string.
func appendASCII(out, doc []byte) []byte {
	for i := 0; i < len(doc); {
		j := nextNonASCII(doc, i)
		out = append(out, doc[i:j]...)
		if j == len(doc) {
			break
		}
		r, n := utf8.DecodeRune(doc[j:])
		out = appendRune(out, r)
		i = j + n
	}
	return out
}

// nextNonASCII is the index of the first byte of s from i on that is not
// ASCII, or len(s); it looks at eight bytes at a time.
func nextNonASCII(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64(s[i:])&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	return i
}

// highBytes is how many bytes of s are not ASCII.
func highBytes(s []byte) int {
	n, i := 0, 0
	for ; i+8 <= len(s); i += 8 {
		n += bits.OnesCount64(binary.LittleEndian.Uint64(s[i:]) & 0x8080808080808080)
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			n++
		}
	}
	return n
}

// appendRune appends r escaped as in a JSON string, \uXXXX, a pair of
// surrogates past U+FFFF; invalid UTF-8 (utf8.RuneError) is \ufffd.
func appendRune(out []byte, r rune) []byte {
	if r > 0xffff {
		r1, r2 := utf16.EncodeRune(r)
		return appendU(appendU(out, r1), r2)
	}
	return appendU(out, r)
}

func appendU(out []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}
