package mime

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	mcharset "github.com/emersion/go-message/charset"
)

func TestBase64Lenient(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SGVsbG8=", "Hello"},
		{"SGVs\r\nbG8=\r\n", "Hello"},
		{"SGVsbG8", "Hello"},               // no padding
		{"SGVs!!bG8=", "Hello"},            // junk skipped
		{"SGVsbG8=SGVsbG8=", "HelloHello"}, // concatenated blocks
		{"SGV sbG 8=", "Hello"},            // spaces
		{"-_-_", "\xfb\xff\xbf"},           // URL-safe alphabet
		{"QQ", "A"},                        // two characters: one byte
		{"QUI", "AB"},                      // three: two bytes
		{"QUJD\nR", "ABC"},                 // a lone last character
		{"", ""},
	} {
		r := &base64Reader{r: iotest.OneByteReader(strings.NewReader(tc.in))}
		got, err := io.ReadAll(r)
		if err != nil || string(got) != tc.want {
			t.Errorf("base64 %q = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	r := &base64Reader{r: strings.NewReader("SGVs*bG8=")}
	io.ReadAll(r)
	if badBytes(r) != 1 {
		t.Errorf("bad = %d, want 1", badBytes(r))
	}
}

func TestQuotedPrintableLenient(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Caf=C3=A9\n", "Café\r\n"},
		{"caf=c3=a9", "café"},                    // lowercase hex, no final line end
		{"soft=\nbreak\n", "softbreak\r\n"},      // soft line break
		{"soft= \t\nbreak", "softbreak"},         // soft break with trailing white space
		{"trailing   \nx", "trailing\r\nx"},      // transport padding dropped
		{"1+1=2 and =ZZ\n", "1+1=2 and =ZZ\r\n"}, // stray '=' kept
		{"end=", "end"},
		{"a=\r\nb\r\n", "ab\r\n"},
	} {
		got, err := io.ReadAll(newQPReader(strings.NewReader(tc.in)))
		if err != nil || string(got) != tc.want {
			t.Errorf("qp %q = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// A line longer than the buffer with an escape across the cut.
	long := strings.Repeat("a", 16<<10-1) + "=41" + strings.Repeat("b", 100)
	got, _ := io.ReadAll(newQPReader(strings.NewReader(long)))
	if want := strings.Repeat("a", 16<<10-1) + "A" + strings.Repeat("b", 100); string(got) != want {
		t.Errorf("long line: %d bytes, escape at %d", len(got), strings.IndexByte(string(got), 'A'))
	}
}

func TestEncodedWords(t *testing.T) {
	d := &Decoder{notes: &Notes{}}
	for _, tc := range []struct{ in, want string }{
		{"=?utf-8?q?caf=C3=A9?=", "café"},
		{"=?UTF-8?B?Y2Fmw6k=?=", "café"},
		{"Re: =?utf-8?q?a?= =?utf-8?q?b?= c", "Re: ab c"}, // space between words dropped
		{"=?utf-8?q?a?=\t =?iso-8859-1?q?=E9?=", "aé"},    // different charsets, adjacent
		{"x=?utf-8?q?y?=z", "xyz"},                        // inside a word
		{"=?utf-8?q?hello world?=", "hello world"},        // space inside (broken encoder)
		{"=?utf-8*en?q?lang?=", "lang"},                   // RFC 2231 language
		{"=?utf-8?B?5p2l?= =?utf-8?B?6Ieq?=", "来自"},
		{splitWords("来自", 2, 3), "来自"},  // split mid-character
		{"=?gb2312?B?6UaGtA==?=", "镕喆"}, // GBK under the GB2312 label
		{"=?bogus", "=?bogus"},
		{"a =? b ?= c", "a =? b ?= c"},
		{"=?utf-8?x?y?=", "=?utf-8?x?y?="},
		{"plain", "plain"},
	} {
		if got := d.Text([]byte(tc.in), "test"); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// splitWords encodes s as base64 encoded words whose bytes are cut at the
// given offsets, as encoders of CJK text do.
func splitWords(s string, cuts ...int) string {
	b := []byte(s)
	var words []string
	last := 0
	for _, c := range append(cuts, len(b)) {
		words = append(words, "=?utf-8?B?"+base64.StdEncoding.EncodeToString(b[last:c])+"?=")
		last = c
	}
	return strings.Join(words, " ")
}

func TestRaw8Bit(t *testing.T) {
	gb := []byte{0xcf, 0xee, 0xc4, 0xbf} // 项目 in GBK
	for _, tc := range []struct {
		name, hint string
		in         []byte
		want       string
		guessed    bool
	}{
		{"utf-8", "", []byte("Grüße"), "Grüße", false},
		{"hint", "gbk", gb, "项目", false},
		{"guess gb18030", "", gb, "项目", true},
		{"guess gbk", "", []byte{0xd6, 0xec, 0xe9, 0x46, 0xbb, 0xf9}, "朱镕基", true},
		{"guess shift_jis", "", []byte{0x82, 0xa0, 0x82, 0xa2}, "あい", true},
		{"latin-1", "", []byte("Gr\xfc\xdfe M\xfcller"), "Grüße Müller", true},
		{"latin-1 pair", "", []byte("caf\xe9 na\xefve"), "café naïve", true},
		{"latin-1 high pair", "", []byte("Gr\xfc\xdfe"), "Grüße", true},
		{"gb after ascii", "", []byte("Re: ABC\xcf\xee\xc4\xbf"), "Re: ABC项目", true},
		{"iso-2022-jp escapes", "", []byte("\x1b$B$3$s$K$A$O\x1b(B"), "こんにちは", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Notes{}
			d := &Decoder{hint: tc.hint, notes: n}
			if got := d.Text(tc.in, "Subject"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if guessed := strings.Contains(n.String(), "guessed"); guessed != tc.guessed {
				t.Errorf("notes %q, guessed = %v, want %v", n.String(), guessed, tc.guessed)
			}
		})
	}
}

func TestDecodeCharset(t *testing.T) {
	for _, tc := range []struct {
		label string
		in    []byte
		want  string
		note  string
	}{
		{"gb2312", []byte{0xe9, 0x46}, "镕", ""},
		{"x-gbk", []byte{0xd6, 0xd0}, "中", ""},
		{"big5", []byte{0xa4, 0xa4}, "中", ""},
		{"iso-2022-jp", []byte("\x1b$BF|K\\\x1b(B"), "日本", ""},
		{"shift_jis", []byte{0x93, 0xfa, 0x96, 0x7b}, "日本", ""},
		{"euc-kr", []byte{0xc7, 0xd1}, "한", ""},
		{"euc-jp", []byte{0xc6, 0xfc}, "日", ""},
		{"windows-1251", []byte{0xcf, 0xf0, 0xe8}, "При", ""},
		{"koi8-r", []byte{0xf0, 0xd2, 0xc9}, "При", ""},
		{"iso-8859-2", []byte{0xb1}, "ą", ""},
		{"iso-8859-15", []byte{0xa4}, "€", ""},
		{"iso-8859-1", []byte{0x80}, "€", ""}, // read as Windows-1252
		{"windows-1252", []byte("caf\xe9"), "café", ""},
		{"us-ascii", []byte("caf\xc3\xa9"), "café", ""}, // mislabelled UTF-8
		{"iso-8859-1", []byte("caf\xc3\xa9"), "café", "valid UTF-8"},
		{"utf-8", []byte("caf\xe9"), "café", "Windows-1252"},
		{"x-made-up", []byte("caf\xc3\xa9"), "café", "unknown charset"},
		{"x-made-up", []byte("caf\xe9"), "café", "unknown charset"},
		{`"UTF-8"`, []byte("ok"), "ok", ""},
	} {
		n := &Notes{}
		got := decodeCharset(tc.in, tc.label, "", "part", n)
		if got != tc.want {
			t.Errorf("%s %q = %q, want %q", tc.label, tc.in, got, tc.want)
		}
		if (tc.note == "") != (n.String() == "") || !strings.Contains(n.String(), tc.note) {
			t.Errorf("%s %q: notes %q, want %q", tc.label, tc.in, n.String(), tc.note)
		}
	}
}

func TestGoMessageCharsetRegistered(t *testing.T) {
	// GBK-only characters under the GB2312 label, through go-message's
	// charset package: the repaired mapping wins there too.
	r, err := mcharset.Reader("gb2312", bytes.NewReader([]byte{0xe9, 0x46, 0x86, 0xb4})) // 镕喆 in GBK
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(r)
	if string(got) != "镕喆" {
		t.Errorf("gb2312 via go-message = %q", got)
	}
}

func TestParseMediaType(t *testing.T) {
	d := &Decoder{notes: &Notes{}}
	for _, tc := range []struct{ in, value, param, want string }{
		{`text/plain; charset="utf-8"`, "text/plain", "charset", "utf-8"},
		{`Text/HTML;CHARSET=GBK`, "text/html", "charset", "GBK"},
		{`attachment; filename="a \"b\".txt"`, "attachment", "filename", `a "b".txt`},
		{`attachment; filename*=UTF-8''%E2%82%AC.txt`, "attachment", "filename", "€.txt"},
		{`attachment; filename*=iso-8859-1'en'%E9t%E9.txt`, "attachment", "filename", "été.txt"},
		{`attachment; filename*1="b.txt"; filename*0="a"`, "attachment", "filename", "ab.txt"},
		{`attachment; filename*0*=UTF-8''%E4%B8%AD; filename*1=".pdf"; filename="fallback.pdf"`, "attachment", "filename", "中.pdf"},
		{`attachment; filename="=?UTF-8?B?5Lit?=.pdf"`, "attachment", "filename", "中.pdf"},
		{`attachment; filename=unquoted name.pdf`, "attachment", "filename", "unquoted name.pdf"},
		{`attachment; filename="unclosed.pdf; size=3`, "attachment", "filename", "unclosed.pdf"},
		{`multipart/mixed; boundary = "nextPart"`, "multipart/mixed", "boundary", "nextPart"},
		{`multipart/mixed; boundary=a; boundary=b`, "multipart/mixed", "boundary", "a"},
		{`;;; ; =x; charset`, "", "charset", ""},
		{`text/plain (comment); charset=us-ascii`, "text/plain", "charset", "us-ascii"},
	} {
		m := parseMediaType([]byte(tc.in))
		if m.value != tc.value {
			t.Errorf("%q: value %q, want %q", tc.in, m.value, tc.value)
		}
		p, _ := m.lookup(tc.param)
		if got := d.param(p, "p"); got != tc.want {
			t.Errorf("%q: %s = %q, want %q", tc.in, tc.param, got, tc.want)
		}
	}
}

func TestAddressList(t *testing.T) {
	d := &Decoder{notes: &Notes{}}
	for _, tc := range []struct{ in, want string }{
		{`Ann <ann@x.org>`, `[Ann <ann@x.org>]`},
		{`"Doe, John" <j@x.org>, b@x.org`, `[Doe, John <j@x.org> b@x.org]`},
		{`undisclosed-recipients:;`, `[]`},
		{`Team: a@x.org, B <b@x.org>;, c@x.org`, `[a@x.org B <b@x.org> c@x.org]`},
		{`a@x.org (Ann A)`, `[Ann A <a@x.org>]`},
		{`=?utf-8?q?J=C3=B6rg?= <j@x.de>`, `[Jörg <j@x.de>]`},
		{`"=?utf-8?q?J=C3=B6rg?=" <j@x.de>`, `[Jörg <j@x.de>]`},
		{`John Smith john@x.org`, `[John Smith <john@x.org>]`},
		{`<mailto:m@x.org>`, `[m@x.org]`},
		{`<@relay.org:u@x.org>`, `[u@x.org]`},
		{`root`, `[root]`},
		{`"Just a name"`, `[Just a name]`},
		{`a@x.org,,, ,b@x.org`, `[a@x.org b@x.org]`},
		{`Broken <a@x.org`, `[Broken <a@x.org>]`},
		{`"odd local"@x.org`, `["odd local"@x.org]`},
		{`a@x.org <b@x.org>`, `[a@x.org <b@x.org>]`},
	} {
		var got []string
		for _, a := range d.AddressList([]byte(tc.in), "To") {
			got = append(got, a.String())
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%q = %s, want %s", tc.in, s, tc.want)
		}
	}
}

func TestParseDate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Fri, 06 Feb 2026 19:30:00 +0100", "2026-02-06T18:30:00Z"},
		{"6 Feb 2026 19:30:00 +0100", "2026-02-06T18:30:00Z"},
		{"Fri, 6 Feb 2026 19:30 +0100", "2026-02-06T18:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 +0100 (CET)", "2026-02-06T18:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 EST", "2026-02-07T00:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 PDT", "2026-02-07T02:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 GMT", "2026-02-06T19:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 +0000 GMT", "2026-02-06T19:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 +01:00", "2026-02-06T18:30:00Z"},
		{"Fri, 06 Feb 26 19:30:00 +0000", "2026-02-06T19:30:00Z"},
		{"Friday, 06-Feb-2026 19:30:00 +0000", "2026-02-06T19:30:00Z"},
		{"Fri Feb  6 19:30:00 2026", "2026-02-06T19:30:00Z"},
		{"2026-02-06T19:30:00+01:00", "2026-02-06T18:30:00Z"},
		{"2026-02-06 19:30:00", "2026-02-06T19:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00", "2026-02-06T19:30:00Z"},
		{"Fri, 06 feb 2026 19:30:00 JST", "2026-02-06T10:30:00Z"},
		{"Fri, 06 Feb 2026 19:30:00 XYZ", "2026-02-06T19:30:00Z"},
		{"someday", ""},
		{"", ""},
		{"Mon, 01 Jan 1900 00:00:00 +0000", ""},
	} {
		got, ok := ParseDate(tc.in)
		s := ""
		if ok {
			s = got.Format(time.RFC3339)
		}
		if s != tc.want {
			t.Errorf("%q = %q, want %q", tc.in, s, tc.want)
		}
	}
}

func TestReadHeader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		fields   string
		body     string
	}{
		{"plain", "A: 1\r\nB: 2\r\n\r\nbody", "[A=1 B=2]", "body"},
		{"folded", "Subject: a\r\n  b\r\n\tc\r\n\r\n", "[Subject=a b c]", ""},
		{"mbox From line", "From a@b Mon Jan  1 00:00:00 2024\nA: 1\n\nx", "[A=1]", "x"},
		{"no blank line", "A: 1\nthis is the body\nmore body\n", "[A=1]", "this is the body\nmore body\n"},
		{"no header", "just a body\n\nmore\n", "[]", "just a body\n"},
		{"broken fold, list", "To: a@x,\nb@y\nC: 3\n\n", "[To=a@x, b@y C=3]", ""},
		{"junk line", "A: 1\nnot a header\nB: 2\n\nx", "[A=1 B=2]", "x"},
		{"key with space", "A: 1\nX Bad Key: v\nB: 2\n\n", "[A=1 X Bad Key=v B=2]", ""},
		{"indented first", " A: 1\nB: 2\n\n", "[A=1 B=2]", ""},
		{"space before colon", "Subject : hi\n\n", "[Subject=hi]", ""},
		{"eof in header", "A: 1\nB: 2", "[A=1 B=2]", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.in))
			h, left := readHeader(br, true, "header", &Notes{})
			var fs []string
			for _, f := range h {
				fs = append(fs, f.key+"="+string(f.value))
			}
			if got := fmt.Sprint(fs); got != tc.fields {
				t.Errorf("fields %s, want %s", got, tc.fields)
			}
			rest, _ := io.ReadAll(bodyReader(br, left))
			if !strings.HasPrefix(string(rest), tc.body) {
				t.Errorf("body %q, want it to start with %q", rest, tc.body)
			}
		})
	}
}

