package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"
)

const sampleEntry = `{"id":"email_00000000000000000000","provider":"email","direction":"inbound","path":".monoco/mailbox/inbound/email/20260101T000000_email_00000000000000000000.md","timestamp":"2026-01-01T00:00:00Z","received_at":"2026-01-01T00:00:01Z","processed_at":null,"session":{"id":"email-thread:t0@example.com","type":"thread","name":"Subject 0","thread_key":"email-thread:t0@example.com"},"from":{"id":"user0@example.com","name":"User 0"},"type":"text","preview":"Message 0: The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fo…","correlation_id":"task_0","reply_to":"","thread_root":"","status":"new"}`

// An entry's line in a listing's text has the columns of the header,
// read out of its JSON: strings decoded, on one line, without control
// characters or bidi overrides; from is the sender's name, else its id.
func TestEntryLine(t *testing.T) {
	for _, c := range []struct{ entry, want string }{
		{sampleEntry, "email_00000000000000000000\temail\tinbound\tUser 0\tnew\t\t2026-01-01T00:00:00Z\ttask_0\t\tMessage 0: The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fo…\n"},
		{`{"id":"slack_C1_1","provider":"slack","direction":"inbound","session":{"id":"C1","name":"a \"}{[ name"},"from":{"id":"U1","name":""},"preview":"tab\there\nand a line\u2028and \u202egnp.exe \"quoted\" \\ back","status":"claimed","claimed_by":"ag\u001b[31ment","claim_expires_at":"2026-01-01T00:05:00Z","failures":2}`,
			"slack_C1_1\tslack\tinbound\tU1\tclaimed\tag[31ment\t\t\t\ttab here and a line and gnp.exe \"quoted\" \\ back\n"},
		{`{"id":"x","from":null,"preview":"","status":"new","reply_to":"email_1","nested":[{"a":[1,2,{"b":"]}"}]}],"timestamp":"t"}`, "x\t\t\t\tnew\t\tt\t\temail_1\t\n"},
	} {
		if !json.Valid([]byte(c.entry)) {
			t.Fatalf("not JSON: %s", c.entry)
		}
		if got := string(entryLine(nil, []byte(c.entry))); got != c.want {
			t.Errorf("entryLine(%s)\n = %q\nwant %q", c.entry, got, c.want)
		}
		if n := strings.Count(textHeader, "\t"); strings.Count(c.want, "\t") != n {
			t.Errorf("%q has not the header's %d columns", c.want, n+1)
		}
	}
}

func BenchmarkEntryLine(b *testing.B) {
	var out []byte
	e := []byte(sampleEntry)
	for b.Loop() {
		out = entryLine(out[:0], e)
	}
	b.SetBytes(int64(len(sampleEntry)))
}

// An entry laid out as list prints the inbox's (entryLayout) gives the
// line that reading it member by member gives; and each line as sent is
// the line escaped in a JSON string, as ASCII.
func TestEntryLineLayout(t *testing.T) {
	layout := func(e string) string {
		return strings.Replace(sampleEntry, `"preview":"Message 0: The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick brown fo…"`, e, 1)
	}
	var v [len(textColumns)][]byte
	if !layoutColumns([]byte(sampleEntry), &v) || !layoutColumns([]byte(layout(`"preview":"x"`)), &v) {
		t.Error("an entry as list prints it is not read by its layout")
	}
	for _, e := range []string{
		sampleEntry,
		layout(`"preview":"tab\there \"quoted\" \\ back \u2028 \u202e é中🙂"`),
		strings.Replace(sampleEntry, `"name":"User 0"`, `"name":""`, 1),
		strings.Replace(sampleEntry, `"status":"new"}`, `"status":"claimed","claimed_by":"agent","claim_expires_at":"2026-01-01T00:05:00Z","failures":1}`, 1),
		strings.Replace(sampleEntry, `"provider":"email",`, ``, 1),
		strings.Replace(sampleEntry, `{"id":"user0@example.com","name":"User 0"}`, `{"name":"User 0","id":"user0@example.com"}`, 1),
	} {
		if !json.Valid([]byte(e)) {
			t.Fatalf("not JSON: %s", e)
		}
		var vals [len(textColumns)][]byte
		members([]byte(e), func(key, val []byte) {
			if string(key) == "from" {
				vals[3] = sender(val)
			} else if i := columnOf(key); i >= 0 {
				vals[i] = val
			}
		})
		var want []byte
		for i, v := range vals {
			if i > 0 {
				want = append(want, '\t')
			}
			want = appendValue(want, v)
		}
		want = append(want, '\n')
		text, esc := appendLine(nil, nil, []byte(e))
		if string(text) != string(want) {
			t.Errorf("appendLine(%s)\n = %q\nwant %q", e, text, want)
		}
		var dec string
		if err := json.Unmarshal([]byte(`"`+string(esc)+`"`), &dec); err != nil || dec != string(text) {
			t.Errorf("the line as sent %s decodes to %q (%v), want %q", esc, dec, err, text)
		}
		if i := strings.IndexFunc(string(esc), func(r rune) bool { return r >= 0x80 }); i >= 0 {
			t.Errorf("the line as sent is not ASCII: %s", esc)
		}
	}
}
