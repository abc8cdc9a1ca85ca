package mime

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	mcharset "github.com/emersion/go-message/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	xunicode "golang.org/x/text/encoding/unicode"
)

// repaired maps charset labels to the encoding that decodes what is really
// sent under them. Mail labelled GB2312 is very often GBK (a superset), and
// GB18030 is a superset of both; ISO-8859-1 is mostly Windows-1252 (as the
// WHATWG encoding standard says for the web); Korean and Japanese mail uses
// the Microsoft supersets under the older names. These win over the IANA
// index, here and, through init, in go-message's charset package, so that
// every part of the email adapter decodes a label the same way.
var repaired = map[string]encoding.Encoding{
	"gb2312":           simplifiedchinese.GB18030,
	"gb_2312-80":       simplifiedchinese.GB18030,
	"csgb2312":         simplifiedchinese.GB18030,
	"x-gbk":            simplifiedchinese.GB18030,
	"gbk":              simplifiedchinese.GB18030,
	"cp936":            simplifiedchinese.GB18030,
	"ms936":            simplifiedchinese.GB18030,
	"windows-936":      simplifiedchinese.GB18030,
	"euc-cn":           simplifiedchinese.GB18030,
	"x-euc-cn":         simplifiedchinese.GB18030,
	"chinese":          simplifiedchinese.GB18030,
	"gb18030":          simplifiedchinese.GB18030,
	"big5":             traditionalchinese.Big5,
	"big-5":            traditionalchinese.Big5,
	"x-big5":           traditionalchinese.Big5,
	"big5-hkscs":       traditionalchinese.Big5,
	"cn-big5":          traditionalchinese.Big5,
	"cp950":            traditionalchinese.Big5,
	"iso-8859-1":       charmap.Windows1252,
	"iso8859-1":        charmap.Windows1252,
	"iso_8859-1":       charmap.Windows1252,
	"latin1":           charmap.Windows1252,
	"l1":               charmap.Windows1252,
	"cp1252":           charmap.Windows1252,
	"windows-1252":     charmap.Windows1252,
	"ks_c_5601-1987":   korean.EUCKR,
	"ks_c_5601":        korean.EUCKR,
	"ksc5601":          korean.EUCKR,
	"euc-kr":           korean.EUCKR,
	"cp949":            korean.EUCKR,
	"shift_jis":        japanese.ShiftJIS,
	"shift-jis":        japanese.ShiftJIS,
	"sjis":             japanese.ShiftJIS,
	"x-sjis":           japanese.ShiftJIS,
	"ms_kanji":         japanese.ShiftJIS,
	"cp932":            japanese.ShiftJIS,
	"windows-31j":      japanese.ShiftJIS,
	"iso-2022-jp":      japanese.ISO2022JP,
	"iso-2022-jp-2":    japanese.ISO2022JP,
	"csiso2022jp":      japanese.ISO2022JP,
	"euc-jp":           japanese.EUCJP,
	"x-euc-jp":         japanese.EUCJP,
	"tis-620":          charmap.Windows874,
	"windows-874":      charmap.Windows874,
	"utf8":             xunicode.UTF8,
	"x-utf_8j":         xunicode.UTF8,
	"ansi_x3.110-1983": charmap.ISO8859_1,
}

func init() {
	// go-message's charset package (imported for its side effect of setting
	// message.CharsetReader) consults its own table first: put the repaired
	// labels there too, so that code using go-message directly agrees.
	for label, enc := range repaired {
		mcharset.RegisterEncoding(label, enc)
	}
}

// charsetLabel normalises a charset label as found in a header: lowercase,
// quotes and white space trimmed, an RFC 2231 language suffix dropped.
func charsetLabel(s string) string {
	s = strings.ToLower(strings.Trim(s, " \t\r\n\"'"))
	if i := strings.IndexByte(s, '*'); i >= 0 {
		s = s[:i]
	}
	return s
}

// isUTF8Label reports whether label means UTF-8, or US-ASCII (a subset).
func isUTF8Label(label string) bool {
	switch label {
	case "utf-8", "utf8", "us-ascii", "ascii", "ansi_x3.4-1968", "iso-646-us", "us", "iso646-us", "csascii", "x-unknown", "unknown-8bit", "x-user-defined", "default", "7bit", "8bit":
		return true
	}
	return false
}

// lookupCharset returns the encoding of a label, or nil when it names none
// that can be decoded. UTF-8 and US-ASCII labels return nil too: callers
// check isUTF8Label first.
func lookupCharset(label string) encoding.Encoding {
	if label == "" {
		return nil
	}
	if enc, ok := repaired[label]; ok {
		return enc
	}
	for _, name := range []string{label, "cs" + label} {
		if enc, err := ianaindex.MIME.Encoding(name); err == nil && enc != nil {
			return enc
		}
	}
	if enc, err := htmlindex.Get(label); err == nil && enc != nil {
		return enc
	}
	// Common spellings the indexes miss: "iso8859-15", "windows1251".
	if rest, ok := strings.CutPrefix(label, "iso8859"); ok {
		return lookupIndexed("iso-8859" + strings.TrimPrefix(rest, "_"))
	}
	if rest, ok := strings.CutPrefix(label, "windows"); ok && rest != "" && rest[0] != '-' {
		return lookupIndexed("windows-" + rest)
	}
	if rest, ok := strings.CutPrefix(label, "cp"); ok && len(rest) == 4 && strings.HasPrefix(rest, "125") {
		return lookupIndexed("windows-" + rest)
	}
	return nil
}

