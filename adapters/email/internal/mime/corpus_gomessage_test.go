package mime

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	gomessage "github.com/emersion/go-message"
	gomail "github.com/emersion/go-message/mail"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
)

// goMessageDeviations lists the corpus files where Read and go-message
// disagree on purpose, with the reason. A file listed here that agrees
// again fails the test, so the list stays true.
var goMessageDeviations = map[string]string{
	// RFC 2046 §5.1.1's note: "it is sufficient that the boundary appear
	// in its entirety following the CRLF"; mime4j's expected output has
	// "first part". Go's multipart reader (under go-message) wants only
	// white space after the boundary and finds no part.
	"email/mime4j/ending-boundaries.eml": "a delimiter line with text after the boundary",
	// Encoded words run together inside a quoted file name are decoded
	// (MIME-tools' own test says the file is "3d-compress.gif");
	// go-message leaves them raw.
	"email/mime4j/mimetools-multi-2evil.eml": "encoded words inside a file name",
	// RFC 2046 §5.1.5: in multipart/digest a part without Content-Type is
	// message/rfc822, kept whole and shown as a forward; go-message reads
	// it as text/plain.
	"email/mime4j/multipartdigestnestedemptyparts.eml": "multipart/digest's default type",
	// A raw 8-bit byte inside a Q encoded word ("Fr\xf6sche"): decoded in
	// the word's charset, as stalwart's expected parse has it ("Die Hasen
	// und die Frösche"); go-message gives up on the word.
	"email/stalwart/legacy-015.eml": "raw 8-bit byte in an encoded word",
	// A message attached inside an attached message is shown but not
	// stored on its own: its bytes are in the outer one's .eml (see
	// forwardInline). go-message's leaves count it.
	"email/mime4j/base64encoded-rfc822message-nested.eml": "a nested attached message is stored inside its outer one",
	"email/mime4j/mimetools-re-fwd.eml":                   "a nested attached message is stored inside its outer one",
}

// goMessageKnownBugs lists differences that are the reader's bugs, not yet
// fixed; they are logged, not failed, so that the cross-check keeps
// guarding the rest. A listed file that agrees again fails the test.
var goMessageKnownBugs = map[string]string{}

// goMessageView is what go-message makes of a message.
type goMessageView struct {
	subject string
	header  string   // the header block shown for a forwarded message
	texts   []string // inline text/plain parts without a file name, in order
	files   []string // names of the other leaves ("" when unnamed)
}

// readGoMessage parses a message with go-message's mail.CreateReader and
// NextPart. It fails when go-message reports any error, unknown charsets
// and encodings and unparsable Content-Type or Content-Disposition fields
// included; outright is true when CreateReader itself fails (the header
// of the message).
func readGoMessage(r io.Reader) (v *goMessageView, outright bool, err error) {
	mr, err := gomail.CreateReader(r)
	if err != nil {
		return nil, true, err
	}
	defer mr.Close()
	v = &goMessageView{}
	if v.subject, err = mr.Header.Subject(); err != nil {
		return nil, true, err
	}
	v.header = ForwardTitle + "\n"
	for _, k := range fwdFields {
		if !mr.Header.Has(k) {
			continue
		}
		t, err := mr.Header.Text(k)
		if err != nil {
			return nil, true, err
		}
		if t = strings.Join(strings.Fields(t), " "); t != "" {
			v.header += k + ": " + t + "\n"
		}
	}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return v, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		body, err := io.ReadAll(p.Body)
		if err != nil {
			return nil, false, err
		}
		h := gomessage.Header{}
		switch ph := p.Header.(type) {
		case *gomail.InlineHeader:
			h = ph.Header
		case *gomail.AttachmentHeader:
			h = ph.Header
		}
		ct, params, err := h.ContentType()
		if err != nil && h.Has("Content-Type") {
			return nil, false, err
		}
		disp, dparams, err := h.ContentDisposition()
		if err != nil && h.Has("Content-Disposition") {
			return nil, false, err
		}
		name := dparams["filename"]
		if name == "" {
			name = params["name"] // as AttachmentHeader.Filename does
		}
		_, attachment := p.Header.(*gomail.AttachmentHeader)
		if (ct == "message/rfc822" || ct == "message/global") && disp != "attachment" {
			// Shown inline, as Read shows it: kept whole as a file,
			// its header block (decoded by go-message) and text joining
			// the texts, its parts the files.
			v.files = append(v.files, name)
			fwd, _, err := readGoMessage(bytes.NewReader(body))
			if err != nil {
				return nil, false, err
			}
			v.texts = append(v.texts, fwd.header)
			v.texts = append(v.texts, fwd.texts...)
			v.files = append(v.files, fwd.files...)
			continue
		}
		switch {
		case attachment || name != "":
			v.files = append(v.files, name)
		case ct == "text/plain":
			v.texts = append(v.texts, string(body))
		case ct == "text/html":
			// The HTML body: not compared here.
		default:
			// Inline, but neither text/plain nor text/html (an inline
			// image, text/richtext): Read keeps it as an artifact.
			v.files = append(v.files, name)
		}
	}
}