func TestMultipartReader(t *testing.T) {
	read := func(body, boundary string) (parts []string, mr *multipartReader) {
		mr = newMultipartReader(bufio.NewReaderSize(iotest.HalfReader(strings.NewReader(body)), 64), boundary)
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				return parts, mr
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, string(b))
		}
	}
	for _, tc := range []struct {
		name, body, boundary, want string
		truncated, none            bool
	}{
		{"basic", "pre\r\n--b\r\none\r\n--b\r\ntwo\r\n--b--\r\nepilogue", "b", "[one two]", false, false},
		{"lf", "--b\none\n\n--b\ntwo\n--b--\n", "b", "[one\n two]", false, false},
		{"no final boundary", "--b\none\n--b\ntwo\n", "b", "[one two\n]", true, false},
		{"nested prefix", "--abc\n--abcd\ninner\n--abcd--\n--abc--\n", "abc", "[--abcd\ninner\n--abcd--]", false, false},
		{"padding", "--b  \t\none\n--b\t\ntwo\n--b--", "b", "[one two]", false, false},
		{"text after boundary", "--b ignored\none\n--b--", "b", "[one]", false, false},
		{"no delimiter", "only text\n", "b", "[]", false, true},
		{"empty parts", "--b\n--b\n\n--b--\n", "b", "[ ]", false, false},
		{"long line", "--b\n" + strings.Repeat("x", 1000) + "\r\n--b--", "b", "[" + strings.Repeat("x", 1000) + "]", false, false},
		{"cr at a cut", "--b\n" + strings.Repeat("y", 63) + "\r\n--b--", "b", "[" + strings.Repeat("y", 63) + "]", false, false},
		{"eof after line end", "--b\none\n", "b", "[one\n]", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parts, mr := read(tc.body, tc.boundary)
			if got := fmt.Sprint(parts); got != tc.want {
				t.Errorf("parts %q, want %q", got, tc.want)
			}
			if mr.Truncated != tc.truncated || mr.NoDelimiter != tc.none {
				t.Errorf("truncated %v, no delimiter %v", mr.Truncated, mr.NoDelimiter)
			}
		})
	}
}

// TestLFReader: CRLF becomes LF across any split of the input; a lone CR,
// CR CR LF and a CR at the very end are kept as CRs.
func TestLFReader(t *testing.T) {
	cases := map[string]string{
		"a\r\nb\r\n":     "a\nb\n",
		"a\rb":           "a\rb",
		"a\r\r\nb":       "a\r\nb",
		"end\r":          "end\r",
		"\r\n\r\n":       "\n\n",
		"no breaks":      "no breaks",
		"":               "",
		"x\n\r\r\r\ny\r": "x\n\r\r\ny\r",
	}
	for in, want := range cases {
		for _, chunk := range []int{1, 2, 3, 1 << 20} {
			got, err := io.ReadAll(&lfReader{r: iotest.HalfReader(&chunkReader{s: in, n: chunk})})
			if err != nil || string(got) != want {
				t.Errorf("%q in chunks of %d: %q, %v; want %q", in, chunk, got, err, want)
			}
		}
	}
}

// chunkReader returns s at most n bytes a read.
type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.s)
	c.s = c.s[k:]
	return k, nil
}