func lookupIndexed(label string) encoding.Encoding {
	if enc, err := ianaindex.MIME.Encoding(label); err == nil && enc != nil {
		return enc
	}
	if enc, err := htmlindex.Get(label); err == nil && enc != nil {
		return enc
	}
	return nil
}

// singleByte reports whether enc is a one-byte-per-character charset, in
// which valid UTF-8 multi-byte text is almost never what was meant.
func singleByte(enc encoding.Encoding) bool {
	_, ok := enc.(*charmap.Charmap)
	return ok
}

// decodeWith decodes b with enc and reports whether every byte was valid:
// no replacement characters, no C1 controls, none of the private use
// characters GB18030 maps some unassigned codes to.
func decodeWith(enc encoding.Encoding, b []byte) (string, bool) {
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return "", false
	}
	s := string(out)
	ok := true
	for _, r := range s {
		if r == utf8.RuneError || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Co, r) {
			ok = false
			break
		}
	}
	if !ok && bytes.Contains(b, []byte("\uFFFD")) {
		// The input held replacement characters of its own: judge by C1
		// controls alone.
		ok = !strings.ContainsFunc(s, func(r rune) bool { return r >= 0x80 && r <= 0x9f })
	}
	return s, ok
}

// decodeText is normalizeNewlines(decodeCharset(b, ...)) for a text part:
// when b is the text as it stands (UTF-8, or ASCII under any label that
// decodeCharset lets it through with), its line ends are turned to LF in b
// itself and the text copied out once, rather than three times. b is
// changed.
func decodeText(b []byte, label, hint, what string, n *Notes) string {
	if asIs(b, charsetLabel(label)) {
		return string(normalizeNewlinesBytes(b))
	}
	return normalizeNewlines(decodeCharset(b, label, hint, what, n))
}

// asIs reports whether decodeCharset returns b as it is, noting nothing:
// UTF-8 under a UTF-8 label or none, and ASCII under any other label but
// ISO-2022-JP's (an unknown one included).
func asIs(b []byte, label string) bool {
	if label == "" || isUTF8Label(label) {
		return (isASCII(b) && !hasEscape(b)) || (utf8.Valid(b) && !hasJISEscape(b))
	}
	return isASCII(b) && lookupCharset(label) != japanese.ISO2022JP
}

// decodeCharset turns b, labelled with charset label, into UTF-8, noting in
// n what it had to repair or guess. hint is the charset to try for unlabelled
// 8-bit bytes.
func decodeCharset(b []byte, label, hint, what string, n *Notes) string {
	label = charsetLabel(label)
	if label == "" || isUTF8Label(label) {
		if isASCII(b) && !hasEscape(b) {
			return string(b)
		}
		if utf8.Valid(b) && !hasJISEscape(b) {
			return string(b)
		}
		if label == "utf-8" || label == "utf8" {
			n.Addf("%s: invalid UTF-8 bytes decoded as Windows-1252", what)
			return repairUTF8(b)
		}
		return decode8bit(b, hint, what, n)
	}
	enc := lookupCharset(label)
	if enc == nil {
		if utf8.Valid(b) {
			if !isASCII(b) {
				n.Addf("%s: unknown charset %q: kept as UTF-8", what, label)
			}
			return string(b)
		}
		n.Addf("%s: unknown charset %q: decoded as Windows-1252", what, label)
		s, _ := decodeWith(charmap.Windows1252, b)
		return s
	}
	if isASCII(b) && enc != japanese.ISO2022JP {
		return string(b)
	}
	s, ok := decodeWith(enc, b)
	if ok && !(singleByte(enc) && utf8.Valid(b)) {
		return s
	}
	if utf8.Valid(b) && !isASCII(b) {
		n.Addf("%s: labelled %s but valid UTF-8: decoded as UTF-8", what, label)
		return string(b)
	}
	if !ok {
		n.Addf("%s: bytes not valid in %s replaced", what, label)
	}
	return s
}

// repairUTF8 keeps the valid UTF-8 of b and decodes each invalid byte as
// Windows-1252, which is what such bytes most often are (Latin text pasted
// into a UTF-8 message).
func repairUTF8(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			s, _ := decodeWith(charmap.Windows1252, b[:1])
			sb.WriteString(s)
			b = b[1:]
			continue
		}
		sb.Write(b[:size])
		b = b[size:]
	}
	return sb.String()
}