// comparableText makes two renderings of a body comparable: LF line ends,
// no trailing white space on lines, no trailing blank lines, no NULs
// (CleanText removes them, noted).
func comparableText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\x00", "")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// TestCorpusGoMessage cross-checks Read with an independent parser:
// for every corpus .eml that go-message parses without error, the decoded
// Subject, the text/plain body and the number and names of the other parts
// must agree (set COURIER_CORPUS to the corpus directory).
func TestCorpusGoMessage(t *testing.T) {
	dir, files := testutil.CorpusEMLs(t)
	s := testutil.NewDropzone(t, nil)
	var (
		refused, refusedOutright              int
		compared, textCompared, filesCompared int
		mismatches                            []string
		why                                   = map[string]int{}
	)
	deviated, known := map[string]bool{}, map[string]bool{}
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		gm, outright, err := readGoMessage(strings.NewReader(string(raw)))
		if err != nil {
			refused++
			if outright {
				refusedOutright++
			}
			switch {
			case gomessage.IsUnknownCharset(err):
				why["unknown charset"]++
			case gomessage.IsUnknownEncoding(err):
				why["unknown transfer encoding"]++
			default:
				why[firstWords(err.Error(), 4)]++
			}
			t.Logf("go-message refuses %s: %v", rel, err)
			continue
		}
		compared++
		m := readView(t, s, strings.NewReader(string(raw)))
		var diffs []string
		if fold(m.subject) != fold(gm.subject) {
			diffs = append(diffs, "subject "+QuoteShort(m.subject)+" vs "+QuoteShort(gm.subject))
		}
		ours := comparableText(m.text)
		theirs := comparableText(strings.Join(gm.texts, "\n"))
		if len(gm.texts) > 0 || ours != "" {
			textCompared++
			if ours != theirs {
				diffs = append(diffs, "text "+QuoteShort(ours)+" vs "+QuoteShort(theirs))
			}
		}
		ourNames := m.names
		var theirNames []string
		unnamed := 0
		for _, f := range gm.files {
			if f == "" {
				unnamed++
				continue
			}
			theirNames = append(theirNames, dropzone.SanitizeName(f))
		}
		if len(ourNames)+len(theirNames) > 0 {
			filesCompared++
		}
		if len(ourNames) != len(gm.files) || !containsAll(ourNames, theirNames) {
			diffs = append(diffs, "parts "+strings.Join(ourNames, "|")+" vs "+strings.Join(theirNames, "|")+
				strings.Repeat("|(unnamed)", unnamed))
		}
		reason, listed := goMessageDeviations[rel]
		bug, isBug := goMessageKnownBugs[rel]
		switch {
		case len(diffs) > 0 && listed:
			deviated[rel] = true
			t.Logf("%s differs on purpose (%s): %s", rel, reason, strings.Join(diffs, "; "))
		case len(diffs) > 0 && isBug:
			known[rel] = true
			t.Logf("KNOWN BUG in the reader, %s (%s): %s", rel, bug, strings.Join(diffs, "; "))
		case len(diffs) > 0:
			mismatches = append(mismatches, rel+": "+strings.Join(diffs, "; "))
		case listed:
			t.Errorf("%s is listed as a deliberate difference (%s) but agrees now: remove it", rel, reason)
		case isBug:
			t.Errorf("%s is listed as a known bug (%s) but agrees now: remove it", rel, bug)
		}
	}
	for _, m := range mismatches {
		t.Error(m)
	}
	var reasons []string
	for k, n := range why {
		reasons = append(reasons, k+": "+strconv.Itoa(n))
	}
	sort.Strings(reasons)
	t.Logf("%d .eml files: go-message refuses %d (%d outright, at the message header; %d in a part): %s",
		len(files), refused, refusedOutright, refused-refusedOutright, strings.Join(reasons, "; "))
	t.Logf("%d compared (subject of all, text body of %d, other parts of %d): %d agree, %d differ on purpose, %d known bugs, %d unexplained",
		compared, textCompared, filesCompared, compared-len(deviated)-len(known)-len(mismatches), len(deviated), len(known), len(mismatches))
}

// containsAll reports whether have holds every name of want (as a
// multiset).
func containsAll(have, want []string) bool {
	left := map[string]int{}
	for _, h := range have {
		left[h]++
	}
	for _, w := range want {
		if left[w] == 0 {
			return false
		}
		left[w]--
	}
	return true
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.Join(f, " ")
}
