package mime

import (
	"encoding/json"
	"io"
	stdmime "mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	mcharset "github.com/emersion/go-message/charset"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/testutil"
)

// corpusDeviations lists the corpus files whose subject this package
// decodes differently from the reference, on purpose.
var corpusDeviations = map[string]string{}

// TestCorpus reads every message of the shared corpus (set COURIER_CORPUS
// to its directory): none may fail, and decoded subjects must match a
// reference parse: stalwart's expected output where there is one, else the
// standard library's mime.WordDecoder where it can decode the subject.
// (That every message normalises to a valid protocol message is checked by
// the email package's TestCorpusValid.)
func TestCorpus(t *testing.T) {
	dir, files := testutil.CorpusEMLs(t)
	s := testutil.NewDropzone(t, nil)
	var (
		stalwart, stdlib, skipped, deviated, noted int
	)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		t.Run(rel, func(t *testing.T) {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			v := readView(t, s, f)
			if v.notes != "" {
				noted++
			}
			got := fold(v.subject)
			ref, how := referenceSubject(t, dir, p)
			if how == "" || strings.HasPrefix(how, "no reference") {
				skipped++
				if how == "" {
					how = "no Subject"
				}
				t.Logf("%s: %s; our subject %q", rel, how, got)
				return
			}
			if why, ok := corpusDeviations[rel]; ok {
				deviated++
				t.Logf("%s: deviates on purpose (%s): got %q, %s reference %q", rel, why, got, how, ref)
				return
			}
			if got != fold(ref) {
				t.Errorf("%s: subject %q, %s reference %q", rel, got, how, ref)
			}
			if how == "stalwart" {
				stalwart++
			} else {
				stdlib++
			}
		})
	}
	t.Logf("corpus: %d files; subjects checked against stalwart %d, mime.WordDecoder %d; deviations %d; not comparable %d; with notes %d",
		len(files), stalwart, stdlib, deviated, skipped, noted)
}

// referenceSubject returns the subject of the message at p by a reference
// parse, and which one; how is "" when neither can say.
func referenceSubject(t *testing.T, dir, p string) (subject, how string) {
	rel, _ := filepath.Rel(dir, p)
	if strings.HasPrefix(rel, filepath.Join("email", "stalwart")+string(filepath.Separator)) {
		exp := filepath.Join(dir, "email", "expected", "stalwart", strings.TrimSuffix(filepath.Base(p), ".eml")+".json")
		if data, err := os.ReadFile(exp); err == nil {
			var doc struct {
				Parts []struct {
					Headers []struct {
						Name  any             `json:"name"`
						Value json.RawMessage `json:"value"`
					} `json:"headers"`
				} `json:"parts"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatalf("%s: %v", exp, err)
			}
			if len(doc.Parts) > 0 {
				for _, h := range doc.Parts[0].Headers {
					if h.Name != "subject" {
						continue
					}
					var v struct{ Text *string }
					if json.Unmarshal(h.Value, &v) == nil && v.Text != nil {
						return *v.Text, "stalwart"
					}
				}
			}
		}
	}
	raw, ok := rawSubject(t, p)
	if !ok {
		return "", "" // no Subject
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] >= 0x80 {
			return "", "no reference: raw 8-bit subject, which the standard library passes through"
		}
	}
	dec := stdmime.WordDecoder{CharsetReader: mcharset.Reader}
	s, err := dec.DecodeHeader(raw)
	switch {
	case err != nil:
		return "", "no reference: mime.WordDecoder fails: " + err.Error()
	case !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError):
		return "", "no reference: mime.WordDecoder gives invalid text " + strconv.Quote(s)
	}
	return s, "mime.WordDecoder"
}

// rawSubject finds the unfolded Subject of the top-level header of the
// message at p, with a minimal reader of its own.
func rawSubject(t *testing.T, p string) (string, bool) {
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		key, value, ok := strings.Cut(l, ":")
		if ok && strings.EqualFold(strings.TrimRight(key, " \t"), "subject") {
			v := strings.TrimSpace(value)
			for _, c := range lines[i+1:] {
				if c == "" || (c[0] != ' ' && c[0] != '\t') {
					break
				}
				v += " " + strings.TrimSpace(c)
			}
			return v, true
		}
	}
	return "", false
}

// fold collapses white space, for comparing subjects.
func fold(s string) string { return strings.Join(strings.Fields(s), " ") }

// view is what the corpus tests compare of a message read: the fields
// the email package's Normalize makes of the reader's output, made the
// same way (session.name, content.text, the artifacts' names).
type view struct {
	subject string   // the decoded Subject
	text    string   // the plain text, "" when only white space
	names   []string // the artifacts' file names, in order
	notes   string   // the reader's notes
}

// readView reads raw with Read into a batch of s that is then aborted;
// it fails the test if Read fails.
func readView(t testing.TB, s *dropzone.Store, raw io.Reader) view {
	t.Helper()
	b := s.NewBatch()
	defer b.Abort()
	m, err := Read(raw, b, Options{})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	defer m.Close()
	v := view{subject: CleanText(m.Decoder.Text(m.Header.Get("Subject"), "Subject"), "Subject", m.Notes)}
	for i := range m.Artifacts {
		v.names = append(v.names, m.Artifacts[i].FileName(m.Decoder))
	}
	var text strings.Builder
	if err := NewRenderer(m.Decoder, nil).WriteText(&text, m.Body); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	v.text = CleanText(text.String(), "content.text", m.Notes)
	if strings.TrimSpace(v.text) == "" {
		v.text = ""
	}
	v.notes = m.Notes.String()
	return v
}