// decode8bit decodes bytes that came without a charset (raw 8-bit header
// bytes, an unlabelled body): UTF-8 when valid (RFC 6532); ISO-2022-JP when
// it has that charset's escape sequences; the hint (the charset of the
// message's text) when the bytes are valid in it; else, guessing, GB18030,
// Shift_JIS or Big5 when the bytes look like that charset; else
// Windows-1252. Guesses are noted in n.
func decode8bit(b []byte, hint, what string, n *Notes) string {
	if hasJISEscape(b) {
		if s, ok := decodeWith(japanese.ISO2022JP, b); ok {
			return s
		}
	}
	if utf8.Valid(b) {
		return string(b)
	}
	if hint != "" {
		if enc := lookupCharset(hint); enc != nil && enc != japanese.ISO2022JP {
			if s, ok := decodeWith(enc, b); ok {
				return s
			}
		}
	}
	for _, c := range guesses {
		if !c.plausible(b) {
			continue
		}
		if s, ok := decodeWith(c.enc, b); ok {
			n.Addf("%s: raw 8-bit bytes without a charset: guessed %s", what, c.name)
			return s
		}
	}
	n.Addf("%s: raw 8-bit bytes without a charset: guessed Windows-1252", what)
	s, _ := decodeWith(charmap.Windows1252, b)
	return s
}

// A charsetGuess is a charset that decode8bit tries on unlabelled bytes, with a
// test of whether the bytes look like text in it: being valid is not enough,
// as Latin-1 text is often valid GB18030 or Shift_JIS.
type charsetGuess struct {
	name      string
	enc       encoding.Encoding
	plausible func([]byte) bool
}

var guesses = []charsetGuess{
	{"GB18030", simplifiedchinese.GB18030, plausibleGB},
	{"Shift_JIS", japanese.ShiftJIS, plausibleSJIS},
	{"Big5", traditionalchinese.Big5, plausibleBig5},
}

// plausibleGB: two-byte characters whose second byte is high (GB2312 and
// most of GBK), or ASCII (the GBK extension) only next to other high bytes,
// so that a lone accented Latin letter never passes; at most a quarter of
// them start with 0x81-0xa0, the rare GBK extension, which is where
// Shift_JIS puts its kana.
func plausibleGB(b []byte) bool {
	if latinLike(b) {
		return false
	}
	pairs, rare := 0, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 0x80 {
			continue
		}
		if c == 0x80 || c == 0xff || i+1 >= len(b) {
			return false
		}
		t := b[i+1]
		switch {
		case t >= 0x80 && t != 0xff:
		case t >= 0x40 && t <= 0x7e:
			if !(i > 0 && b[i-1] >= 0x80) && !(i+2 < len(b) && b[i+2] >= 0x80) {
				return false
			}
		default:
			return false
		}
		pairs++
		if c <= 0xa0 {
			rare++
		}
		i++
	}
	return rare*4 <= pairs
}

// latinLike reports whether a run of high bytes sits between two ASCII
// letters, as accented letters do inside Latin words ("Grüße") and CJK text
// rarely does.
func latinLike(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] < 0x80 {
			continue
		}
		j := i
		for j < len(b) && b[j] >= 0x80 {
			j++
		}
		if i > 0 && isLetter(b[i-1]) && j < len(b) && isLetter(b[j]) {
			return true
		}
		i = j
	}
	return false
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// plausibleSJIS: two-byte characters only (no half-width katakana, which
// Latin capitals with accents would read as); a pair whose second byte is
// ASCII must start with a first-level lead byte (0x81-0x9f), as Latin-1
// letters (0xc0-0xff) followed by ASCII are not Japanese.
func plausibleSJIS(b []byte) bool {
	if latinLike(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 0x80 {
			continue
		}
		if !(c >= 0x81 && c <= 0x9f || c >= 0xe0 && c <= 0xfc) || i+1 >= len(b) {
			return false
		}
		t := b[i+1]
		switch {
		case t >= 0x80 && t <= 0xfc:
		case t >= 0x40 && t <= 0x7e:
			if c > 0x9f {
				return false
			}
		default:
			return false
		}
		i++
	}
	return true
}

// plausibleBig5: two-byte characters with a lead in 0xa1-0xf9; an ASCII
// second byte only after the lead bytes of the common characters.
func plausibleBig5(b []byte) bool {
	if latinLike(b) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < 0x80 {
			continue
		}
		if c < 0xa1 || c > 0xf9 || i+1 >= len(b) {
			return false
		}
		t := b[i+1]
		switch {
		case t >= 0xa1 && t <= 0xfe:
		case t >= 0x40 && t <= 0x7e:
			if c < 0xa4 || c > 0xc6 {
				return false
			}
		default:
			return false
		}
		i++
	}
	return true
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func hasEscape(b []byte) bool { return bytes.IndexByte(b, 0x1b) >= 0 }

// hasJISEscape reports whether b holds the escape sequences that switch
// ISO-2022-JP into JIS X 0208.
func hasJISEscape(b []byte) bool {
	return bytes.Contains(b, []byte("\x1b$B")) || bytes.Contains(b, []byte("\x1b$@"))
}
